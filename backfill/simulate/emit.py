"""Writers for one capture: events Parquet (streamed in row groups), schema JSON lines, manifest, _SUCCESS.

Nothing here knows about the model; it lays out files exactly as DESIGN.md's input contract says.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

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
MANIFEST_FORMAT = "tidelake.kv-scan"


class EventWriter:
    """Buffers events column-wise and writes a row group whenever ``row_group_size`` have piled up."""

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


def write_json(path: Path, doc: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def write_json_lines(path: Path, docs: Iterable[Mapping[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps(doc, separators=(",", ":")) + "\n")
            n += 1
    return n


def write_manifest(
    scan_dir: Path, checkpoint_ts: int, current_ts: int, regions: Iterable[Mapping[str, Any]]
) -> None:
    write_json(
        scan_dir / "manifest.json",
        {
            "format": MANIFEST_FORMAT,
            "version": 1,
            "checkpoint_ts": checkpoint_ts,
            "current_ts": current_ts,
            "regions": list(regions),
        },
    )


def mark_success(scan_dir: Path) -> None:
    """Written last: a capture without it is incomplete and consumers ignore it."""
    (scan_dir / "_SUCCESS").write_text("", encoding="utf-8")
