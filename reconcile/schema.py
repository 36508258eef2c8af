"""Upstream column types, their Delta types (docs/architecture.md "Delta conventions"), and the check
that both sides agree.

One `Column` describes an upstream column as far as reconcile cares: its kind (which canonical encoding
applies), its Delta type, and what key ordering it has. Both the information_schema reader and the
Dumpling `CREATE TABLE` parser produce columns through `column_from_type`, so a type string means the
same thing wherever it comes from.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from reconcile.errors import SchemaMismatch
from tidelake.conventions import COMMIT_TS as TIDB_COMMIT_TS
from tidelake.conventions import ROWID as TIDB_ROWID
from tidelake.typemap import BINARIES, INTEGERS, TEXTS, delta_type

DELTA_ONLY_COLUMNS = frozenset({TIDB_COMMIT_TS, TIDB_ROWID})


class Kind(enum.Enum):
    """What a column holds: decides its canonical encoding and its Delta type."""

    INT = "int"
    FLOAT = "float"
    DOUBLE = "double"
    DECIMAL = "decimal"  # p <= 38: Delta DECIMAL(p,s); p > 38: Delta STRING
    TEXT = "text"  # CHAR, VARCHAR, TEXT, ENUM, SET
    JSON = "json"
    BINARY = "binary"
    BIT = "bit"
    DATE = "date"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"
    TIME = "time"
    YEAR = "year"


# Kinds whose ordering is the same in MySQL and Spark, so their values can bound key ranges.
RANGE_KEY_KINDS = frozenset(
    {Kind.INT, Kind.DECIMAL, Kind.TEXT, Kind.BINARY, Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP, Kind.YEAR}
)

_TYPE = re.compile(r"^\s*([a-z]+)\s*(?:\(([^)]*)\))?(.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Column:
    """An upstream column and the Delta column it maps to."""

    name: str
    kind: Kind
    delta_type: str  # Spark `simpleString()` of the expected Delta type
    sql_type: str  # the upstream type as written, for messages
    nullable: bool = True
    precision: int = 0  # DECIMAL precision
    scale: int = 0  # DECIMAL scale
    fsp: int = 0  # fractional seconds of TIME/DATETIME/TIMESTAMP
    bits: int = 0  # BIT width
    binary_collation: bool = True  # TEXT: compares bytewise upstream (a *_bin collation)

    @property
    def byte_width(self) -> int:
        """Bytes of a BIT(n) value in Delta: (n+7)/8, big-endian."""
        return (max(self.bits, 1) + 7) // 8


@dataclass(frozen=True)
class TableSchema:
    """An upstream table: its columns in ordinal order and its primary key (empty when it has none)."""

    db: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}"

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name.lower() == name.lower():
                return col
        raise KeyError(name)

    @property
    def key_columns(self) -> tuple[Column, ...]:
        return tuple(self.column(k) for k in self.primary_key)

    def without(self, ignored: Iterable[str]) -> TableSchema:
        """The schema minus ignored columns and TiDB's hidden row id (never its key columns)."""
        drop = {n.lower() for n in ignored} | {TIDB_ROWID}
        keys = {k.lower() for k in self.primary_key}
        kept = tuple(c for c in self.columns if c.name.lower() not in drop or c.name.lower() in keys)
        return TableSchema(self.db, self.table, kept, self.primary_key)


class _ColumnCommon(TypedDict):
    sql_type: str
    nullable: bool


def column_from_type(
    name: str, type_text: str, *, nullable: bool = True, json_text: bool = False, collation: str | None = None
) -> Column:
    """Build a column from a MySQL type string such as `int(10) unsigned`, `decimal(12,2)`, `bit(5)`.

    `json_text` marks a MariaDB LONGTEXT that is really JSON (it carries a `json_valid` check).
    """
    match = _TYPE.match(type_text)
    if not match:
        raise SchemaMismatch(f"column {name!r}: cannot read its type {type_text!r}")
    base, args, rest = match.group(1).lower(), match.group(2) or "", match.group(3).lower()
    numbers = [int(a) for a in re.findall(r"\d+", args)] if base not in ("enum", "set") else []
    unsigned = "unsigned" in rest
    binary_charset = "character set binary" in rest or "charset binary" in rest
    common = _ColumnCommon(sql_type=type_text.strip(), nullable=nullable)
    base = {
        "integer": "int",
        "real": "double",
        "numeric": "decimal",
        "dec": "decimal",
        "fixed": "decimal",
    }.get(base, base)
    if base in INTEGERS:
        return Column(name, Kind.INT, delta_type(base, unsigned=unsigned), **common)
    if base in ("float", "double"):
        # FLOAT(p) with p > 24 is a DOUBLE; FLOAT(M,D) stays a FLOAT.
        is_float = base == "float" and (len(numbers) != 1 or numbers[0] <= 24)
        base = "float" if is_float else "double"
        return Column(name, Kind.FLOAT if is_float else Kind.DOUBLE, delta_type(base), **common)
    if base == "decimal":
        precision = numbers[0] if numbers else 10
        scale = numbers[1] if len(numbers) > 1 else 0
        spark = delta_type(base, precision=precision, scale=scale)
        return Column(name, Kind.DECIMAL, spark, precision=precision, scale=scale, **common)
    texts = TEXTS | {"enum", "set", "vector"}  # TiDB prints a VECTOR as text, '[1,2.5]'.
    if base == "json" or (json_text and base in texts):
        return Column(name, Kind.JSON, delta_type("json"), **common)
    if base in texts and not binary_charset:
        binary = collation is None or collation.lower().endswith("_bin") or collation.lower() == "binary"
        return Column(name, Kind.TEXT, delta_type(base), binary_collation=binary, **common)
    if base in BINARIES or base in texts:
        return Column(name, Kind.BINARY, delta_type("binary"), **common)
    simple = {"bit": Kind.BIT, "date": Kind.DATE, "datetime": Kind.DATETIME, "timestamp": Kind.TIMESTAMP,
              "time": Kind.TIME, "year": Kind.YEAR}  # fmt: skip
    if base in simple:
        width = numbers[0] if numbers else (1 if base == "bit" else 0)
        bits = width if base == "bit" else 0
        fsp = width if base in ("datetime", "timestamp", "time") else 0
        return Column(name, simple[base], delta_type(base), bits=bits, fsp=fsp, **common)
    raise SchemaMismatch(f"column {name!r}: type {type_text!r} is not supported by reconcile")


