"""Python values <-> the stored datum of a column, shared by row v2, row v1 and common-handle keys.

Stored forms by kind: signed/unsigned ints (packed time, ENUM index, SET bits, BIT value and TIME
nanoseconds are ints too), floats, bytes (strings), ``(Decimal, prec, frac)`` for DECIMAL, and
``(type code, bytes)`` for JSON. :func:`to_stored` validates and normalises what the encoder accepts;
:func:`from_stored` produces the value domain of the type map (docs/architecture.md "Delta conventions").
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np

from backfill.codec import jsonbin, mydecimal, mytime
from backfill.codec.errors import CodecError
from backfill.codec.mytime import PackedTime
from backfill.codec.numbers import UINT64_MAX
from backfill.codec.schema import ColumnKind, ColumnSchema

_SIGNED_RANGES = {1: 8, 2: 16, 9: 24, 3: 32, 8: 64, 13: 16}  # tp -> bits (YEAR as a small int)
_F32 = struct.Struct("<f")
_F32_MAX = float(np.finfo(np.float32).max)
K = ColumnKind


class ZeroDate:
    """Marker returned by :func:`from_stored` for dates that become NULL and must be counted."""


ZERO_DATE = ZeroDate()


def _as_int(col: ColumnSchema, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | Decimal | np.integer):
        raise CodecError(f"cannot store {type(value).__name__} {value!r} as an integer", column=col.name)
    if isinstance(value, Decimal) and value != value.to_integral_value():
        raise CodecError(f"{value} is not an integer", column=col.name)
    return int(value)


def to_float32(f: float) -> float:
    """``f`` rounded to the nearest FLOAT (single precision); OverflowError beyond its range."""
    return float(_F32.unpack(_F32.pack(f))[0])


def stored_float32(f: float) -> float:
    """A FLOAT cell's stored double as TiDB reads it, Go's ``float32(f)``: rounded to single precision,
    infinite beyond its range (a corrupted or foreign cell), without numpy's overflow warning there."""
    if -_F32_MAX <= f <= _F32_MAX or f != f:
        return float(np.float32(f))
    with np.errstate(over="ignore"):
        return float(np.float32(f))


def int_bounds(col: ColumnSchema) -> tuple[int, int]:
    """Value range of an integer column (MySQL type and signedness; YEAR is 0 or 1901..2155)."""
    if col.kind == K.YEAR:
        return 0, 2155
    bits = _SIGNED_RANGES.get(col.tp, 64)
    if col.kind in (K.UINT, K.UINT64):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def to_stored(col: ColumnSchema, value: Any) -> Any:
    """Normalise an accepted Python value to the stored datum of ``col`` (None stays None)."""
    if value is None:
        return None
    kind = col.kind
    if kind in (K.INT, K.YEAR, K.UINT, K.UINT64):
        v = _as_int(col, value)
        lo, hi = int_bounds(col)
        if not lo <= v <= hi:
            raise CodecError(f"{v} out of range {lo}..{hi} of the column type", column=col.name)
        return v
    store = _TO_STORED.get(kind)
    if store is None:
        raise CodecError(f"cannot encode kind {kind}", column=col.name)
    return store(col, value)


def _float_to_stored(col: ColumnSchema, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | np.floating | np.integer):
        raise CodecError(f"cannot store {type(value).__name__} as a float", column=col.name)
    f = float(value)
    if col.kind == K.FLOAT32:
        try:
            f = to_float32(f)
        except OverflowError as e:
            raise CodecError(f"{value} out of FLOAT range", column=col.name) from e
    return f


def _decimal_to_stored(col: ColumnSchema, value: Any) -> tuple[Decimal, int, int]:
    prec, frac = col.decimal_precision
    try:
        return mydecimal.quantize(mydecimal.to_decimal(value), prec, frac), prec, frac
    except CodecError as e:
        raise e.at(column=col.name) from None


