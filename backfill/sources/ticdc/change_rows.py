"""The one shape every TiCDC text decoder here returns: a file's row changes of one table, typed.

A protocol parser (:mod:`csv_format`, :mod:`canal_json`) gives :class:`ParsedRows`: per change its op
(PUT or DELETE), commit ts and line, and per schema column the value's text (None for NULL or absent).
:func:`to_arrow` types them (:mod:`text_values`) into the canonical row-change shape of
``sources/base.RowChanges``: the table's output columns (all nullable; ``_tidb_rowid`` NULL, TiCDC does
not write it), ``_tidb_op``, ``_tidb_commit_ts`` and ``_tidb_line`` (the file's position in its table's
order, times 2^32, plus the line: the last tie-breaker of the shared collapse).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from backfill.apply.collapse import LINE
from backfill.codec import DecodeStats, TableSchema
from backfill.codec.values import ZeroDate, fill_value
from backfill.sources.ticdc.text_values import BadValue, TextDialect, text_column
from tidelake.conventions import COMMIT_TS, OP
from tidelake.errors import InputError

PUT, DELETE = "PUT", "DELETE"
LINE_BITS = 32  # _tidb_line = file ordinal << LINE_BITS | line


@dataclass
class ParsedRows:
    """Changes read from one file, column-major: ``values[i]`` holds schema column i's texts."""

    ops: list[str] = field(default_factory=list)
    commit_ts: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    values: list[list[str | None]] = field(default_factory=list)
    filled: list[list[bool]] = field(default_factory=list)  # per column: the value was absent (fill it)

    @classmethod
    def for_columns(cls, count: int) -> ParsedRows:
        return cls(values=[[] for _ in range(count)], filled=[[] for _ in range(count)])

    def __len__(self) -> int:
        return len(self.ops)


def output_schema(schema: TableSchema) -> pa.Schema:
    """The typed changes: the table's Delta columns (nullable), then op, commit ts and line."""
    fields = [f.with_nullable(True) for f in schema.arrow_schema]
    fields += [pa.field(OP, pa.string()), pa.field(COMMIT_TS, pa.int64()), pa.field(LINE, pa.int64())]
    return pa.schema(fields)


def to_arrow(
    schema: TableSchema,
    rows: ParsedRows,
    dialect: TextDialect,
    *,
    where: str,
    file_ordinal: int = 0,
    stats: DecodeStats | None = None,
) -> pa.Table:
    """``rows`` typed by ``schema``; a value that does not parse raises InputError naming ``where``:line."""
    target = output_schema(schema)
    n = len(rows)
    stats = stats if stats is not None else DecodeStats()
    arrays: list[pa.Array] = []
    if schema.pk_kind == "rowid":
        arrays.append(pa.nulls(n, pa.int64()))
    puts = [op == PUT for op in rows.ops]
    for index, col in enumerate(schema.columns):
        try:
            arr = text_column(schema, col, pa.array(rows.values[index], pa.string()), dialect, stats)
        except BadValue as bad:
            raise InputError(f"{where}:{rows.lines[bad.row]}: column {col.name!r}: {bad.message}") from None
        absent = [f and p for f, p in zip(rows.filled[index], puts, strict=True)]
        if any(absent):
            fill = fill_value(col)
            if isinstance(fill, ZeroDate):
                stats.zero_dates += sum(absent)
                fill = None
            arr = pa.array(
                [fill if a else v for a, v in zip(absent, arr.to_pylist(), strict=True)], col.arrow_type
            )
        arrays.append(arr)
    base = file_ordinal << LINE_BITS
    arrays += [
        pa.array(rows.ops, pa.string()),
        pa.array(rows.commit_ts, pa.int64()),
        pa.array([base + line for line in rows.lines], pa.int64()),
    ]
    stats.rows += n
    return pa.Table.from_arrays(arrays, schema=target)


__all__ = ["DELETE", "LINE_BITS", "PUT", "ParsedRows", "output_schema", "to_arrow"]
