"""Row format v1 (``tablecodec.EncodeOldRow``; reference §3.6): alternating datums ``id, value, ...``.

Values are "flattened" first: times become packed uints, TIME becomes int64 ns, ENUM/SET/BIT uints.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from backfill.codec import jsonbin, mydecimal
from backfill.codec.errors import CodecError
from backfill.codec.keys import (
    COMPACT_BYTES_FLAG,
    DECIMAL_FLAG,
    FLOAT_FLAG,
    JSON_FLAG,
    NIL_FLAG,
    UVARINT_FLAG,
    VARINT_FLAG,
    VECTOR_FLOAT32_FLAG,
    decode_datum,
)
from backfill.codec.numbers import U64_MASK, encode_cmp_float, encode_uvarint, encode_varint
from backfill.codec.schema import UNSIGNED_STORED, ColumnKind, ColumnSchema


def encode_datum_v1(col: ColumnSchema, stored: Any) -> bytes:
    """``codec.EncodeValue`` (comparable=false) of one flattened stored datum."""
    kind = col.kind
    if stored is None:
        return bytes([NIL_FLAG])
    if kind in UNSIGNED_STORED:
        return bytes([UVARINT_FLAG]) + encode_uvarint(stored)
    if kind in (ColumnKind.INT, ColumnKind.YEAR, ColumnKind.TIME):
        return bytes([VARINT_FLAG]) + encode_varint(stored)
    if kind in (ColumnKind.FLOAT32, ColumnKind.FLOAT64):
        return bytes([FLOAT_FLAG]) + encode_cmp_float(stored)
    if kind in (ColumnKind.TEXT, ColumnKind.BINARY):
        return bytes([COMPACT_BYTES_FLAG]) + encode_varint(len(stored)) + stored
    if kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR):
        d, prec, frac = stored
        return bytes([DECIMAL_FLAG, prec, frac]) + mydecimal.encode_decimal_bin(d, prec, frac)
    if kind == ColumnKind.JSON:
        code, raw = stored
        return bytes([JSON_FLAG, code]) + raw
    if kind == ColumnKind.VECTOR:
        return bytes([VECTOR_FLOAT32_FLAG]) + stored
    raise CodecError(f"cannot encode kind {kind}", column=col.name)


def encode_row_v1(cells: Iterable[tuple[int, bytes]]) -> bytes:
    """``(column id, encoded datum)`` pairs -> v1 row (a lone NilFlag for a row without columns)."""
    out = bytearray()
    for cid, datum in cells:
        out += bytes([VARINT_FLAG]) + encode_varint(cid) + datum
    return bytes(out) if out else bytes([NIL_FLAG])


def stored_from_v1(col: ColumnSchema, datum: Any) -> Any:
    """Convert a decoded v1 datum to the stored datum the column kind expects (unflatten)."""
    if datum is None:
        return None
    kind = col.kind
    if kind in UNSIGNED_STORED or kind in (ColumnKind.INT, ColumnKind.YEAR, ColumnKind.TIME):
        if isinstance(datum, int):
            if kind in UNSIGNED_STORED:
                return datum & U64_MASK
            return datum - (1 << 64) if datum >= 1 << 63 else datum
    elif kind in (ColumnKind.FLOAT32, ColumnKind.FLOAT64):
        if isinstance(datum, float):
            return datum
    elif kind in (ColumnKind.TEXT, ColumnKind.BINARY, ColumnKind.VECTOR):
        if isinstance(datum, bytes):
            return datum
    elif kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR):
        if isinstance(datum, tuple) and isinstance(datum[0], Decimal):
            return datum
    elif kind == ColumnKind.JSON and isinstance(datum, tuple) and isinstance(datum[1], bytes):
        jsonbin.to_text(*datum)  # validate now so the error carries this column's offset
        return datum
    raise CodecError(
        f"{type(datum).__name__} datum cannot be stored in a {kind.value} column", column=col.name
    )


def decode_row_v1(columns: Iterable[ColumnSchema], value: bytes) -> dict[int, Any]:
    """Column id -> stored datum for the given columns present in a v1 row; other ids are skipped."""
    wanted = {c.id: c for c in columns}
    out: dict[int, Any] = {}
    if value == bytes([NIL_FLAG]):
        return out
    seen: set[int] = set()
    pos = 0
    while pos < len(value):
        id_pos = pos
        if value[pos] != VARINT_FLAG:
            raise CodecError(f"v1 column id has datum flag {value[pos]:#04x}, not varint", offset=id_pos)
        cid, pos = decode_datum(value, pos)
        if cid in seen:
            raise CodecError(f"column id {cid} appears twice", offset=id_pos)
        seen.add(cid)
        val_pos = pos
        datum, pos = decode_datum(value, pos)
        col = wanted.get(cid)
        if col is not None:
            try:
                out[cid] = stored_from_v1(col, datum)
            except CodecError as e:
                raise e.at(offset=val_pos) from None
    return out
