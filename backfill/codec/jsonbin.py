"""TiDB binary JSON (``types/json_binary.go``, MySQL 5.7 layout, little-endian), reference §3.4.

Canonical text: exactly what TiDB prints for a JSON value (``BinaryJSON.String``): object keys in binary
order (byte order of their UTF-8, which is how the binary form stores them), ``", "`` and ``": "``
separators, floats in ES6-like shortest form with a ``.0`` kept on integral floats, ``e`` notation below
1e-15 or from 1e15, Go's string escaping (``<>&`` left alone, U+2028/2029 escaped). Text from
:func:`to_text` parsed by :func:`from_text` and printed again is unchanged.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from decimal import Decimal

from backfill.codec.errors import CodecError
from backfill.codec.mytime import PackedTime, duration_to_text
from backfill.codec.numbers import INT64_MAX, INT64_MIN, UINT64_MAX, decode_uvarint, encode_uvarint

OBJECT, ARRAY, LITERAL = 0x01, 0x03, 0x04
INT64, UINT64, FLOAT64, STRING, OPAQUE = 0x09, 0x0A, 0x0B, 0x0C, 0x0D
DATE, DATETIME, TIMESTAMP, DURATION = 0x0E, 0x0F, 0x10, 0x11
LIT_NULL, LIT_TRUE, LIT_FALSE = 0x00, 0x01, 0x02
MAX_DEPTH = 100

_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")


# ---------------------------------------------------------------- encode (Python value -> binary)


def from_text(text: str) -> tuple[int, bytes]:
    """Parse JSON text as TiDB does (ints as int64, then uint64, else float) into (type code, bytes)."""
    try:  # an int beyond uint64 becomes a float in `encode_value`, as a hook here would make it
        obj = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise CodecError(f"invalid JSON text: {e}") from e
    return encode_value(obj)


def _reject_constant(s: str) -> None:
    raise ValueError(f"{s} is not valid JSON")


def encode_value(obj: object) -> tuple[int, bytes]:
    """Python JSON value (dict/list/str/int/float/bool/None) -> (type code, binary value)."""
    buf = bytearray()
    code = _append_value(buf, obj, 0)
    return code, bytes(buf)


def _append_value(buf: bytearray, obj: object, depth: int) -> int:
    if depth > MAX_DEPTH:
        raise CodecError("JSON document deeper than 100 levels")
    if isinstance(obj, str):  # the commonest leaf first
        raw = obj.encode("utf-8")
        buf += encode_uvarint(len(raw))
        buf += raw
        return STRING
    if obj is None:
        buf.append(LIT_NULL)
        return LITERAL
    if obj is True or obj is False:
        buf.append(LIT_TRUE if obj else LIT_FALSE)
        return LITERAL
    if isinstance(obj, int):
        if INT64_MIN <= obj <= INT64_MAX:
            buf += _I64.pack(obj)
            return INT64
        if 0 <= obj <= UINT64_MAX:
            buf += _U64.pack(obj)
            return UINT64
        obj = float(obj)
    if isinstance(obj, Decimal):
        obj = float(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise CodecError(f"JSON cannot hold {obj}")
        buf += _F64.pack(obj)
        return FLOAT64
    if isinstance(obj, list | tuple):
        _append_container(buf, None, list(obj), depth)
        return ARRAY
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, str):
                raise CodecError(f"JSON object key {k!r} is not a string")
        keys = sorted((k.encode("utf-8"), k) for k in obj)
        _append_container(buf, [kb for kb, _ in keys], [obj[k] for _, k in keys], depth)
        return OBJECT
    raise CodecError(f"cannot store {type(obj).__name__} {obj!r} as JSON")


def _append_container(buf: bytearray, keys: list[bytes] | None, values: list, depth: int) -> None:
    start = len(buf)
    n = len(values)
    buf += _U32.pack(n) + b"\0\0\0\0"
    key_entries = len(buf)
    if keys is not None:
        buf += bytes(6 * n)
    value_entries = len(buf)
    buf += bytes(5 * n)
    if keys is not None:
        for i, k in enumerate(keys):
            if len(k) > 0xFFFF:
                raise CodecError("JSON object key longer than 65535 bytes")
            struct.pack_into("<IH", buf, key_entries + 6 * i, len(buf) - start, len(k))
            buf += k
    for i, v in enumerate(values):
        elem = len(buf)
        code = _append_value(buf, v, depth + 1)
        entry = value_entries + 5 * i
        buf[entry] = code
        if code == LITERAL:
            lit = buf[elem]
            del buf[elem:]
            buf[entry + 1 : entry + 5] = bytes((lit, 0, 0, 0))
        else:
            _U32.pack_into(buf, entry + 1, elem - start)
    _U32.pack_into(buf, start + 4, len(buf) - start)


# ---------------------------------------------------------------- decode (binary -> canonical text)


def binary_size(code: int, buf: bytes, pos: int) -> int:
    """Length of a binary JSON value starting at ``pos`` (v1 rows carry no length: PeekBytesAsJSON)."""
    try:
        if code in (OBJECT, ARRAY):
            return _U32.unpack_from(buf, pos + 4)[0]
        if code == LITERAL:
            return 1
        if code in (INT64, UINT64, FLOAT64, DATE, DATETIME, TIMESTAMP):
            return 8
        if code == DURATION:
            return 12
        if code == STRING:
            n, p = decode_uvarint(buf, pos)
            return p - pos + n
        if code == OPAQUE:
            n, p = decode_uvarint(buf, pos + 1)
            return p - pos + n
    except struct.error as e:
        raise CodecError("truncated JSON value", offset=pos) from e
    raise CodecError(f"unknown JSON type code {code:#x}", offset=pos)


def to_text(code: int, buf: bytes) -> str:
    """Canonical JSON text of a binary JSON value (the whole of ``buf``)."""
    out: list[str] = []
    try:
        _write(out, code, buf, 0, len(buf), 0)
    except (struct.error, IndexError):
        raise CodecError("truncated JSON value") from None
    return "".join(out)


def cell_to_text(cell: bytes) -> str:
    """Canonical text of a row-v2 JSON cell (type code byte + binary value), checking its length."""
    if not cell:
        raise CodecError("empty JSON value")
    code = cell[0]
    if binary_size(code, cell, 1) != len(cell) - 1:
        raise CodecError("JSON value length does not match its cell")
    out: list[str] = []
    try:
        _write(out, code, cell, 1, len(cell), 0)
    except (struct.error, IndexError):
        raise CodecError("truncated JSON value") from None
    return "".join(out)


def _past_end(pos: int, limit: int) -> CodecError:
    return CodecError(f"JSON value runs past its end ({pos} > {limit})", offset=pos)


_LITERALS = ("null", "true", "false")
_HEADER = struct.Struct("<II")
_KEY_ENTRY = struct.Struct("<IH")
_VALUE_ENTRY = struct.Struct("<BI")


def _write(out: list[str], code: int, buf: bytes, pos: int, limit: int, depth: int) -> None:
    """Append the text of the value at ``pos``, which must end by ``limit``."""
    if code in (OBJECT, ARRAY):
        _write_container(out, code, buf, pos, limit, depth)
    elif code == LITERAL:
        if pos + 1 > limit or buf[pos] > LIT_FALSE:
            raise CodecError("bad JSON literal", offset=pos)
        out.append(_LITERALS[buf[pos]])
    elif code == STRING:
        out.append(quote_string(_string_at(buf, pos, limit)))
    elif code in (INT64, UINT64, FLOAT64):
        if pos + 8 > limit:
            raise _past_end(pos + 8, limit)
        if code == INT64:
            out.append(str(_I64.unpack_from(buf, pos)[0]))
        elif code == UINT64:
            out.append(str(_U64.unpack_from(buf, pos)[0]))
        else:
            out.append(format_float(_F64.unpack_from(buf, pos)[0]))
    elif code == OPAQUE:
        if pos + 1 > limit:
            raise _past_end(pos + 1, limit)
        raw = _string_at(buf, pos + 1, limit)
        out.append(f'"base64:type{buf[pos]}:{base64.b64encode(raw).decode()}"')
    elif code in (DATE, DATETIME, TIMESTAMP):
        if pos + 8 > limit:
            raise _past_end(pos + 8, limit)
        t = PackedTime.unpack(_U64.unpack_from(buf, pos)[0])
        date = f"{t.year:04d}-{t.month:02d}-{t.day:02d}"
        if code == DATE:
            out.append(f'"{date}"')
        else:
            out.append(f'"{date} {t.hour:02d}:{t.minute:02d}:{t.second:02d}.{t.microsecond:06d}"')
    elif code == DURATION:
        if pos + 12 > limit:
            raise _past_end(pos + 12, limit)
        out.append(f'"{duration_to_text(_I64.unpack_from(buf, pos)[0], 6)}"')
    else:
        raise CodecError(f"unknown JSON type code {code:#x}", offset=pos)


def _string_at(buf: bytes, pos: int, limit: int) -> bytes:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = decode_uvarint(buf, pos)
    if pos + n > limit:
        raise _past_end(pos + n, limit)
    return buf[pos : pos + n]


def _write_container(out: list[str], code: int, buf: bytes, pos: int, limit: int, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CodecError("JSON document deeper than 100 levels", offset=pos)
    if pos + 8 > limit:
        raise _past_end(pos + 8, limit)
    count, size = _HEADER.unpack_from(buf, pos)
    end = pos + size
    is_obj = code == OBJECT
    entries = pos + 8 + (6 * count if is_obj else 0)
    if end > limit or entries + 5 * count > end:
        raise CodecError(f"JSON container of {count} elements does not fit its {size} bytes", offset=pos)
    fields = _entry_struct(is_obj, count).unpack_from(buf, pos + 8)
    append = out.append
    if is_obj:
        key_texts = _object_keys(buf, pos, end, fields[: 2 * count])
        append("{")
    else:
        append("[")
    for i in range(count):
        if is_obj:
            append(key_texts[i])
        elif i:
            append(", ")
        vcode = fields[2 * count + 2 * i] if is_obj else fields[2 * i]
        voff = fields[2 * count + 2 * i + 1] if is_obj else fields[2 * i + 1]
        if vcode == LITERAL:
            lit = voff & 0xFF
            if lit > LIT_FALSE:
                raise CodecError(f"bad JSON literal {lit:#x}", offset=entries + 5 * i + 1)
            append(_LITERALS[lit])
        elif vcode == INT64:
            p = pos + voff
            if p + 8 > end:
                raise _past_end(p + 8, end)
            append(str(_I64.unpack_from(buf, p)[0]))
        elif vcode == STRING:
            append(quote_string(_string_at(buf, pos + voff, end)))
        elif vcode in (OBJECT, ARRAY):
            _write_container(out, vcode, buf, pos + voff, end, depth + 1)
        else:
            _write(out, vcode, buf, pos + voff, end, depth + 1)
    append("}" if is_obj else "]")


_ENTRY_STRUCTS: dict[tuple[bool, int], struct.Struct] = {}


def _entry_struct(is_obj: bool, count: int) -> struct.Struct:
    """One struct for all key entries (u32 off, u16 len) and value entries (u8 type, u32) of a container."""
    st = _ENTRY_STRUCTS.get((is_obj, count))
    if st is None:
        st = struct.Struct("<" + ("IH" * count if is_obj else "") + "BI" * count)
        if count <= 256:
            _ENTRY_STRUCTS[(is_obj, count)] = st
    return st


_KEY_TEXTS: dict[tuple[tuple[int, ...], bytes], list[str]] = {}


def _object_keys(buf: bytes, pos: int, end: int, key_fields: tuple[int, ...]) -> list[str]:
    """Quoted key texts (``"k": ``, with the ``, `` separator before all but the first) of an object.

    Objects of one column mostly share their keys: the texts are cached by the key entries plus the key
    bytes they cover, and only cached when every key lies inside those bytes, so a hit is always exact.
    """
    if not key_fields:
        return []
    k0 = pos + key_fields[0]
    k1 = pos + key_fields[-2] + key_fields[-1]
    cache_key = (key_fields, buf[k0:k1])
    texts = _KEY_TEXTS.get(cache_key)
    if texts is not None:
        return texts
    texts = []
    contained = True
    for i in range(0, len(key_fields), 2):
        k = pos + key_fields[i]
        n = key_fields[i + 1]
        if k + n > end:
            raise _past_end(k + n, end)
        contained = contained and k0 <= k and k + n <= k1
        texts.append((", " if i else "") + quote_string(buf[k : k + n]) + ": ")
    if contained:
        if len(_KEY_TEXTS) > 4096:
            _KEY_TEXTS.clear()
        _KEY_TEXTS[cache_key] = texts
    return texts


_ESCAPES = {
    ord("\\"): "\\\\",
    ord('"'): '\\"',
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    ord("\b"): "\\b",
    ord("\f"): "\\f",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
for _c in range(0x20):
    _ESCAPES.setdefault(_c, f"\\u{_c:04x}")


_BAD_BYTE = re.compile("[\udc80-\udcff]")


_PLAIN_ASCII = re.compile(rb"[^\x20\x21\x23-\x5b\x5d-\x7e]")  # bytes that need no escaping


def quote_string(raw: bytes) -> str:
    """Go-style JSON string quoting as TiDB's ``jsonMarshalStringTo`` (each invalid UTF-8 byte -> \\ufffd)."""
    if not _PLAIN_ASCII.search(raw):
        return '"' + raw.decode("ascii") + '"'
    text = raw.decode("utf-8", errors="surrogateescape").translate(_ESCAPES)
    if not text.isascii():
        text = _BAD_BYTE.sub(r"\\ufffd", text)
    return '"' + text + '"'


def format_float(f: float) -> str:
    """TiDB ``marshalFloat64To``: 'f' format with shortest digits, 'e' below 1e-15 or from 1e15."""
    if not math.isfinite(f):
        raise CodecError(f"JSON cannot hold float {f}")
    a = abs(f)
    if a != 0 and (a < 1e-15 or a >= 1e15):
        sign, digits, exp = Decimal(repr(f)).as_tuple()
        assert isinstance(exp, int)  # a finite number's exponent (not 'n'/'N'/'F')
        ds = "".join(map(str, digits)).rstrip("0") or "0"
        e = exp + len(digits) - 1
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{'-' if sign else ''}{mant}e{'-' if e < 0 else ''}{abs(e):02d}"
    s = format(Decimal(repr(f)), "f")
    if "." not in s:
        s += ".0"
    return s
