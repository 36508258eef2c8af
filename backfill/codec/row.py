"""Whole rows: encode a TiDB row value like TiDB writes it; decode key + value into a Delta row.

Decoding follows TiCDC's mounter (reference §3.5): decode the value (v2 or v1) looking only at the
schema's column ids, take handle columns from the key when the value lacks them, then fill still-absent
columns (origin default -> NULL if nullable -> ENUM first element -> zero value).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from backfill.codec import rowv1, rowv2
from backfill.codec.errors import CodecError
from backfill.codec.keys import RecordKey, decode_record_key, key_gives_value, needs_restored_data
from backfill.codec.mydecimal import check_precision, encode_quantized_bin
from backfill.codec.numbers import encode_cmp_float, encode_compact_int, encode_compact_uint
from backfill.codec.schema import ROWID_NAME, UNSIGNED_STORED, ColumnKind, ColumnSchema, TableSchema
from backfill.codec.values import (
    ZERO_DATE,
    ZeroDate,
    fill_value,
    from_stored,
    int_bounds,
    to_float32,
    to_stored,
)


@dataclass
class DecodeStats:
    """Counters a decode run reports (docs/architecture.md "Delta conventions": zero dates become NULL and
    are counted).

    ``zero_dates``: DATE/DATETIME/TIMESTAMP values (stored, defaulted or zero-filled) that became NULL
    because they are zero or not a real calendar date. ``filled``: absent columns filled per row.
    ``rows``: rows decoded; ``fallback_rows``: rows decode_batch sent through the per-row path.
    """

    rows: int = 0
    zero_dates: int = 0
    filled: int = 0
    fallback_rows: int = 0

    def add(self, other: DecodeStats) -> None:
        self.rows += other.rows
        self.zero_dates += other.zero_dates
        self.filled += other.filled
        self.fallback_rows += other.fallback_rows


# ---------------------------------------------------------------- encode


def _skipped_by_tidb(schema: TableSchema, col: ColumnSchema, stored: Any) -> bool:
    """TiDB ``CanSkip``: columns a written row value does not carry."""
    if schema.handle_column is not None and col.id == schema.handle_column.id:
        return True
    for pk_col, length in schema.common_handle:
        if pk_col.id == col.id:
            return length in (-1, None) and not needs_restored_data(col)
    return stored is None and col.default is None and col.origin_default is None


def encode_row(schema: TableSchema, values: Mapping[int, Any], *, version: int = 2) -> bytes:
    """Row value bytes as TiDB writes them for ``values`` (column id -> Python value; None = NULL).

    Columns not in ``values`` are absent from the row. Like TiDB, the int-PK handle column, full-length
    clustered PK columns whose key gives the value back, and NULLs of columns whose default and origin
    default are NULL are not written. DECIMAL is written with the column's (precision, scale).
    """
    if version not in (1, 2):
        raise CodecError(f"row format version {version} (want 1 or 2)", table_id=schema.table_id)
    if version == 2:
        return _row_encoder(schema).encode(values)
    cols = schema.all_by_id
    stored_cells: list[tuple[ColumnSchema, Any]] = []
    for cid, value in values.items():
        col = cols.get(cid)
        if col is None:
            raise CodecError(f"column id {cid} is not in the schema", table_id=schema.table_id)
        stored = _stored(schema, col, value)
        if not _skipped_by_tidb(schema, col, stored):
            stored_cells.append((col, stored))
    return rowv1.encode_row_v1((col.id, rowv1.encode_datum_v1(col, s)) for col, s in stored_cells)


def _stored(schema: TableSchema, col: ColumnSchema, value: Any) -> Any:
    try:
        return to_stored(col, value)
    except CodecError as e:
        raise e.at(table_id=schema.table_id, column=col.name) from None


class _Skip:
    """A cell TiDB does not write."""


_SKIP = _Skip()
CellEncoder = Callable[[Any], "bytes | None | _Skip"]


class _RowV2Encoder:
    """Row-v2 encoding of one schema, with the per-column decisions (kind, bounds, whether TiDB skips
    the column) taken once: the simulator and the benches encode millions of rows of a few schemas."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.cells: dict[int, CellEncoder] = {cid: self._cell(col) for cid, col in schema.all_by_id.items()}

    def _cell(self, col: ColumnSchema) -> CellEncoder:
        schema = self.schema

        def generic(value: Any) -> bytes | None | _Skip:
            stored = _stored(schema, col, value)
            if _skipped_by_tidb(schema, col, stored):
                return _SKIP
            return None if stored is None else rowv2.encode_cell(col, stored)

        handle = schema.handle_column
        if handle is not None and handle.id == col.id and col.kind in (ColumnKind.INT, ColumnKind.UINT):
            lo, hi = int_bounds(col)

            def int_handle(value: Any) -> bytes | None | _Skip:
                # The key holds it: TiDB never writes it in the value (_skipped_by_tidb), only checks it.
                return _SKIP if type(value) is int and lo <= value <= hi else generic(value)

            return int_handle
        if (handle is not None and handle.id == col.id) or any(
            c.id == col.id for c, _ in schema.common_handle
        ):
            return generic  # the handle's columns: TiDB's rule for them is in _skipped_by_tidb
        null = _SKIP if col.default is None and col.origin_default is None else None
        kind = col.kind
        if kind in (ColumnKind.INT, ColumnKind.YEAR, ColumnKind.UINT, ColumnKind.UINT64):
            lo, hi = int_bounds(col)
            compact = encode_compact_uint if kind in UNSIGNED_STORED else encode_compact_int

            def integer(value: Any) -> bytes | None | _Skip:
                if value is None:
                    return null
                if type(value) is int and lo <= value <= hi:
                    return compact(value)
                if type(value) is Decimal and value.is_finite():  # BIGINT UNSIGNED's value domain
                    whole = int(value)
                    if whole == value and lo <= whole <= hi:
                        return compact(whole)
                return generic(value)

            return integer
        if kind in (ColumnKind.TEXT, ColumnKind.BINARY):

            def text(value: Any) -> bytes | None | _Skip:
                if value is None:
                    return null
                if type(value) is str:
                    return value.encode("utf-8")
                if type(value) is bytes:
                    return value
                return generic(value)

            return text
        if kind == ColumnKind.FLOAT64:

            def double(value: Any) -> bytes | None | _Skip:
                if value is None:
                    return null
                if type(value) is float:
                    return encode_cmp_float(value)
                return generic(value)

            return double

        if kind == ColumnKind.FLOAT32:

            def single(value: Any) -> bytes | None | _Skip:
                if value is None:
                    return null
                if type(value) is float:
                    try:
                        return encode_cmp_float(to_float32(value))
                    except OverflowError:
                        pass  # the general path names the column
                return generic(value)

            return single

        def stored_cell(value: Any) -> bytes | None | _Skip:
            # Not a handle column, and a value given: TiDB writes it (_skipped_by_tidb is False).
            return null if value is None else rowv2.encode_cell(col, _stored(schema, col, value))

        if kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR) and _valid_precision(col):
            prec, frac = col.decimal_precision
            head = bytes([prec, frac])

            def decimal(value: Any) -> bytes | None | _Skip:
                if value is None:
                    return null
                q, _, _ = _stored(schema, col, value)  # quantized: its words are cut without rounding again
                return head + encode_quantized_bin(q, prec, frac)

            return _memoized(decimal, _MEMO_KINDS[kind])
        return _memoized(stored_cell, _MEMO_KINDS[kind]) if kind in _MEMO_KINDS else stored_cell

    def encode(self, values: Mapping[int, Any]) -> bytes:
        cells: dict[int, CellEncoder] = self.cells
        not_null: list[tuple[int, bytes]] = []
        nulls: list[int] = []
        for cid, value in values.items():
            encode = cells.get(cid)
            if encode is None:
                raise CodecError(f"column id {cid} is not in the schema", table_id=self.schema.table_id)
            cell = encode(value)
            if cell is None:
                nulls.append(cid)
            elif not isinstance(cell, _Skip):
                not_null.append((cid, cell))
        return rowv2.assemble_row_v2(not_null, nulls)


