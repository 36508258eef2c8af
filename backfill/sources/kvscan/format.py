"""The kv-scan input format (docs/architecture.md "The kv-scan input"): one module that the reader, the
simulator and the tests share, so the three cannot drift apart.

A capture folder holds `manifest.json`, `events/*.parquet` (EVENT_SCHEMA), `schema/tables.jsonl`,
`schema/ddl_jobs.jsonl` and, written last, `_SUCCESS`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tidelake import fs
from tidelake.errors import InputError

MANIFEST_FORMAT = "tidelake.kv-scan"
MANIFEST_VERSION = 1
MANIFEST_FILE = "manifest.json"
SUCCESS_FILE = "_SUCCESS"
EVENTS_DIR = "events"
TABLES_FILE = ("schema", "tables.jsonl")
DDL_JOBS_FILE = ("schema", "ddl_jobs.jsonl")

# One row per cdcpb.Event.Row, plus INITIALIZED and RESOLVED markers.
EVENT_SCHEMA = pa.schema(
    [
        pa.field("region_id", pa.int64()),
        pa.field("seq", pa.int64()),
        pa.field("type", pa.string()),
        pa.field("start_ts", pa.int64()),
        pa.field("commit_ts", pa.int64()),
        pa.field("op_type", pa.string()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("old_value", pa.binary()),
        pa.field("generation", pa.int64()),
        pa.field("resolved_ts", pa.int64()),
    ]
)
EVENT_COLUMNS = tuple(EVENT_SCHEMA.names)
_SPARK_TYPES = {pa.int64(): "BIGINT", pa.string(): "STRING", pa.binary(): "BINARY"}
EVENTS_DDL = ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in EVENT_SCHEMA)  # the same, for Spark


# ------------------------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class Region:
    region_id: int
    start_key: bytes
    end_key: bytes  # b"" = unbounded


@dataclass(frozen=True)
class ScanManifest:
    scan_id: str
    uri: str
    checkpoint_ts: int
    current_ts: int
    regions: tuple[Region, ...]

    def file(self, *parts: str) -> str:
        return fs.join(self.uri, *parts)


def manifest_doc(checkpoint_ts: int, current_ts: int, regions: Iterable[Region]) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "checkpoint_ts": checkpoint_ts,
        "current_ts": current_ts,
        "regions": [
            {"region_id": r.region_id, "start_key": r.start_key.hex(), "end_key": r.end_key.hex()}
            for r in regions
        ],
    }


def parse_manifest(text: str, scan_id: str, uri: str) -> ScanManifest:
    where = fs.join(uri, MANIFEST_FILE)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a JSON object")
    if doc.get("format") != MANIFEST_FORMAT or doc.get("version") != MANIFEST_VERSION:
        raise InputError(
            f"{where}: format {doc.get('format')!r} version {doc.get('version')!r} is not "
            f"{MANIFEST_FORMAT!r} version {MANIFEST_VERSION}"
        )
    checkpoint_ts = _ts(doc, "checkpoint_ts", where)
    current_ts = _ts(doc, "current_ts", where)
    if current_ts < checkpoint_ts:
        raise InputError(f"{where}: current_ts {current_ts} is before checkpoint_ts {checkpoint_ts}")
    regions = doc.get("regions")
    if not isinstance(regions, list):
        raise InputError(f"{where}: 'regions' must be a list")
    return ScanManifest(
        scan_id, uri, checkpoint_ts, current_ts, tuple(_region(r, i, where) for i, r in enumerate(regions))
    )


def _ts(doc: dict[str, Any], key: str, where: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}: {key!r} must be a non-negative integer TSO, got {value!r}")
    return value


def _region(entry: Any, index: int, where: str) -> Region:
    try:
        return Region(
            int(entry["region_id"]), bytes.fromhex(entry["start_key"]), bytes.fromhex(entry["end_key"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: regions[{index}] is not a region with hex keys ({exc})") from None


# ------------------------------------------------------------------------------------ schema files


@dataclass(frozen=True)
class TableDoc:
    """One line of tables.jsonl."""

    schema_name: str
    table_info: Mapping[str, Any]


def parse_tables_jsonl(text: str, where: str) -> list[TableDoc]:
    docs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            docs.append(TableDoc(str(doc["schema_name"]), doc["table_info"]))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(
                f"{where}: line {number}: not a {{schema_name, table_info}} object ({exc})"
            ) from None
    return docs


def parse_ddl_jobs_jsonl(text: str, where: str) -> list[Mapping[str, Any]]:
    jobs: list[Mapping[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            if not isinstance(job, dict) or "type" not in job:
                raise ValueError("no 'type'")
            jobs.append(job)
        except (json.JSONDecodeError, ValueError) as exc:
            raise InputError(f"{where}: line {number}: not a TiDB DDL job ({exc})") from None
    return jobs


# ----------------------------------------------------------------------------------- writing (local)


def write_manifest(scan_dir: Path, checkpoint_ts: int, current_ts: int, regions: Iterable[Region]) -> None:
    _write_text(
        scan_dir / MANIFEST_FILE, json.dumps(manifest_doc(checkpoint_ts, current_ts, regions), indent=2)
    )


def write_tables(scan_dir: Path, tables: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
    """`schema/tables.jsonl`: one `{"schema_name", "table_info"}` per table."""
    docs = ({"schema_name": db, "table_info": info} for db, info in tables)
    return _write_lines(scan_dir.joinpath(*TABLES_FILE), docs)


def write_ddl_jobs(scan_dir: Path, jobs: Iterable[Mapping[str, Any]]) -> int:
    """`schema/ddl_jobs.jsonl`: TiDB DDL job JSON, one per line."""
    return _write_lines(scan_dir.joinpath(*DDL_JOBS_FILE), jobs)


def mark_success(scan_dir: Path) -> None:
    """Written last: a capture without it is incomplete and consumers ignore it."""
    (scan_dir / SUCCESS_FILE).write_text("", encoding="utf-8")


def write_events(scan_dir: Path, rows: Iterable[Mapping[str, Any]], name: str = "part-0.parquet") -> None:
    """One events file from row dicts (missing columns are null): for small hand-made captures."""
    (scan_dir / EVENTS_DIR).mkdir(parents=True, exist_ok=True)
    full = [dict.fromkeys(EVENT_COLUMNS) | dict(row) for row in rows]
    pq.write_table(pa.Table.from_pylist(full, schema=EVENT_SCHEMA), scan_dir / EVENTS_DIR / name)


class EventWriter:
    """Streams events into Parquet: a row group whenever `row_group_size` have piled up, a new file every
    `rows_per_file` rows. Memory holds one row group."""

    def __init__(self, events_dir: Path, *, row_group_size: int, rows_per_file: int) -> None:
        self._dir = events_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        self._group = row_group_size
        self._per_file = rows_per_file
        self._cols: list[list[Any]] = [[] for _ in EVENT_SCHEMA]
        self._writer: pq.ParquetWriter | None = None
        self._in_file = 0
        self._files = 0
        self.count = 0

    def add(
        self,
        region_id: int,
        seq: int,
        type_: str,
        start_ts: int | None,
        commit_ts: int | None,
        op_type: str | None,
        key: bytes | None,
        value: bytes | None,
        old_value: bytes | None,
        generation: int,
        resolved_ts: int | None,
    ) -> None:
        c = self._cols
        c[0].append(region_id)
        c[1].append(seq)
        c[2].append(type_)
        c[3].append(start_ts)
        c[4].append(commit_ts)
        c[5].append(op_type)
        c[6].append(key)
        c[7].append(value)
        c[8].append(old_value)
        c[9].append(generation)
        c[10].append(resolved_ts)
        self.count += 1
        if len(c[0]) >= self._group:
            self._flush()

    def _flush(self) -> None:
        if not self._cols[0]:
            return
        table = pa.Table.from_arrays(
            [pa.array(col, type=f.type) for col, f in zip(self._cols, EVENT_SCHEMA, strict=True)],
            schema=EVENT_SCHEMA,
        )
        if self._writer is None:
            path = self._dir / f"part-{self._files:05d}.parquet"
            self._writer = pq.ParquetWriter(path, EVENT_SCHEMA, compression="zstd")
            self._files += 1
        self._writer.write_table(table, row_group_size=self._group)
        self._in_file += table.num_rows
        self._cols = [[] for _ in EVENT_SCHEMA]
        if self._in_file >= self._per_file:
            self._writer.close()
            self._writer = None
            self._in_file = 0

    def close(self) -> int:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._files == 0:  # an empty capture still has one (empty) events file
            pq.write_table(EVENT_SCHEMA.empty_table(), self._dir / "part-00000.parquet")
        return self.count


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)


def _write_lines(path: Path, docs: Iterable[Mapping[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps(doc, separators=(",", ":")) + "\n")
            n += 1
    return n
