"""Fixed-width and variable-width integers and floats as TiDB's `codec` package writes them.

Conventions (reference §2.1, §3.2, §3.6): memcomparable ints are big-endian with the sign bit flipped;
row-v2 "compact" ints are little-endian in the smallest of 1/2/4/8 bytes; v1 ints are Go varints.
Decoders take ``(buf, pos)`` and return ``(value, new_pos)`` so callers can report byte offsets.
"""

from __future__ import annotations

import struct

from backfill.codec.errors import CodecError

SIGN_MASK = 0x8000000000000000
U64_MASK = 0xFFFFFFFFFFFFFFFF
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1

_U64_BE = struct.Struct(">Q")
_F64_BITS = struct.Struct(">d")


def encode_cmp_int(v: int) -> bytes:
    """EncodeInt: 8-byte big-endian of ``uint64(v) ^ 1<<63`` (sorts like the signed value)."""
    if not INT64_MIN <= v <= INT64_MAX:
        raise CodecError(f"int {v} out of int64 range")
    return _U64_BE.pack((v & U64_MASK) ^ SIGN_MASK)


def decode_cmp_int(buf: bytes, pos: int = 0) -> tuple[int, int]:
    if len(buf) - pos < 8:
        raise CodecError("truncated memcomparable int", offset=pos)
    u = _U64_BE.unpack_from(buf, pos)[0] ^ SIGN_MASK
    return (u - (1 << 64) if u & SIGN_MASK else u), pos + 8


def encode_cmp_uint(v: int) -> bytes:
    if not 0 <= v <= UINT64_MAX:
        raise CodecError(f"uint {v} out of uint64 range")
    return _U64_BE.pack(v)


def decode_cmp_uint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    if len(buf) - pos < 8:
        raise CodecError("truncated memcomparable uint", offset=pos)
    return _U64_BE.unpack_from(buf, pos)[0], pos + 8


def float_to_cmp_bits(f: float) -> int:
    """EncodeFloat as an integer: set the sign bit of non-negatives, invert negatives."""
    u = _U64_BE.unpack(_F64_BITS.pack(f))[0]
    return u | SIGN_MASK if not u & SIGN_MASK else ~u & U64_MASK


def cmp_bits_to_float(u: int) -> float:
    u = u & ~SIGN_MASK if u & SIGN_MASK else ~u & U64_MASK
    return _F64_BITS.unpack(_U64_BE.pack(u))[0]


def encode_cmp_float(f: float) -> bytes:
    return _U64_BE.pack(float_to_cmp_bits(f))


def decode_cmp_float(buf: bytes, pos: int = 0) -> tuple[float, int]:
    if len(buf) - pos < 8:
        raise CodecError("truncated float", offset=pos)
    return cmp_bits_to_float(_U64_BE.unpack_from(buf, pos)[0]), pos + 8


def encode_compact_int(v: int) -> bytes:
    """Row-v2 signed int: smallest of int8/16/32/64, little-endian (rowcodec ``encodeInt``)."""
    if -0x80 <= v <= 0x7F:
        return (v & 0xFF).to_bytes(1, "little")
    if -0x8000 <= v <= 0x7FFF:
        return v.to_bytes(2, "little", signed=True)
    if -0x80000000 <= v <= 0x7FFFFFFF:
        return v.to_bytes(4, "little", signed=True)
    if not INT64_MIN <= v <= INT64_MAX:
        raise CodecError(f"int {v} out of int64 range")
    return v.to_bytes(8, "little", signed=True)


def encode_compact_uint(v: int) -> bytes:
    """Row-v2 unsigned int: smallest of 1/2/4/8 bytes, little-endian (rowcodec ``encodeUint``)."""
    if v < 0 or v > UINT64_MAX:
        raise CodecError(f"uint {v} out of uint64 range")
    if v <= 0xFF:
        return v.to_bytes(1, "little")
    if v <= 0xFFFF:
        return v.to_bytes(2, "little")
    if v <= 0xFFFFFFFF:
        return v.to_bytes(4, "little")
    return v.to_bytes(8, "little")


_COMPACT_SIZES = (1, 2, 4, 8)


def decode_compact_int(data: bytes) -> int:
    if len(data) not in _COMPACT_SIZES:
        raise CodecError(f"compact int of {len(data)} bytes (want 1, 2, 4 or 8)")
    return int.from_bytes(data, "little", signed=True)


def decode_compact_uint(data: bytes) -> int:
    if len(data) not in _COMPACT_SIZES:
        raise CodecError(f"compact uint of {len(data)} bytes (want 1, 2, 4 or 8)")
    return int.from_bytes(data, "little")


def encode_uvarint(v: int) -> bytes:
    """Go ``binary.PutUvarint`` (LEB128)."""
    if v < 0 or v > UINT64_MAX:
        raise CodecError(f"uvarint {v} out of uint64 range")
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def decode_uvarint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    result = shift = 0
    start = pos
    while True:
        if pos >= len(buf):
            raise CodecError("truncated varint", offset=start)
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 1:
            raise CodecError("varint overflows 64 bits", offset=start)
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise CodecError("varint overflows 64 bits", offset=start)


def encode_varint(v: int) -> bytes:
    """Go ``binary.PutVarint``: zigzag then LEB128."""
    if not INT64_MIN <= v <= INT64_MAX:
        raise CodecError(f"varint {v} out of int64 range")
    return encode_uvarint(((v << 1) ^ (v >> 63)) & U64_MASK)


def decode_varint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    u, pos = decode_uvarint(buf, pos)
    return (u >> 1) ^ -(u & 1), pos