# Kinds whose cells are dear to compute and whose values of one Python type encode the same whenever they
# are equal: an UPDATE re-encodes every cell of its row, and most were written before.
_MEMO_KINDS: dict[ColumnKind, type] = {
    ColumnKind.DECIMAL: Decimal,
    ColumnKind.DECIMAL_STR: str,
    ColumnKind.JSON: str,
    ColumnKind.ENUM: str,
    ColumnKind.SET: str,
    ColumnKind.TIME: str,
}
_MEMO_CELLS = 1 << 14  # per column; the memo starts over when full


def _memoized(encode: CellEncoder, key_type: type) -> CellEncoder:
    """`encode`, remembering the cells of values of exactly `key_type` (a failure is not remembered)."""
    memo: dict[Any, bytes | None | _Skip] = {}

    def cell(value: Any) -> bytes | None | _Skip:
        if type(value) is not key_type:
            return encode(value)
        try:
            got = memo.get(value)
        except TypeError:  # a signalling-NaN Decimal has no hash: the encoder says what is wrong with it
            return encode(value)
        if got is None:
            got = encode(value)
            if len(memo) >= _MEMO_CELLS:
                memo.clear()
            memo[value] = got
        return got

    return cell


def _valid_precision(col: ColumnSchema) -> bool:
    try:
        check_precision(*col.decimal_precision)
    except CodecError:
        return False
    return True


