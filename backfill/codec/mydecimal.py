"""MySQL DECIMAL binary form (``decimal2bin``; TiDB ``MyDecimal.WriteBin``/``FromBin``), reference §3.4.

Digits are grouped in base 10^9 words of 4 bytes big-endian; a leading partial integer group and a
trailing partial fraction group use ``DIG2BYTES`` bytes. Negative values invert every byte, then the
first byte's top bit is flipped so the bytes sort like the numbers.
"""

from __future__ import annotations

import decimal
import functools
from decimal import Decimal

from backfill.codec.errors import CodecError

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
DIGITS_PER_WORD = 9
MAX_PRECISION = 65
MAX_FRAC = 30
_CTX = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)


def decimal_bin_size(precision: int, frac: int) -> int:
    intg = precision - frac
    return (intg // 9) * 4 + DIG2BYTES[intg % 9] + (frac // 9) * 4 + DIG2BYTES[frac % 9]


def check_precision(precision: int, frac: int) -> None:
    if not (0 < precision <= MAX_PRECISION and 0 <= frac <= MAX_FRAC and frac <= precision):
        raise CodecError(f"invalid decimal precision/frac {precision},{frac}")


def to_decimal(value: object) -> Decimal:
    """Accept Decimal, int, str or float (via its shortest repr) as an exact decimal."""
    if isinstance(value, Decimal):
        d = value
    elif isinstance(value, bool):
        raise CodecError("cannot store bool as DECIMAL")
    elif isinstance(value, int | str):
        try:
            d = Decimal(value)
        except decimal.InvalidOperation as e:
            raise CodecError(f"cannot parse decimal {value!r}") from e
    elif isinstance(value, float):
        d = Decimal(repr(value))
    else:
        raise CodecError(f"cannot store {type(value).__name__} {value!r} as DECIMAL")
    if not d.is_finite():
        raise CodecError(f"decimal {value!r} is not finite")
    return d


def quantize(d: Decimal, precision: int, frac: int) -> Decimal:
    """Round half-up to ``frac`` digits (as MySQL does) and check it fits ``precision`` digits."""
    q = d.quantize(Decimal(1).scaleb(-frac), context=_CTX)
    if q.is_zero():
        return q.copy_abs()
    if q.adjusted() >= precision - frac:
        raise CodecError(f"decimal {d} does not fit DECIMAL({precision},{frac})")
    return q


def encode_decimal_bin(value: Decimal, precision: int, frac: int) -> bytes:
    """decimal2bin of ``value`` (rounded to ``frac``) in DECIMAL(precision, frac)."""
    check_precision(precision, frac)
    return encode_quantized_bin(quantize(value, precision, frac), precision, frac)


def encode_quantized_bin(q: Decimal, precision: int, frac: int) -> bytes:
    """decimal2bin of a value `quantize` already gave for this (valid) precision and frac.

    The words are cut from the unscaled integer with divmod, least significant first, into one integer
    whose big-endian bytes are the result: the simulator encodes millions of these."""
    groups, size = _word_layout(precision, frac)
    unscaled = int(q.scaleb(frac, context=_CTX))
    rest, packed, shift = abs(unscaled), 0, 0
    for modulus, bits in groups:
        rest, word = divmod(rest, modulus)
        packed |= word << shift
        shift += bits
    if rest:
        raise CodecError(f"decimal {q} does not fit DECIMAL({precision},{frac})")
    if unscaled < 0:
        packed ^= (1 << shift) - 1
    return (packed ^ 1 << (shift - 1)).to_bytes(size, "big")


@functools.cache
def _word_layout(precision: int, frac: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """(10**digits, bits) per word, least significant first (the fraction's partial word, its full
    words, the integer part's full words, its leading partial word), and the size in bytes."""
    intg = precision - frac
    digits = [frac % 9] + [9] * (frac // 9) + [9] * (intg // 9) + [intg % 9]
    groups = tuple((10**d, 8 * DIG2BYTES[d]) for d in digits if d)
    return groups, decimal_bin_size(precision, frac)


def decode_decimal_bin(buf: bytes, pos: int, precision: int, frac: int) -> tuple[Decimal, int]:
    """bin2decimal: returns the exact value (scale ``frac``) and the position after it."""
    check_precision(precision, frac)
    size = decimal_bin_size(precision, frac)
    if len(buf) - pos < size:
        raise CodecError(f"truncated decimal: need {size} bytes, have {len(buf) - pos}", offset=pos)
    raw = bytearray(buf[pos : pos + size])
    negative = not raw[0] & 0x80
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    intg = precision - frac
    parts: list[str] = []
    p = 0

    def take(ndigits: int) -> None:
        nonlocal p
        nbytes = DIG2BYTES[ndigits] if ndigits < 9 else 4
        v = int.from_bytes(raw[p : p + nbytes], "big")
        if v >= 10**ndigits:
            raise CodecError(f"decimal word {v} has more than {ndigits} digits", offset=pos + p)
        parts.append(str(v).rjust(ndigits, "0"))
        p += nbytes

    if intg % 9:
        take(intg % 9)
    for _ in range(intg // 9):
        take(9)
    for _ in range(frac // 9):
        take(9)
    if frac % 9:
        take(frac % 9)
    digits = "".join(parts) or "0"
    d = Decimal(int(digits)).scaleb(-frac, context=_CTX)
    if negative and not d.is_zero():
        d = d.copy_negate()
    return d, pos + size
