"""A Dumpling export (`--filetype csv` or `sql`) of tables as they stood at a TSO, as Dumpling writes it
(pingcap/tidb `dumpling/export`, `pkg/dumpformat/sqlfile`): the `metadata` file with the snapshot TSO as
`Pos`, a `-schema.sql` per table, its rows in `<db>.<table>.<NNNNNNNNN>.csv` (or `.sql`) files
(optionally gzip, zstd or snappy compressed).

Rows come as Delta-typed Arrow tables (what `tidbsim.expected` builds); values are printed as Dumpling
prints them. CSV: numbers bare, strings, dates and binary enclosed in `"` with backslash escapes, NULL a
bare `\\N`. SQL: `INSERT INTO `t` VALUES` with a `(...)` tuple a line, numbers bare, strings and dates in
`'` with backslash escapes, binary as `x'<hex>'`, NULL. TIMESTAMP in UTC.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cramjam
import pyarrow as pa

from tidbsim.config import DumplingExport
from tidbsim.expected import table_at
from tidbsim.world import World

DUMPLING_DIR = "dumpling"  # under a simulation's output: one folder per `DumplingExport`
_ESCAPED = {0: b"\\0", 10: b"\\n", 13: b"\\r", 26: b"\\Z", 34: b'\\"', 92: b"\\\\"}
_SQL_ESCAPED = {**_ESCAPED, 39: b"\\'"}
_COMPRESS: dict[str, Callable[[bytes], Any]] = {
    "gz": cramjam.gzip.compress,
    "zst": cramjam.zstd.compress,
    "snappy": cramjam.snappy.compress,
}


@dataclass(frozen=True)
class ExportedTable:
    db: str
    name: str
    create_sql: str  # as `SHOW CREATE TABLE` prints it
    rows: pa.Table  # Delta-typed; `_tidb_rowid` and `_tidb_commit_ts` are not exported


def write_export(
    out: Path,
    tso: int,
    tables: Sequence[ExportedTable],
    *,
    header: bool = True,
    compression: str | None = None,
    rows_per_file: int = 1000,
    file_type: str = "csv",
    rows_per_statement: int = 1000,
) -> Path:
    """Write the export under `out` and return it (`file_type`: Dumpling's `--filetype`, csv or sql)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "metadata").write_text(
        "Started dump at: 2026-01-01 00:00:00\nSHOW MASTER STATUS:\n\tLog: tidb-binlog\n"
        f"\tPos: {tso}\n\tGTID:\n\nFinished dump at: 2026-01-01 00:00:01\n"
    )
    for db in sorted({t.db for t in tables}):
        (out / f"{db}-schema-create.sql").write_text(
            f"/*!40101 SET NAMES binary*/;\nCREATE DATABASE `{db}`;\n"
        )
    for table in tables:
        (out / f"{table.db}.{table.name}-schema.sql").write_text(
            f"/*!40101 SET NAMES binary*/;\n{table.create_sql.rstrip(';')};\n"
        )
        names = [n for n in table.rows.column_names if n not in ("_tidb_rowid", "_tidb_commit_ts")]
        rows = table.rows.select(names).to_pylist()
        for index, start in enumerate(range(0, len(rows), rows_per_file)):
            chunk = rows[start : start + rows_per_file]
            if file_type == "sql":
                content = _insert_statements(table.name, names, chunk, rows_per_statement)
            else:
                lines = [b",".join(b'"' + n.encode() + b'"' for n in names)] if header else []
                lines += [b",".join(_field(row[n]) for n in names) for row in chunk]
                content = b"".join(line + b"\r\n" for line in lines)
            name = f"{table.db}.{table.name}.{index:09d}.{file_type}"
            if compression is not None:
                content, name = bytes(_COMPRESS[compression](content)), f"{name}.{compression}"
            (out / name).write_bytes(content)
    return out


def write_world_export(out: Path, export: DumplingExport, world: World, ts: int) -> Path:
    """Export every table of the simulated upstream as it stood at `ts` (the world's expected state)."""
    tables = [
        ExportedTable(
            version.db,
            version.name,
            version.create_sql(),
            table_at(world, version, ts),
        )
        for version in world.catalog.tables_at(ts)
    ]
    return write_export(
        out, ts, tables, header=export.header, compression=export.compression,
        rows_per_file=export.rows_per_file, file_type=export.file_type,
    )  # fmt: skip


def _insert_statements(table: str, names: list[str], rows: list[dict[str, Any]], per_statement: int) -> bytes:
    """Dumpling's SQL data file: its `SET NAMES` line, then statements of `per_statement` tuples."""
    out = [b"/*!40101 SET NAMES binary*/;\n"]
    for start in range(0, len(rows), per_statement):
        tuples = (
            b"(" + b",".join(_sql_value(row[n]) for n in names) + b")"
            for row in rows[start : start + per_statement]
        )
        out.append(b"INSERT INTO `" + table.encode() + b"` VALUES\n" + b",\n".join(tuples) + b";\n")
    return b"".join(out)


def _sql_value(value: Any) -> bytes:
    if value is None:
        return b"NULL"
    if isinstance(value, bytes):
        return b"x'" + value.hex().encode() + b"'"
    field = _field(value, _SQL_ESCAPED)
    return b"'" + field[1:-1] + b"'" if field.startswith(b'"') else field


def _field(value: Any, escaped: dict[int, bytes] = _ESCAPED) -> bytes:
    if value is None:
        return b"\\N"
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, int | float | decimal.Decimal):
        return str(value).encode()
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        text = value.isoformat(" ", "microseconds" if value.microsecond else "seconds")
        return b'"' + text.encode() + b'"'
    if isinstance(value, dt.date):
        return b'"' + value.isoformat().encode() + b'"'
    raw = value if isinstance(value, bytes) else str(value).encode()
    return b'"' + b"".join(escaped.get(b, bytes([b])) for b in raw) + b'"'
