"""MySQL text forms of values, as TiCDC's CSV and canal-json encoders print them, to Delta-typed Arrow.

Both protocols print a value the way TiDB does (``Datum`` to string): integers and floats bare, DECIMAL
at the column scale, DATE/DATETIME/TIMESTAMP as ``YYYY-MM-DD[ hh:mm:ss[.f]]`` (TIMESTAMP in the
changefeed's time zone), TIME as ``[-]hh:mm:ss[.f]``, JSON and VECTOR as TiDB prints them, BIT as its
unsigned integer. They differ in three places, given by :class:`TextDialect`: binary strings (CSV:
base64 or hex; canal-json: one ISO-8859-1 character per byte), ENUM/SET (CSV: names; canal-json: the
index or bitmask, mapped to names when the schema knows them) — and nothing else.

The conversions are per column over a whole file's values (Arrow casts); the ones the open protocol's
decoder already has (dates with zero-date counting and time zones, ENUM/SET/BIT numbers) are taken from
:mod:`open_rows`, so a value means the same whichever TiCDC protocol carried it.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import DecodeStats
from backfill.codec.schema import ColumnKind, ColumnSchema, TableSchema
from backfill.codec.values import int_bounds
from backfill.sources.ticdc.arrow_bytes import offsets_and_bytes
from backfill.sources.ticdc.open_rows import _TIME_TEXT, _Bad, _Decoder, _fits_decimal, _to_utc

K = ColumnKind
BINARY_ENCODINGS = ("base64", "hex", "latin1")


class BadValue(Exception):
    """Value ``row`` of a column does not parse as the column's type."""

    def __init__(self, row: int, message: str) -> None:
        super().__init__(message)
        self.row = row
        self.message = message


@dataclass(frozen=True)
class TextDialect:
    """How one TiCDC protocol prints what plain MySQL text does not fix."""

    binary: str = "base64"  # base64 | hex (CSV) | latin1 (canal-json)
    enum_set_numbers: bool = False  # canal-json: ENUM index and SET bitmask instead of names
    time_zone: str = "UTC"  # the changefeed's time zone, in which TIMESTAMP text is printed

    def __post_init__(self) -> None:
        if self.binary not in BINARY_ENCODINGS:
            raise ValueError(f"binary encoding must be one of {BINARY_ENCODINGS}, got {self.binary!r}")


def text_column(
    schema: TableSchema, col: ColumnSchema, texts: pa.Array, dialect: TextDialect, stats: DecodeStats
) -> pa.Array:
    """The values of column ``col`` (Arrow strings, NULL for SQL NULL) as ``col.arrow_type``."""
    try:
        return _convert(schema, col, texts, dialect, stats)
    except _Bad as bad:
        raise BadValue(bad.row, bad.message) from None


