"""A Dumpling export (`--filetype csv`) as reconcile's upstream (the layout: `tidelake/dumpling.py`).

CSV with Dumpling's defaults: a header row of quoted column names in every file, `,` between fields,
strings, dates and binary enclosed in `"`, numbers bare, NULL as a bare `\\N`, and inside enclosed
fields backslash escapes for `\\`, `"`, NUL (`\\0`), CR (`\\r`) and LF (`\\n`); lines end in `\\r\\n`.
TIMESTAMP values are UTC (Dumpling dumps with `time_zone = '+00:00'`). Parsing is Spark built-ins
only: lines are split into fields with one regular expression and unescaped without a UDF. Binary
values that are not valid UTF-8 do not survive a text read: export them with a hex CSV dialect.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from reconcile.schema import Column, Kind, TableSchema, column_from_type
from tidelake.dumpling import DumpMetadata, data_files, parse_metadata
from tidelake.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession

_FIELD = r'(?:^|,)("(?:[^"\\]|\\.)*"|[^,]*)'


def parse_create_table(sql: str, db: str, where: str) -> TableSchema:
    """Columns and primary key of a Dumpling `CREATE TABLE` file."""
    match = re.search(r"CREATE TABLE\s+`((?:[^`]|``)+)`\s*\((.*)\)[^)]*$", sql, re.DOTALL | re.IGNORECASE)
    if not match:
        raise InputError(f"{where}: no CREATE TABLE statement")
    table = match.group(1).replace("``", "`")
    columns: list[Column] = []
    key: tuple[str, ...] = ()
    for line in _definitions(match.group(2)):
        if line.startswith("`"):
            name_end = _identifier_end(line)
            name = line[1:name_end].replace("``", "`")
            rest = line[name_end + 1 :].strip()
            type_text = _type_text(rest)
            columns.append(
                column_from_type(
                    name,
                    type_text,
                    nullable="NOT NULL" not in rest.upper(),
                    json_text=bool(re.search(r"CHECK\s*\(\s*json_valid", rest, re.IGNORECASE)),
                    collation=_collation(rest),
                )
            )
        elif re.match(r"PRIMARY\s+KEY", line, re.IGNORECASE):
            inside = line[line.index("(") + 1 : line.index(")")]
            key = tuple(n.replace("``", "`") for n in re.findall(r"`((?:[^`]|``)+)`", inside))
    if not columns:
        raise InputError(f"{where}: CREATE TABLE {table} has no columns")
    return TableSchema(db, table, tuple(columns), key)


def _definitions(body: str) -> list[str]:
    """Split a CREATE TABLE body at top-level commas (not inside parentheses or quotes)."""
    parts, depth, quote, current = [], 0, "", []
    for ch in body:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'`\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _identifier_end(line: str) -> int:
    i = 1
    while i < len(line):
        if line[i] == "`":
            if i + 1 < len(line) and line[i + 1] == "`":
                i += 2
                continue
            return i
        i += 1
    raise InputError(f"unterminated identifier in {line!r}")


def _type_text(rest: str) -> str:
    """The type part of a column definition: name, (args) and UNSIGNED/ZEROFILL, charset if binary."""
    match = re.match(
        r"([a-zA-Z]+)\s*(\((?:[^()'\"]|'(?:[^']|'')*')*\))?((?:\s+(?:unsigned|zerofill|signed))*)", rest
    )
    if not match:
        raise InputError(f"cannot read the column type in {rest!r}")
    text = match.group(0)
    charset = re.search(r"CHARACTER SET\s+(\w+)", rest, re.IGNORECASE)
    if charset and charset.group(1).lower() == "binary":
        text += " CHARACTER SET binary"
    return text


def _collation(rest: str) -> str | None:
    match = re.search(r"COLLATE\s+(\w+)", rest, re.IGNORECASE)
    return match.group(1) if match else None


def header_line(columns: Sequence[Column]) -> str:
    return ",".join('"' + c.name.replace("\\", "\\\\").replace('"', '\\"') + '"' for c in columns)


def read_csv(spark: SparkSession, paths: Sequence[str], schema: TableSchema) -> DataFrame:
    """The table's rows, typed as the Delta table's columns."""
    from pyspark.sql import functions as F

    lines = spark.read.text(list(paths)).where(F.col("value") != F.lit(header_line(schema.columns)))
    lines = lines.where(F.col("value") != F.lit(""))
    fields = F.regexp_extract_all(F.col("value"), F.lit(_FIELD), 1)
    split = lines.select(fields.alias("f"))
    return split.select(
        *[typed(c, _field_value(F.get(F.col("f"), i))).alias(c.name) for i, c in enumerate(schema.columns)]
    )


def _field_value(raw: SparkColumn) -> SparkColumn:
    """NULL for a bare `\\N`, the unescaped body of an enclosed field, a bare field as is."""
    from pyspark.sql import functions as F

    body = F.substring(raw, 2, F.length(raw) - 2)
    enclosed = raw.startswith('"') & raw.endswith('"') & (F.length(raw) >= 2)
    return F.when(raw == F.lit("\\N"), F.lit(None)).when(enclosed, unescape(body)).otherwise(raw)


def unescape(text: SparkColumn) -> SparkColumn:
    """Undo Dumpling's backslash escapes: split at `\\\\` first, so `\\\\n` stays a backslash + n."""
    from pyspark.sql import functions as F

    pieces = F.split(text, r"\\\\")
    plain = F.transform(
        pieces,
        lambda p: F.regexp_replace(
            F.regexp_replace(
                F.regexp_replace(F.regexp_replace(p, r"\\n", "\n"), r"\\r", "\r"), r"\\0", "\u0000"
            ),
            r"\\(.)",
            "$1",
        ),
    )
    return F.array_join(plain, "\\")


def typed(col: Column, text: SparkColumn) -> SparkColumn:
    """A field's text as the column's Delta value; dates Spark cannot hold (zero dates) become NULL."""
    from pyspark.sql import functions as F

    kind = col.kind
    if kind is Kind.TIMESTAMP:
        return F.concat(text, F.lit("Z")).try_cast("timestamp")
    if kind in (Kind.BINARY, Kind.BIT):
        return text.cast("binary")
    if kind in (Kind.TEXT, Kind.JSON, Kind.TIME) or col.delta_type == "string":
        return text
    return text.try_cast(col.delta_type)


__all__ = ["DumpMetadata", "data_files", "parse_create_table", "parse_metadata", "read_csv"]