_ENCODERS: dict[int, _RowV2Encoder] = {}


def _row_encoder(schema: TableSchema) -> _RowV2Encoder:
    enc = _ENCODERS.get(id(schema))
    if enc is None or enc.schema is not schema:
        if len(_ENCODERS) > 4096:
            _ENCODERS.clear()
        enc = _ENCODERS[id(schema)] = _RowV2Encoder(schema)
    return enc


# ---------------------------------------------------------------- decode


def table_record_key(schema: TableSchema, key: bytes) -> RecordKey:
    """``key`` as a record key of one of ``schema``'s physical tables; another table's is a CodecError."""
    record = decode_record_key(key, common=schema.pk_kind == "common")
    if record.table_id not in schema.physical_ids:
        raise CodecError(
            f"key belongs to table {record.table_id}, not to {schema.name!r} "
            f"(physical ids {list(schema.physical_ids)})",
            table_id=record.table_id,
            handle=record.handle,
        )
    return record


def _handle_of(schema: TableSchema, key_or_handle: bytes | int | tuple) -> tuple[int | None, Any]:
    if isinstance(key_or_handle, bytes | bytearray | memoryview):
        record = table_record_key(schema, bytes(key_or_handle))
        return record.table_id, record.handle
    return None, key_or_handle


def handle_stored(schema: TableSchema, handle: Any, table_id: int | None) -> dict[int, Any]:
    """Stored datums the handle gives: the int PK column, or the clustered PK columns from the key."""
    if schema.pk_kind == "int":
        if not isinstance(handle, int):
            raise CodecError("int-handle table needs an int handle", table_id=table_id, handle=handle)
        col = schema.handle_column
        assert col is not None
        return {col.id: handle & 0xFFFFFFFFFFFFFFFF if col.unsigned else handle}
    if schema.pk_kind == "common":
        if not isinstance(handle, tuple) or len(handle) < len(schema.common_handle):
            raise CodecError(
                f"common-handle key has {len(handle) if isinstance(handle, tuple) else 0} "
                f"datums, PK has {len(schema.common_handle)}",
                table_id=table_id,
                handle=handle,
            )
        out = {}
        for (col, _length), datum in zip(schema.common_handle, handle, strict=False):
            out[col.id] = _key_datum_to_stored(col, datum, table_id, handle)
        return out
    return {}


