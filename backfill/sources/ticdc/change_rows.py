"""The one shape every TiCDC text decoder here returns: a file's row changes of one table, typed.

A protocol parser (:mod:`csv_format`, :mod:`canal_json`) gives :class:`ParsedRows`: per change its op
(PUT or DELETE), commit ts and line, and per schema column the value's text (None for NULL or absent).
:func:`to_arrow` types them (:mod:`text_values`) into the canonical row-change shape of
``sources/base.RowChanges``: the table's output columns (all nullable; ``_tidb_rowid`` NULL, TiCDC does
not write it), ``_tidb_op``, ``_tidb_commit_ts`` and ``_tidb_line`` (the file's position in its table's
order, times 2^32, plus the line: the last tie-breaker of the shared collapse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from backfill.changes.collapse import LINE
from backfill.codec import DecodeStats, TableSchema
from backfill.codec.values import ZeroDate, fill_value
from backfill.sources.ticdc.arrow_bytes import one_array
from backfill.sources.ticdc.text_values import BadValue, TextDialect, text_column
from tidelake.conventions import COMMIT_TS, OP
from tidelake.errors import InputError

PUT, DELETE = "PUT", "DELETE"
LINE_BITS = 32  # _tidb_line = file ordinal << LINE_BITS | line

Where = str | Callable[[int], str]  # a file (its line is appended), or line -> a place (a Kafka message)


def at(where: Where, line: int) -> str:
    """The place of ``line`` in an error message: ``file:line``, or what ``where`` makes of it."""
    return where(line) if callable(where) else f"{where}:{line}"


@dataclass
class ParsedRows:
    """Changes read from one file, column-major: ``values[i]`` holds schema column i's texts. Each field is
    a Python list (line-by-line parsers) or an Arrow array (whole-file parsers)."""

    ops: Any = field(default_factory=list)  # PUT / DELETE
    commit_ts: Any = field(default_factory=list)
    lines: Any = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    filled: list[Any] | None = None  # per column (bools): the value was absent (filled like TiCDC does)

    @classmethod
    def for_columns(cls, count: int, *, fills: bool = False) -> ParsedRows:
        return cls(values=[[] for _ in range(count)], filled=[[] for _ in range(count)] if fills else None)

    def __len__(self) -> int:
        return len(self.ops)

    def as_arrays(self) -> ParsedRows:
        """The same rows with every field an Arrow array."""
        return ParsedRows(
            _array(self.ops, pa.string()), _array(self.commit_ts, pa.int64()), _array(self.lines, pa.int64()),
            [_array(v, pa.string()) for v in self.values],
            None if self.filled is None else [_array(f, pa.bool_()) for f in self.filled],
        )  # fmt: skip

    def within(self, after: int, upto: int) -> ParsedRows:
        """Only the changes with ``after < commit ts <= upto``."""
        rows = self.as_arrays()
        keep = pc.and_(pc.greater(rows.commit_ts, after), pc.less_equal(rows.commit_ts, upto))
        if pc.all(keep).as_py():
            return rows
        return ParsedRows(
            rows.ops.filter(keep), rows.commit_ts.filter(keep), rows.lines.filter(keep),
            [v.filter(keep) for v in rows.values],
            None if rows.filled is None else [f.filter(keep) for f in rows.filled],
        )  # fmt: skip


def _array(values: Any, typ: pa.DataType) -> pa.Array:
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return one_array(values)
    return pa.array(values, typ)


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
    where: Where,
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
    puts = pc.equal(_array(rows.ops, pa.string()), PUT) if rows.filled is not None else None
    for index, col in enumerate(schema.columns):
        try:
            arr = text_column(schema, col, _array(rows.values[index], pa.string()), dialect, stats)
        except BadValue as bad:
            line = _array(rows.lines, pa.int64())[bad.row].as_py()
            raise InputError(f"{at(where, line)}: column {col.name!r}: {bad.message}") from None
        if rows.filled is not None and puts is not None:
            absent = pc.and_(_array(rows.filled[index], pa.bool_()), puts)
            count = pc.sum(absent).as_py() or 0
            if count:
                fill = fill_value(col)
                if isinstance(fill, ZeroDate):
                    stats.zero_dates += count
                    fill = None
                arr = pc.if_else(absent, pa.scalar(fill, col.arrow_type), arr)
        arrays.append(arr)
    base = file_ordinal << LINE_BITS
    arrays += [
        _array(rows.ops, pa.string()),
        _array(rows.commit_ts, pa.int64()),
        pc.add(_array(rows.lines, pa.int64()), base),
    ]
    stats.rows += n
    return pa.Table.from_arrays(arrays, schema=target)


__all__ = ["DELETE", "LINE_BITS", "PUT", "ParsedRows", "Where", "at", "output_schema", "to_arrow"]