def _convert(
    schema: TableSchema, col: ColumnSchema, texts: pa.Array, dialect: TextDialect, stats: DecodeStats
) -> pa.Array:
    kind = col.kind
    if kind in (K.TEXT, K.DECIMAL_STR, K.JSON, K.VECTOR):
        return texts
    if kind in (K.INT, K.UINT, K.YEAR):
        return _ints(col, texts)
    if kind == K.UINT64:
        return pc.cast(_cast(texts, pa.uint64(), "an unsigned integer"), col.arrow_type)
    if kind in (K.FLOAT32, K.FLOAT64):
        return _cast(texts, col.arrow_type, "a number")
    if kind == K.DECIMAL:
        try:
            return pc.cast(texts, col.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            prec, scale = col.decimal_precision
            values = texts.to_pylist()
            bad = next(i for i, v in enumerate(values) if v is not None and not _fits_decimal(v, prec, scale))
            raise _Bad(bad, f"{values[bad]!r} is not a DECIMAL({prec},{scale})") from None
    if kind == K.TIME:
        ok = pc.match_substring_regex(texts, "^" + _TIME_TEXT.pattern.removesuffix("\\Z") + "$")
        if not pc.all(pc.fill_null(ok, True), min_count=0).as_py():
            values = texts.to_pylist()
            bad = next(i for i, v in enumerate(values) if v is not None and not _TIME_TEXT.match(v))
            raise _Bad(bad, f"{values[bad]!r} is not a TIME value")
        return texts
    if kind == K.BINARY:
        return _binary(texts, dialect.binary)
    decoder = _Decoder(schema, dialect.time_zone, stats, None)  # type: ignore[arg-type]
    if kind in (K.ENUM, K.SET):
        if not dialect.enum_set_numbers:
            return texts
        numeric = pc.fill_null(pc.match_substring_regex(texts, r"^\d+$"), True)
        if not pc.all(numeric).as_py():
            return texts  # written as names after all (content-compatible output)
        numbers = pc.cast(texts, pa.uint64()).to_pylist()
        return decoder._enum(col, numbers) if kind == K.ENUM else decoder._set(col, numbers)
    if kind == K.BIT:
        return decoder._bit(col, _cast(texts, pa.uint64(), "a BIT value").to_pylist())
    if kind in (K.DATE, K.DATETIME, K.TIMESTAMP):
        try:
            parsed = pc.cast(texts, pa.date32() if kind == K.DATE else pa.timestamp("us"))
        except pa.ArrowInvalid:  # zero or impossible dates (NULL, counted), or malformed text (an error)
            parsed = decoder._time_slow(col, texts.to_pylist())
        return _to_utc(parsed, dialect.time_zone) if kind == K.TIMESTAMP else parsed
    raise _Bad(0, f"no text decoder for column kind {kind}")


def _cast(texts: pa.Array, typ: pa.DataType, what: str) -> pa.Array:
    try:
        return pc.cast(texts, typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = texts.to_pylist()
        for i, v in enumerate(values):
            try:
                pc.cast(pa.array([v], pa.string()), typ)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise _Bad(i, f"{v!r} is not {what}") from None
        raise


def _ints(col: ColumnSchema, texts: pa.Array) -> pa.Array:
    arr = _cast(texts, pa.int64(), "an integer")
    lo, hi = int_bounds(col)
    low_high = pc.min_max(arr).as_py()
    if low_high["min"] is not None and (low_high["min"] < lo or low_high["max"] > hi):
        values = arr.to_pylist()
        bad = next(i for i, v in enumerate(values) if v is not None and not lo <= v <= hi)
        raise _Bad(bad, f"{values[bad]} out of range {lo}..{hi} of {col.spark_type}")
    return pc.cast(arr, col.arrow_type)


def _binary(texts: pa.Array, encoding: str) -> pa.Array:
    if encoding == "latin1" and (fast := latin1_bytes(texts)) is not None:
        return fast
    values = texts.to_pylist()
    out: list[bytes | None] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            if encoding == "base64":
                out.append(binascii.a2b_base64(v, strict_mode=True))
            elif encoding == "hex":
                out.append(bytes.fromhex(v))
            else:
                out.append(v.encode("latin-1"))
        except (ValueError, binascii.Error, UnicodeEncodeError) as exc:
            raise _Bad(i, f"{v[:60]!r} is not {encoding}-encoded binary: {exc}") from None
    return pa.array(out, pa.binary())


def latin1_bytes(texts: pa.Array) -> pa.Array | None:
    """Text of characters U+0000..U+00FF (canal-json's binary: one ISO-8859-1 character per byte) -> those
    bytes, by numpy over the UTF-8 buffer (a Python ``encode`` per value cost 8 CPU s of a 5M canal-json run).
    In UTF-8 such a character above U+007F is a lead byte 0xC2 or 0xC3 and one continuation byte, which is
    the byte (plus 0x40 after 0xC3). None when a character is above U+00FF (``_binary`` then names it)."""
    if not pa.types.is_string(texts.type):
        return None
    offsets, data = offsets_and_bytes(texts)
    if data.size and data.max() >= 0xC4:  # the lead byte of a character above U+00FF
        return None
    out = data.copy()
    out[1:] += (data[:-1] == 0xC3).view(np.uint8) << 6  # the byte after each 0xC3 lead
    kept = data < 0xC0  # all but the leads (0xC2 or 0xC3; 0xC0 and 0xC1 are never in UTF-8)
    # each value's start among the kept bytes (int32: a string array's bytes fit)
    starts = np.concatenate([np.zeros(1, np.int32), np.cumsum(kept, dtype=np.int32)])
    new_offsets = starts[offsets - offsets[0]]
    validity = texts.is_valid().buffers()[1] if texts.null_count else None
    return pa.Array.from_buffers(
        pa.binary(),
        len(texts),
        [validity, pa.py_buffer(new_offsets), pa.py_buffer(np.extract(kept, out))],
        texts.null_count,
    )


def strings(values: list[str | None]) -> pa.Array:
    """A column of parsed text values as an Arrow string array."""
    return pa.array(values, pa.string())


__all__ = ["BINARY_ENCODINGS", "BadValue", "TextDialect", "strings", "text_column"]