@dataclass(frozen=True)
class Comparison:
    """The columns both sides are compared on, in upstream order, and how the table is keyed."""

    schema: TableSchema
    columns: tuple[Column, ...]

    @property
    def key(self) -> tuple[Column, ...]:
        return self.schema.key_columns

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.key)

    @property
    def value_columns(self) -> tuple[Column, ...]:
        keys = {k.lower() for k in self.schema.primary_key}
        return tuple(c for c in self.columns if c.name.lower() not in keys)

    @property
    def range_keyed(self) -> bool:
        """True when key ranges mean the same thing on both sides (see RANGE_KEY_KINDS)."""
        return bool(self.key) and all(c.kind in RANGE_KEY_KINDS for c in self.key)


def compare_schemas(
    upstream: TableSchema, delta_types: Mapping[str, str], ignored: Sequence[str] = ()
) -> Comparison:
    """Check that the Delta table has each upstream column with its mapped type, and nothing else.

    Raises SchemaMismatch naming every disagreement. `delta_types` maps Delta column names to Spark
    `simpleString()` types; `_tidb_commit_ts` and `_tidb_rowid` are Delta-only and never compared.
    """
    schema = upstream.without(ignored)
    ignored_lower = {n.lower() for n in ignored}
    delta = {name.lower(): (name, kind) for name, kind in delta_types.items()}
    problems = []
    for col in schema.columns:
        found = delta.get(col.name.lower())
        if found is None:
            problems.append(f"column {col.name!r} ({col.sql_type}) is missing from the Delta table")
        elif not _compatible(col, found[1]):
            problems.append(
                f"column {col.name!r} is {col.sql_type} upstream, which maps to Delta {col.delta_type.upper()}, "
                f"but the Delta column is {found[1].upper()}"
            )
    upstream_names = {c.name.lower() for c in upstream.columns}
    for lower, (name, _kind) in sorted(delta.items()):
        if lower in DELTA_ONLY_COLUMNS or lower in ignored_lower or lower in upstream_names:
            continue
        problems.append(f"Delta column {name!r} does not exist upstream")
    if problems:
        raise SchemaMismatch(f"{upstream.name}: schema mismatch: " + "; ".join(problems))
    return Comparison(schema, schema.columns)


def _compatible(col: Column, delta_type: str) -> bool:
    return delta_type.lower().replace(" ", "") == col.delta_type


_SPARK_KINDS = {
    "tinyint": Kind.INT,
    "smallint": Kind.INT,
    "int": Kind.INT,
    "bigint": Kind.INT,
    "float": Kind.FLOAT,
    "double": Kind.DOUBLE,
    "string": Kind.TEXT,
    "binary": Kind.BINARY,
    "date": Kind.DATE,
    "timestamp_ntz": Kind.DATETIME,
    "timestamp": Kind.TIMESTAMP,
}


def column_from_spark(name: str, spark_type: str, nullable: bool = True) -> Column:
    """A column known only by its Delta (Spark) type, as in a Parquet export or the expected state.

    Strings stay TEXT (a JSON or TIME text is compared as stored: both sides were written alike).
    """
    if spark_type.startswith("decimal("):
        precision, scale = (int(p) for p in spark_type[8:-1].split(","))
        return Column(name, Kind.DECIMAL, spark_type, spark_type.upper(), nullable, precision, scale)
    kind = _SPARK_KINDS.get(spark_type)
    if kind is None:
        raise SchemaMismatch(f"column {name!r}: Spark type {spark_type} is not supported by reconcile")
    return Column(name, kind, spark_type, spark_type.upper(), nullable)
