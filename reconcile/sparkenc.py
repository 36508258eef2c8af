"""The canonical row encoding (spec in `reconcile.encoding`) as Spark Columns, built-in functions only.

Each function takes and returns a `Column`, so the same expressions serve the chunk checksums of the
Delta table and the row diff of both sides. JSON is made canonical from the parsed document: Spark's
VARIANT sorts object keys and drops whitespace (`to_json(parse_json(text))`), and its numbers are then
rewritten token by token into MariaDB's `JSON_NORMALIZE` form, `d.dddE±x` by decimal value, leaving
string tokens untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from reconcile.encoding import EXACT_POWER, FloatDigits, JsonMode
from reconcile.schema import Column as Col
from reconcile.schema import Kind
from tidelake.sqlident import column, quote_ident

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Compact JSON as tokens: a string, a number, or a run of anything else (structure and literals).
_JSON_TOKENS = r'("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|[^"0-9-]+|-)'
_TIME = r"^(-?)([0-9]+):([0-9]{1,2}):([0-9]{1,2})(?:\.([0-9]{0,6}))?$"


def helper(col: Col, value: Column, json_mode: JsonMode) -> Column | None:
    """The costly part of a column's text, to compute once in an earlier projection (see `encode`):
    the decimal exponent of a FLOAT/DOUBLE, the compact form of a JSON document."""
    from pyspark.sql import functions as F

    if col.kind in (Kind.FLOAT, Kind.DOUBLE):
        return F.floor(F.log10(F.abs(value.cast("double"))))
    if col.kind is Kind.JSON and json_mode is JsonMode.NORMALIZED:
        return F.to_json(F.try_parse_json(value))
    return None


def text(
    col: Col, value: Column, json_mode: JsonMode, digits: FloatDigits, pre: Column | None = None
) -> Column:
    """The canonical text of one Delta column's value (NULL stays NULL); `pre` is its `helper`."""
    from pyspark.sql import functions as F

    kind = col.kind
    if kind in (Kind.INT, Kind.YEAR):
        return value.cast("string")
    if kind is Kind.DECIMAL:
        raw = value.cast("string")
        return F.when(raw.contains("."), F.regexp_replace(raw, r"\.?0+$", "")).otherwise(raw)
    if kind in (Kind.FLOAT, Kind.DOUBLE):
        return float_text(value.cast("double"), digits.of(kind), pre)
    if kind is Kind.TEXT:
        return value
    if kind is Kind.JSON:
        return json_normal_form(value, pre) if json_mode is JsonMode.NORMALIZED else value
    if kind in (Kind.BINARY, Kind.BIT):
        return F.hex(value)
    if kind is Kind.DATE:
        return F.date_format(value, "yyyy-MM-dd")
    if kind is Kind.DATETIME:
        return F.date_format(value, "yyyy-MM-dd HH:mm:ss.SSSSSS")
    if kind is Kind.TIMESTAMP:
        return F.unix_micros(value).cast("string")
    if kind is Kind.TIME:
        return time_text(value)
    raise AssertionError(f"no Spark encoding for {kind}")


def float_text(value: Column, digits: int, exponent: Column | None = None) -> Column:
    """`0`, or `<m>e<x>`: the value rounded half-even to `digits` significant digits (see encoding).

    `rint` rounds half-even on the double itself, as MySQL's ROUND(double) does (`bround` would go
    through a decimal string, and is ten times slower).
    """
    from pyspark.sql import functions as F

    x = F.floor(F.log10(F.abs(value))) if exponent is None else exponent
    k = F.lit(digits - 1) - x
    k1 = F.greatest(F.lit(-EXACT_POWER), F.least(F.lit(EXACT_POWER), k))
    k2 = F.greatest(F.lit(-300), F.least(F.lit(300), k - k1))
    scaled = value
    for step in (k1, k2, k - k1 - k2):  # the order and the powers the SQL half uses
        scaled = (
            scaled
            * F.pow(F.lit(10.0), F.greatest(step, F.lit(0)))
            / F.pow(F.lit(10.0), F.greatest(-step, F.lit(0)))
        )
    mantissa = F.rint(scaled).cast("long")  # finite: |m| < 10**17; zero, NaN, inf never get here
    return (
        F.when(F.isnan(value), F.lit("NaN"))
        .when(value == float("inf"), F.lit("Inf"))
        .when(value == float("-inf"), F.lit("-Inf"))
        .when(value == 0, F.lit("0"))
        .otherwise(F.concat(mantissa.cast("string"), F.lit("e"), x.cast("string")))
    )


def time_text(value: Column) -> Column:
    """`[-]H:MM:SS.ffffff` from the Delta TIME text `[-]HH:MM:SS[.fff]`; anything else as `!` + text."""
    from pyspark.sql import functions as F

    def part(i: int) -> Column:
        return F.regexp_extract(value, _TIME, i)

    canonical = F.concat(
        part(1),
        part(2).cast("long").cast("string"),
        F.lit(":"),
        F.lpad(part(3), 2, "0"),
        F.lit(":"),
        F.lpad(part(4), 2, "0"),
        F.lit("."),
        F.rpad(part(5), 6, "0"),
    )
    return F.when(value.rlike(_TIME), canonical).otherwise(F.concat(F.lit("!"), value))


