"""An upstream in files, read by Spark: a Dumpling export, Parquet, or the simulator's expected state.

* `expected`: `<path>/index.json` (`{"format": "tidelake.expected", "version": 1, "scans": [{"scan_id",
  "resolved_ts", ...}]}`) and `<path>/<scan-id>/<db>/<table>.parquet` in the Delta schema plus
  `_tidb_commit_ts`; the primary key's column names ride in the Parquet key-value metadata
  `tidelake.primary_key` (JSON list). The scan compared is the one whose resolved ts equals the Delta
  version's (the last scan when the Delta table records none).
* `parquet`: `<path>/<db>/<table>.parquet` or `<path>/<db>.<table>.parquet` (a file or a folder of
  parts), columns in Delta types; the key from the same metadata when present.
* `dumpling`: see `reconcile.upstream.dumpling`; the Delta version compared is the one at the export's
  TSO (or the newest one below it, with a note).

Both sides are then Spark data, so tables are compared with hash buckets and a keyed (or multiset)
row diff, and JSON in its normalised form on both sides.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from reconcile.encoding import FloatDigits, JsonMode
from reconcile.errors import TableNotFound
from reconcile.schema import DELTA_ONLY_COLUMNS, Column, Comparison, TableSchema, column_from_spark
from reconcile.sparkside import SparkSide
from reconcile.upstream import dumpling
from reconcile.upstream.sql import match_tables
from tidelake import fs
from tidelake.conventions import ROWID
from tidelake.errors import InputError
from tidelake.sqlident import quote_ident

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tidelake.config import UpstreamConfig

INDEX_FORMAT = "tidelake.expected"
PRIMARY_KEY_METADATA = b"tidelake.primary_key"


class FilesUpstream:
    supports_ranges = False
    reads_at_ts = False
    json_mode = JsonMode.NORMALIZED
    bytes_received = 0  # nothing comes over a database connection

    def __init__(self, spark: SparkSession, config: UpstreamConfig) -> None:
        assert config.path is not None
        self.spark = spark
        self.format = config.format
        self.path = config.path.rstrip("/")
        self._scans: list[dict[str, Any]] = self._read_index() if self.format == "expected" else []
        self._dump_ts: int | None = None
        self._read: dict[str, DataFrame] = {}  # Parquet path -> its frame: the schema read is the data read
        if self.format == "dumpling":
            self._dump_ts = self._read_dump_metadata()

    def describe(self) -> str:
        return f"{self.format} files at {self.path}"

    def close(self) -> None:
        pass

    def reconnect(self) -> None:
        pass  # no connection: files never raise UpstreamUnavailable

    # -- ts

    def fixed_ts(self) -> int | None:
        return self._dump_ts

    def upstream_ts(self, at_ts: int | None, delta_ts: int | None) -> int | None:
        if self.format == "dumpling":
            return self._dump_ts
        if self.format != "expected":
            return None
        wanted = delta_ts if delta_ts is not None else at_ts
        if wanted is None:
            return int(self._scans[-1]["resolved_ts"])
        if self._scan_at(wanted) is not None:
            return wanted
        known = ", ".join(str(s["resolved_ts"]) for s in self._scans[-5:])
        raise InputError(f"{self.path}/index.json: no scan resolved ts {wanted} (the last ones: {known})")

    def _scan_at(self, ts: int | None) -> str | None:
        """The expected-state scan the ts names (the last one for None); None if no scan has that ts.
        Derived from the ts every time, so that tables compared at different ts never share state."""
        if not self._scans:
            return None
        if ts is None:
            return str(self._scans[-1]["scan_id"])
        return next((str(s["scan_id"]) for s in reversed(self._scans) if s["resolved_ts"] == ts), None)

    # -- tables

    def list_tables(self, patterns: Sequence[str]) -> list[tuple[str, str]]:
        return match_tables(self._table_names(), patterns, "upstream")

    def _table_names(self) -> list[tuple[str, str]]:
        if self.format == "dumpling":
            names = []
            for entry in fs.list_dir(self.spark, self.path):
                if entry.name.endswith("-schema.sql") and not entry.name.endswith("-schema-create.sql"):
                    stem = entry.name[: -len("-schema.sql")]
                    db, _, table = stem.partition(".")
                    names.append((db, table))
            return names
        scan = self._scan_at(None)
        root = fs.join(self.path, scan) if scan is not None else self.path  # "expected": the last scan
        names = []
        for entry in fs.list_dir(self.spark, root):
            if entry.is_dir and not entry.name.startswith(("_", ".")):
                names += [
                    (entry.name, t.name[: -len(".parquet")])
                    for t in fs.list_dir(self.spark, entry.path)
                    if t.name.endswith(".parquet")
                ]
            elif entry.name.endswith(".parquet") and entry.name.count(".") >= 2:
                db, _, table = entry.name[: -len(".parquet")].partition(".")
                names.append((db, table))
        return sorted(names)

    def _parquet_path(self, db: str, table: str, ts: int | None) -> str:
        if self.format == "expected":
            return fs.join(self.path, str(self._scan_at(ts)), db, f"{table}.parquet")
        nested = fs.join(self.path, db, f"{table}.parquet")
        return nested if fs.exists(self.spark, nested) else fs.join(self.path, f"{db}.{table}.parquet")

    def schema(self, db: str, table: str, ts: int | None) -> TableSchema:
        if self.format == "dumpling":
            where = fs.join(self.path, f"{db}.{table}-schema.sql")
            if not fs.exists(self.spark, where):
                raise TableNotFound(f"upstream table {db}.{table}: no {where}")
            return dumpling.parse_create_table(fs.read_text(self.spark, where), db, where)
        path = self._parquet_path(db, table, ts)
        if not fs.exists(self.spark, path):
            raise TableNotFound(f"upstream table {db}.{table}: no {path}")
        df = self._read[path] = self.spark.read.parquet(path)
        columns = tuple(
            column_from_spark(f.name, f.dataType.simpleString(), f.nullable)
            for f in df.schema.fields
            if f.name.lower() not in DELTA_ONLY_COLUMNS or f.name.lower() == ROWID
        )
        return TableSchema(db, table, columns, _parquet_key(path))

    def row_estimate(self, db: str, table: str) -> int | None:
        return None

    @contextmanager
    def open_table(
        self, schema: TableSchema, columns: Sequence[Column], digits: FloatDigits, ts: int | None
    ) -> Iterator[SparkSide]:
        df = self._frame(schema, ts)
        yield SparkSide(df, Comparison(schema, tuple(columns)), self.json_mode, digits)

    def _frame(self, schema: TableSchema, ts: int | None) -> DataFrame:
        if self.format == "dumpling":
            names = [e.name for e in fs.list_dir(self.spark, self.path)]
            files = dumpling.data_files(names, schema.db, schema.table)
            if not files:
                return self.spark.createDataFrame(
                    [], ", ".join(f"{quote_ident(c.name)} {c.delta_type}" for c in schema.columns)
                )
            return dumpling.read_csv(self.spark, [fs.join(self.path, f) for f in files], schema)
        path = self._parquet_path(schema.db, schema.table, ts)
        found = self._read.pop(path, None)
        return found if found is not None else self.spark.read.parquet(path)

    # -- metadata files

    def _read_index(self) -> list[dict[str, Any]]:
        where = fs.join(self.path, "index.json")
        if not fs.exists(self.spark, where):
            raise InputError(f"{where}: missing (is upstream.path the simulator's expected/ folder?)")
        try:
            doc = json.loads(fs.read_text(self.spark, where))
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        if not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT or doc.get("version") != 1:
            raise InputError(f"{where}: not a {INDEX_FORMAT} version 1 index")
        scans = doc.get("scans")
        if not isinstance(scans, list) or not scans:
            raise InputError(f"{where}: lists no scans")
        for i, scan in enumerate(scans):
            if (
                not isinstance(scan, dict)
                or not isinstance(scan.get("scan_id"), str)
                or not isinstance(scan.get("resolved_ts"), int)
            ):
                raise InputError(f"{where}: scans[{i}] needs a string scan_id and an integer resolved_ts")
        return scans

    def _read_dump_metadata(self) -> int | None:
        where = fs.join(self.path, "metadata")
        if not fs.exists(self.spark, where):
            raise InputError(f"{where}: missing (is upstream.path a Dumpling export folder?)")
        return dumpling.parse_metadata(fs.read_text(self.spark, where)).tso


def _parquet_key(path: str) -> tuple[str, ...]:
    """The primary key recorded in a Parquet file's metadata (local files only; else none)."""
    import pyarrow.parquet as pq

    local = path[len("file:") :] if path.startswith("file:") else path
    if "://" in local:
        return ()
    try:
        from pathlib import Path

        target = Path(local)
        if target.is_dir():
            parts = sorted(target.glob("*.parquet"))
            if not parts:
                return ()
            target = parts[0]
        metadata = pq.read_schema(target).metadata or {}
    except OSError:
        return ()
    raw = metadata.get(PRIMARY_KEY_METADATA)
    if raw is None:
        return ()
    try:
        names = json.loads(raw)
    except json.JSONDecodeError:
        return ()
    return tuple(str(n) for n in names) if isinstance(names, list) else ()
