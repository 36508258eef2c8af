"""The canonical row encoding, as SQL for the upstream (TiDB, MySQL, MariaDB). Pure: builds strings.

Both sides hash the same bytes for the same row: this module writes the upstream half in SQL, and
`reconcile.sparkenc` writes the Delta half with Spark built-ins. The spec (tidelake row encoding 1):

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
import re
from collections.abc import Sequence
from dataclasses import dataclass

from reconcile.schema import Column, Kind

MAX_DIGITS = {Kind.FLOAT: 9, Kind.DOUBLE: 17}
EXACT_POWER = 22  # 10**22 is the largest power of ten a double holds exactly
_IDENT = re.compile(r"^[^`\x00]{1,64}$")


class Dialect(enum.Enum):
    MARIADB = "mariadb"
    MYSQL = "mysql"
    TIDB = "tidb"


class JsonMode(enum.Enum):
    """How JSON text is made canonical for the checksum (see the module docstring)."""

    NORMALIZED = "normalized"  # MariaDB's JSON_NORMALIZE form, which Spark reproduces
    AS_STORED = "as_stored"  # the server's own rendering against the Delta text as stored


def json_mode(dialect: Dialect) -> JsonMode:
    return JsonMode.NORMALIZED if dialect is Dialect.MARIADB else JsonMode.AS_STORED


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


def quote_ident(name: str) -> str:
    """Backtick-quote an identifier after checking it is one (no backtick, no NUL, 1..64 chars)."""
    if not _IDENT.match(name):
        raise ValueError(f"{name!r} is not a valid MySQL identifier")
    return f"`{name}`"


def quote_table(db: str, table: str) -> str:
    return f"{quote_ident(db)}.{quote_ident(table)}"


def sql_text(col: Column, dialect: Dialect, digits: FloatDigits) -> str:
    """SQL for the canonical text of one column's value (NULL stays NULL)."""
    q = quote_ident(col.name)
    kind = col.kind
    if kind in (Kind.INT, Kind.YEAR):
        return f"CAST({q} + 0 AS CHAR)" if kind is Kind.YEAR else f"CAST({q} AS CHAR)"
    if kind is Kind.DECIMAL:
        text = f"CAST({q} AS CHAR)"
        return f"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {text}))" if col.scale > 0 else text
    if kind in (Kind.FLOAT, Kind.DOUBLE):
        return _sql_float(q, digits.of(kind))
    if kind is Kind.TEXT:
        return f"CONVERT({q} USING utf8mb4)"
    if kind is Kind.JSON:
        if json_mode(dialect) is JsonMode.NORMALIZED:
            return f"COALESCE(JSON_NORMALIZE({q}), CONCAT('!', {q}))"
        return f"CAST({q} AS CHAR)"
    if kind is Kind.BINARY:
        return f"HEX({q})"
    if kind is Kind.BIT:
        return f"LPAD(HEX({q} + 0), {2 * col.byte_width}, '0')"
    if kind is Kind.DATE:
        return _zero_date_null(q, f"DATE_FORMAT({q}, '%Y-%m-%d')")
    if kind is Kind.DATETIME:
        return _zero_date_null(q, f"DATE_FORMAT({q}, '%Y-%m-%d %H:%i:%s.%f')")
    if kind is Kind.TIMESTAMP:
        return _zero_date_null(q, f"CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {q}) AS CHAR)")
    if kind is Kind.TIME:
        return (
            f"CONCAT(IF({q} < 0, '-', ''), HOUR({q}), ':', LPAD(MINUTE({q}), 2, '0'), ':', "
            f"LPAD(SECOND({q}), 2, '0'), '.', LPAD(MICROSECOND({q}), 6, '0'))"
        )
    raise AssertionError(f"no SQL encoding for {kind}")


def _zero_date_null(q: str, text: str) -> str:
    return f"CASE WHEN MONTH({q}) = 0 OR DAYOFMONTH({q}) = 0 THEN NULL ELSE {text} END"


def _sql_float(q: str, digits: int) -> str:
    x = f"CAST(FLOOR(LOG10(ABS({q}))) AS SIGNED)"
    k = f"({digits - 1} - {x})"
    k1 = f"GREATEST(-{EXACT_POWER}, LEAST({EXACT_POWER}, {k}))"
    k2 = f"GREATEST(-300, LEAST(300, {k} - {k1}))"
    k3 = f"({k} - {k1} - {k2})"
    scaled = q
    for step in (k1, k2, k3):  # multiply and divide by exact powers of ten only, as sparkenc does
        scaled = f"{scaled} * POW(10, GREATEST({step}, 0)) / POW(10, GREATEST(-{step}, 0))"
    # Most values need one exact power; MySQL does not share subexpressions, so that case is spelled
    # out alone (same result: the other steps multiply and divide by 1).
    scaled = (
        f"CASE WHEN {k} BETWEEN 0 AND {EXACT_POWER} THEN {q} * POW(10, {k}) "
        f"WHEN {k} BETWEEN -{EXACT_POWER} AND -1 THEN {q} / POW(10, -{k}) ELSE {scaled} END"
    )
    return f"CASE WHEN {q} = 0 THEN '0' ELSE CONCAT(CAST(ROUND({scaled}) AS SIGNED), 'e', {x}) END"


def sql_field(text: str) -> str:
    """One self-delimiting field: `N` for NULL, else `<code points>:<text>`."""
    return f"COALESCE(CONCAT(CHAR_LENGTH({text}), ':', {text}), 'N')"


def sql_row(columns: Sequence[Column], dialect: Dialect, digits: FloatDigits) -> str:
    fields = [sql_field(sql_text(c, dialect, digits)) for c in columns]
    return fields[0] if len(fields) == 1 else f"CONCAT({', '.join(fields)})"


def sql_hash(row: str) -> str:
    """The row hash: MD5's first 64 bits as an unsigned integer."""
    return f"CAST(CONV(SUBSTRING(MD5({row}), 1, 16), 16, 10) AS UNSIGNED)"


def sql_checksum(columns: Sequence[Column], dialect: Dialect, digits: FloatDigits) -> str:
    """The select list of a chunk checksum: row count and the exact sum of row hashes."""
    return f"COUNT(*), COALESCE(SUM({sql_hash(sql_row(columns, dialect, digits))}), 0)"


def sql_bucket(columns: Sequence[Column], dialect: Dialect, digits: FloatDigits, width: int) -> str:
    """The hash bucket of a row (or of its key): the first `width` hex digits of the MD5."""
    return f"SUBSTRING(MD5({sql_row(columns, dialect, digits)}), 1, {width})"


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