def json_normal_form(value: Column, compact: Column | None = None) -> Column:
    """MariaDB's `JSON_NORMALIZE` text of a JSON document, or `!` + the text if it does not parse."""
    from pyspark.sql import functions as F

    if compact is None:
        compact = F.to_json(F.try_parse_json(value))
    tokens = F.regexp_extract_all(compact, F.lit(_JSON_TOKENS), 1)
    rewritten = F.transform(tokens, lambda tok: F.when(tok.rlike("^-?[0-9]"), scientific(tok)).otherwise(tok))
    return F.when(compact.isNull() & value.isNotNull(), F.concat(F.lit("!"), value)).otherwise(
        F.array_join(rewritten, "")
    )


def scientific(number: Column) -> Column:
    """A JSON number token as `d.dddE±x` by decimal value (`2.50` -> `2.5E0`, `-0.0` -> `0.0E0`)."""
    from pyspark.sql import functions as F

    negative = number.startswith("-")
    body = F.regexp_replace(number, "^-", "")
    int_part = F.regexp_extract(body, r"^([0-9]*)", 1)
    frac_part = F.regexp_extract(body, r"^[0-9]*\.([0-9]*)", 1)
    exponent = F.regexp_extract(body, r"[eE]([+-]?[0-9]+)$", 1)
    exp_value = F.when(exponent == "", F.lit(0)).otherwise(exponent.cast("int"))
    digits = F.concat(int_part, frac_part)
    stripped = F.regexp_replace(digits, "^0+", "")
    leading_zeros = F.length(digits) - F.length(stripped)
    power = F.length(int_part) - 1 - leading_zeros + exp_value
    significant = F.regexp_replace(stripped, "0+$", "")
    rest = F.when(F.length(significant) > 1, F.substring(significant, 2, 1 << 30)).otherwise(F.lit("0"))
    return F.when(significant == "", F.lit("0.0E0")).otherwise(
        F.concat(
            F.when(negative, F.lit("-")).otherwise(F.lit("")),
            F.substring(significant, 1, 1),
            F.lit("."),
            rest,
            F.lit("E"),
            power.cast("string"),
        )
    )


def field(canonical: Column) -> Column:
    """One self-delimiting field: `N` for NULL, else `<code points>:<text>`."""
    from pyspark.sql import functions as F

    return F.coalesce(F.concat(F.length(canonical).cast("string"), F.lit(":"), canonical), F.lit("N"))


def row(columns: Sequence[Col], json_mode: JsonMode, digits: FloatDigits, prefix: str = "") -> Column:
    """The encoded row of `columns` in one expression (for small data; `encode` stages it)."""
    from pyspark.sql import functions as F

    return F.concat(*[field(text(c, column(prefix + c.name), json_mode, digits)) for c in columns])


def encode(
    df: DataFrame, columns: Sequence[Col], json_mode: JsonMode, digits: FloatDigits
) -> tuple[DataFrame, list[str]]:
    """Add each column's canonical text as a column `_t<i>`; return the frame and those names.

    Staged in projections so that nothing costly is computed twice per row: Spark does not share
    subexpressions inside CASE branches, and a text is used twice by its field (length and value).
    One big expression would also outgrow the JIT's method size limit and run interpreted.
    """
    from pyspark.sql import functions as F

    values = [column(c.name) for c in columns]  # each Column is a JVM round trip: made once
    helpers = {}
    for i, c in enumerate(columns):
        pre = helper(c, values[i], json_mode)
        if pre is not None:
            helpers[f"_p{i}"] = pre
    staged = df.withColumns(helpers) if helpers else df
    names = [f"_t{i}" for i in range(len(columns))]
    texts = {
        names[i]: text(c, values[i], json_mode, digits, F.col(f"_p{i}") if f"_p{i}" in helpers else None)
        for i, c in enumerate(columns)
    }
    return staged.withColumns(texts).drop(*helpers), names


def fields(names: Sequence[str]) -> Column:
    """The encoded row from text columns made by `encode` (`field` of each, concatenated).

    Written as one SQL expression: built from `functions` it costs eight JVM round trips per column."""
    from pyspark.sql import functions as F

    return F.expr(_fields_sql(names))


def _fields_sql(names: Sequence[str]) -> str:
    one = "coalesce(concat(cast(length({0}) AS STRING), ':', {0}), 'N')"
    return "concat(" + ", ".join(one.format(quote_ident(n)) for n in names) + ")"


def hash_halves(digest: str) -> tuple[Column, Column]:
    """The row hash (the MD5 hex digest's first 64 bits of the column `digest`) as two 32-bit halves in
    BIGINTs: their sums stay exact and cheap (no DECIMAL arithmetic); the checksum is
    `sum(high) * 2**32 + sum(low)`."""
    from pyspark.sql import functions as F

    half = "CAST(conv(substring({0}, {1}, 8), 16, 10) AS BIGINT)"
    return F.expr(half.format(quote_ident(digest), 1)), F.expr(half.format(quote_ident(digest), 9))


def bucket(names: Sequence[str], width: int) -> Column:
    """A hash bucket: the first `width` hex digits of the MD5 of the encoded text columns `names`."""
    from pyspark.sql import functions as F

    return F.expr(f"substring(md5({_fields_sql(names)}), 1, {int(width)})")