def _key_datum_to_stored(col: ColumnSchema, datum: Any, table_id: int | None, handle: Any) -> Any:
    kind = col.kind
    ok = False
    if datum is None:
        return None
    if kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR):
        ok = isinstance(datum, Decimal)
        if ok:
            exp = datum.as_tuple().exponent
            datum = (datum, col.decimal_precision[0], -exp if isinstance(exp, int) and exp < 0 else 0)
    elif kind in (ColumnKind.FLOAT32, ColumnKind.FLOAT64):
        ok = isinstance(datum, float)
    elif kind in (ColumnKind.TEXT, ColumnKind.BINARY):
        ok = isinstance(datum, bytes)
    elif kind != ColumnKind.JSON:
        ok = isinstance(datum, int)
        if ok and kind in (ColumnKind.INT, ColumnKind.YEAR, ColumnKind.TIME) and datum >= 1 << 63:
            datum -= 1 << 64
    if not ok:
        raise CodecError(
            f"key datum {datum!r} cannot be stored in a {kind.value} column",
            table_id=table_id,
            handle=handle,
            column=col.name,
        )
    return datum


def row_version(value: bytes) -> int:
    if not value:
        raise CodecError("empty row value (a DELETE has no row to decode)", offset=0)
    return 2 if value[0] == rowv2.CODEC_VERSION else 1


def decode_stored(schema: TableSchema, value: bytes) -> dict[int, Any]:
    """Column id -> stored datum of the schema's columns present in the value (v2 or v1)."""
    if row_version(value) == 2:
        return rowv2.decode_row_v2(schema.columns, value)
    return rowv1.decode_row_v1(schema.columns, value)


def decode_row(
    schema: TableSchema,
    key_or_handle: bytes | int | tuple,
    value: bytes,
    *,
    stats: DecodeStats | None = None,
    tz: dt.tzinfo | None = None,
) -> dict[str, Any]:
    """Decode one row: column name -> Python value, in ``schema.arrow_schema`` order.

    ``key_or_handle`` is the raw record key (preferred: its table id is checked), or an int handle, or the
    decoded common-handle datum tuple. ``stats`` (optional) accumulates zero dates turned into NULL.
    ``tz`` is the TiDB server zone for TIMESTAMP origin defaults of ColumnInfo.version 0 (default UTC).
    """
    table_id, handle = _handle_of(schema, key_or_handle)
    if table_id is None:
        table_id = schema.table_id
    try:
        stored = decode_stored(schema, value)
        for cid, s in handle_stored(schema, handle, table_id).items():
            if cid not in stored and not key_gives_value(schema.by_id[cid]):
                col = schema.by_id[cid]
                raise CodecError(
                    f"the row value lacks clustered key column {col.name!r}, whose key datum is a "
                    f"{col.collate} sort key, not its value",
                    column=col.name,
                )
            stored.setdefault(cid, s)
        row: dict[str, Any] = {}
        if schema.pk_kind == "rowid":
            if not isinstance(handle, int):
                raise CodecError("rowid table needs an int handle")
            row[ROWID_NAME] = handle
        zero_dates = filled = 0
        for col in schema.columns:
            if col.id in stored:
                try:
                    v = from_stored(col, stored[col.id])
                except CodecError as e:
                    raise e.at(column=col.name) from None
            else:
                v = fill_value(col, tz)
                filled += 1
            if isinstance(v, ZeroDate):
                zero_dates += 1
                v = None
            row[col.name] = v
    except CodecError as e:
        raise e.at(table_id=table_id, handle=handle) from None
    if stats is not None:
        stats.rows += 1
        stats.zero_dates += zero_dates
        stats.filled += filled
    return row


__all__ = [
    "ZERO_DATE",
    "DecodeStats",
    "decode_row",
    "decode_stored",
    "encode_row",
    "row_version",
    "table_record_key",
]