def _bytes_to_stored(col: ColumnSchema, value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise CodecError(f"cannot store {type(value).__name__} as a string", column=col.name)


def _bit_to_stored(col: ColumnSchema, value: Any) -> int:
    width = (max(col.flen, 1) + 7) // 8
    v = int.from_bytes(value, "big") if isinstance(value, bytes | bytearray) else _as_int(col, value)
    if v < 0 or v >> (max(col.flen, 1)) or v > UINT64_MAX or width > 8:
        raise CodecError(f"{value!r} does not fit BIT({col.flen})", column=col.name)
    return v


def _json_to_stored(col: ColumnSchema, value: Any) -> Any:
    try:
        if isinstance(value, str):
            return jsonbin.from_text(value)
        if isinstance(value, bytes | bytearray):
            return jsonbin.from_text(bytes(value).decode("utf-8"))
        return jsonbin.encode_value(value)
    except CodecError as e:
        raise e.at(column=col.name) from None


def _time_point_to_stored(col: ColumnSchema, value: Any) -> Any:
    try:
        return mytime.packed_from_python(
            value, fsp=col.fsp, is_date=col.kind == K.DATE, is_timestamp=col.kind == K.TIMESTAMP
        )
    except CodecError as e:
        raise e.at(column=col.name) from None


def _duration_to_stored(col: ColumnSchema, value: Any) -> int:
    try:
        return mytime.duration_from_python(value, col.fsp)
    except CodecError as e:
        raise e.at(column=col.name) from None


def _vector_to_stored(col: ColumnSchema, value: Any) -> bytes:
    floats = [float(x) for x in value]
    return struct.pack(f"<I{len(floats)}f", len(floats), *floats)


def _enum_index(col: ColumnSchema, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= len(col.elems):
            raise CodecError(f"enum index {value} out of range 0..{len(col.elems)}", column=col.name)
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise CodecError(f"cannot store {type(value).__name__} as ENUM", column=col.name)
    if value == "":
        return 0
    for i, e in enumerate(col.elems):
        if e == value:
            return i + 1
    low = value.lower()
    for i, e in enumerate(col.elems):
        if e.lower() == low:
            return i + 1
    raise CodecError(f"{value!r} is not one of the ENUM values {col.elems}", column=col.name)


def _set_bits(col: ColumnSchema, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < (1 << len(col.elems)):
            raise CodecError(f"set bits {value:#x} out of range", column=col.name)
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    names = [n for n in value.split(",") if n] if isinstance(value, str) else list(value)
    bits = 0
    lowered = [e.lower() for e in col.elems]
    for n in names:
        try:
            bits |= 1 << lowered.index(str(n).lower())
        except ValueError:
            raise CodecError(f"{n!r} is not one of the SET values {col.elems}", column=col.name) from None
    return bits


def from_stored(col: ColumnSchema, stored: Any) -> Any:
    """Stored datum -> Python value of the value domain; ZERO_DATE for dates that become NULL."""
    if stored is None:
        return None
    kind = col.kind
    if kind in (K.INT, K.UINT, K.YEAR):
        lo, hi = int_bounds(col)
        if not lo <= stored <= hi:
            raise CodecError(f"{stored} out of range {lo}..{hi} of the column type", column=col.name)
        return stored
    if kind in (K.FLOAT64, K.BINARY):
        return stored
    read = _FROM_STORED.get(kind)
    if read is None:
        raise CodecError(f"cannot decode kind {kind}", column=col.name)
    return read(col, stored)


def _decimal_from_stored(col: ColumnSchema, stored: Any) -> Decimal | str:
    d, _prec, frac = stored
    prec, scale = col.decimal_precision
    if frac != scale or d.as_tuple().exponent != -scale:
        d = mydecimal.quantize(d, prec, scale)
    elif d.adjusted() >= prec - scale and not d.is_zero():
        raise CodecError(f"decimal {d} does not fit DECIMAL({prec},{scale})", column=col.name)
    return d if col.kind == K.DECIMAL else format(d, "f")


def _text_from_stored(col: ColumnSchema, stored: Any) -> str:
    try:
        return stored.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CodecError(f"invalid UTF-8 in text column at byte {e.start}", column=col.name) from None


def _enum_from_stored(col: ColumnSchema, stored: Any) -> str:
    if stored == 0:
        return ""
    if stored > len(col.elems):
        raise CodecError(f"enum index {stored} out of range 1..{len(col.elems)}", column=col.name)
    return col.elems[stored - 1]


def _set_from_stored(col: ColumnSchema, stored: Any) -> str:
    if stored >> len(col.elems):
        raise CodecError(
            f"set bits {stored:#x} name values beyond {len(col.elems)} elements", column=col.name
        )
    return ",".join(e for i, e in enumerate(col.elems) if stored >> i & 1)


def _bit_from_stored(col: ColumnSchema, stored: Any) -> bytes:
    width = (max(col.flen, 1) + 7) // 8
    if stored >> (8 * width):
        raise CodecError(f"bit value {stored:#x} wider than BIT({col.flen})", column=col.name)
    return stored.to_bytes(width, "big")


def _time_point_from_stored(col: ColumnSchema, stored: Any) -> Any:
    v = mytime.packed_to_python(stored, kind=col.kind.value)
    return ZERO_DATE if v is None else v


def _duration_from_stored(col: ColumnSchema, stored: Any) -> str:
    if abs(stored) > mytime.MAX_DURATION_NS:
        raise CodecError(f"TIME value {stored}ns out of range", column=col.name)
    return mytime.duration_to_text(stored, col.fsp)


# The kinds beyond integers (and, when reading, the values kept as they are), each one function.
_TO_STORED: dict[K, Callable[[ColumnSchema, Any], Any]] = {
    K.FLOAT32: _float_to_stored,
    K.FLOAT64: _float_to_stored,
    K.DECIMAL: _decimal_to_stored,
    K.DECIMAL_STR: _decimal_to_stored,
    K.TEXT: _bytes_to_stored,
    K.BINARY: _bytes_to_stored,
    K.ENUM: _enum_index,
    K.SET: _set_bits,
    K.BIT: _bit_to_stored,
    K.JSON: _json_to_stored,
    K.DATE: _time_point_to_stored,
    K.DATETIME: _time_point_to_stored,
    K.TIMESTAMP: _time_point_to_stored,
    K.TIME: _duration_to_stored,
    K.VECTOR: _vector_to_stored,
}
_FROM_STORED: dict[K, Callable[[ColumnSchema, Any], Any]] = {
    K.UINT64: lambda col, stored: Decimal(stored),
    K.FLOAT32: lambda col, stored: stored_float32(stored),
    K.DECIMAL: _decimal_from_stored,
    K.DECIMAL_STR: _decimal_from_stored,
    K.TEXT: _text_from_stored,
    K.ENUM: _enum_from_stored,
    K.SET: _set_from_stored,
    K.BIT: _bit_from_stored,
    K.JSON: lambda col, stored: jsonbin.to_text(*stored),
    K.DATE: _time_point_from_stored,
    K.DATETIME: _time_point_from_stored,
    K.TIMESTAMP: _time_point_from_stored,
    K.TIME: _duration_from_stored,
    K.VECTOR: lambda col, stored: vector_to_text(stored),
}


def vector_to_text(raw: bytes) -> str:
    if len(raw) < 4:
        raise CodecError("truncated vector")
    (n,) = struct.unpack_from("<I", raw)
    if len(raw) != 4 + 4 * n:
        raise CodecError(f"vector of {n} floats needs {4 + 4 * n} bytes, has {len(raw)}")
    vals = struct.unpack_from(f"<{n}f", raw, 4)
    return "[" + ",".join(np.format_float_positional(np.float32(v), trim="-") for v in vals) + "]"


# ---------------------------------------------------------------- absent columns


def _origin_default_stored(col: ColumnSchema, tz: dt.tzinfo | None) -> Any:
    """Convert ``origin_default`` (TiDB keeps it as text) to the stored datum of the column type."""
    raw = col.origin_default
    kind = col.kind
    if kind == K.BIT and col.origin_default_bit is not None:
        return int.from_bytes(col.origin_default_bit, "big")
    if isinstance(raw, str):
        if kind in (K.INT, K.UINT, K.UINT64, K.YEAR, K.BIT):
            try:
                raw = int(Decimal(raw.strip()).to_integral_value())
            except ArithmeticError as e:
                raise CodecError(f"origin default {raw!r} is not a number", column=col.name) from e
        elif kind in (K.FLOAT32, K.FLOAT64):
            raw = float(raw)
        elif kind == K.TIMESTAMP:
            t = mytime.parse_time_text(raw)
            if t.is_zero():
                return 0
            # version >= 1: the default is UTC text; version 0: in the TiDB server's zone (``tz``).
            if col.version < 1 and tz is not None:
                try:
                    local = dt.datetime(*t, tzinfo=tz)
                except ValueError:
                    return t.pack()
                raw = local.astimezone(mytime.UTC)
            else:
                return to_stored(col, t)
    return to_stored(col, raw)


def fill_value(col: ColumnSchema, tz: dt.tzinfo | None = None) -> Any:
    """Value of a column absent from a row, as TiCDC fills it (reference §3.5).

    Origin default (converted to the column type) -> NULL if nullable -> ENUM first element ->
    the type's zero value. May return ZERO_DATE (a zero-date default or zero value).
    """
    if col.kind in (K.ENUM, K.SET) and not col.elems and isinstance(col.origin_default, str):
        return col.origin_default  # the elements are unknown (a schema file without them): its own text
    if col.origin_default is not None or (col.kind == K.BIT and col.origin_default_bit is not None):
        return from_stored(col, _origin_default_stored(col, tz))
    if col.nullable:
        return None
    return from_stored(col, zero_stored(col))


def zero_stored(col: ColumnSchema) -> Any:
    kind = col.kind
    if kind in (K.INT, K.UINT, K.UINT64, K.YEAR, K.SET, K.BIT, K.TIME, K.DATE, K.DATETIME, K.TIMESTAMP):
        return 0
    if kind == K.ENUM:
        return 1 if col.elems else 0
    if kind in (K.FLOAT32, K.FLOAT64):
        return 0.0
    if kind in (K.DECIMAL, K.DECIMAL_STR):
        prec, frac = col.decimal_precision
        return Decimal(0).scaleb(-frac), prec, frac
    if kind in (K.TEXT, K.BINARY):
        return b""
    if kind == K.JSON:
        return jsonbin.LITERAL, bytes([jsonbin.LIT_NULL])
    if kind == K.VECTOR:
        return b"\0\0\0\0"
    raise CodecError(f"no zero value for kind {kind}", column=col.name)


__all__ = ["ZERO_DATE", "PackedTime", "fill_value", "from_stored", "to_stored", "zero_stored"]
