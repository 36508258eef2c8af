"""The canonical row encoding: its spec, the float digits, and a pure reference implementation.

Both sides hash the same bytes for the same row: the upstream's SQL dialect writes the upstream half
(`reconcile.upstream.mysql` for the MySQL family), and `reconcile.sparkenc` writes the Delta half with
Spark built-ins. The spec (tidelake row encoding 1):

* A row is the concatenation of one field per compared column, in upstream ordinal order.
* A field is `N` for NULL, else `<L>:<text>` where L is the number of Unicode code points of `text`.
  Every field is self-delimiting, so no value can forge a boundary (`a,b`+`c` and `a`+`b,c` differ).
* The row hash is the first 16 hex digits of MD5(UTF-8 of the row) read as an unsigned 64-bit integer.
  A chunk's checksum is `(COUNT(*), SUM(hash))`, summed exactly (DECIMAL upstream, DECIMAL(38,0) in
  Spark): a sum, not an XOR, so two identical rows never cancel out.
* `text` per kind:
  - integers, YEAR, BIGINT UNSIGNED: the decimal integer.
  - DECIMAL: the value without trailing fractional zeros or trailing point (`1.50` -> `1.5`).
  - FLOAT/DOUBLE: `0` for zero, else `<m>e<x>` with x = floor(log10|v|) and m = v·10^(P-1-x) rounded
    half-even to an integer: P significant digits, P = 1 + ceil(-log10(float_tolerance)), at most
    9 (FLOAT) or 17 (DOUBLE, and when the tolerance is 0), so two values further apart than the
    tolerance never share a text. Values within the tolerance may still straddle a rounding boundary:
    their chunk is then row-diffed, where the tolerance itself decides, and they are not reported.
    The scaling multiplies or divides by 10^k1 (|k1| <= 22, exact), 10^k2 (|k2| <= 300) and the rest,
    in IEEE double arithmetic, so both engines compute the same bits; only when |P-1-x| > 44 (|v|
    below ~1e-28 or above ~1e44 at P = 17) is a power inexact, and the engines may then disagree in
    the last digit: a row diff of that chunk, never a reported difference.
  - CHAR/VARCHAR/TEXT/ENUM/SET: the string (SET as MySQL prints it, `a,b`), in utf8mb4.
  - BINARY/BLOB: upper-case hex. BIT(n): upper-case hex of its (n+7)/8 big-endian bytes.
  - DATE `YYYY-MM-DD`; DATETIME `YYYY-MM-DD HH:MM:SS.ffffff` (always 6 digits); zero dates and dates
    with a zero month or day are NULL, as the backfill writes them.
  - TIMESTAMP: microseconds since 1970-01-01 00:00:00 UTC (the session time zone is +00:00).
  - TIME: `[-]H:MM:SS.ffffff` (hours unpadded, 6 fraction digits).
  - JSON: on MariaDB (JSON is text there) `JSON_NORMALIZE`: keys sorted, no whitespace, numbers as
    `d.dddE±x` by decimal value; Spark computes the same form from the parsed document (sparkenc).
    On TiDB and MySQL: the server's own rendering, `CAST(j AS CHAR)`, which is the text the backfill
    stored. A document whose JSON cannot be normalised is hashed as `!` + its raw text.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from reconcile.schema import Kind

MAX_DIGITS = {Kind.FLOAT: 9, Kind.DOUBLE: 17}
EXACT_POWER = 22  # 10**22 is the largest power of ten a double holds exactly


class JsonMode(enum.Enum):
    """How JSON text is made canonical for the checksum (see the module docstring)."""

    NORMALIZED = "normalized"  # MariaDB's JSON_NORMALIZE form, which Spark reproduces
    AS_STORED = "as_stored"  # the server's own rendering against the Delta text as stored


@dataclass(frozen=True)
class FloatDigits:
    """Significant digits that FLOAT and DOUBLE are rounded to in the checksum."""

    float_digits: int
    double_digits: int

    @classmethod
    def for_tolerance(cls, tolerance: float) -> FloatDigits:
        if tolerance <= 0:
            return cls(MAX_DIGITS[Kind.FLOAT], MAX_DIGITS[Kind.DOUBLE])
        wanted = 1 + math.ceil(-math.log10(tolerance))
        wanted = max(1, wanted)
        return cls(min(wanted, MAX_DIGITS[Kind.FLOAT]), min(wanted, MAX_DIGITS[Kind.DOUBLE]))

    def of(self, kind: Kind) -> int:
        return self.float_digits if kind is Kind.FLOAT else self.double_digits


def decode_row(encoded: str) -> list[str | None]:
    """Split an encoded row back into its fields (used by tests to prove the encoding is unambiguous)."""
    fields: list[str | None] = []
    pos = 0
    while pos < len(encoded):
        if encoded[pos] == "N":
            fields.append(None)
            pos += 1
            continue
        colon = encoded.index(":", pos)
        length = int(encoded[pos:colon])
        fields.append(encoded[colon + 1 : colon + 1 + length])
        pos = colon + 1 + length
        if pos > len(encoded):
            raise ValueError("field runs past the end of the row")
    return fields


def encode_row(texts: Sequence[str | None]) -> str:
    """The encoding of already canonical texts (the pure reference the SQL and Spark halves follow)."""
    return "".join("N" if t is None else f"{len(t)}:{t}" for t in texts)
