"""The one TiDB/MySQL → Delta type map (docs/architecture.md "Delta conventions").

backfill's codec (the Delta tables it creates, the Arrow batches it decodes) and reconcile (the Delta type
it expects of an upstream column, the canonical encoding it picks) both ask this module, so a type can
never map one way on one side and another way on the other. Types are Spark ``simpleString`` names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

# (signed, unsigned): UNSIGNED widens one step; MEDIUMINT is an INT, so MEDIUMINT UNSIGNED a BIGINT.
INTEGERS: dict[str, tuple[str, str]] = {
    "tinyint": ("tinyint", "smallint"),
    "smallint": ("smallint", "int"),
    "mediumint": ("int", "bigint"),
    "int": ("int", "bigint"),
    "bigint": ("bigint", "decimal(20,0)"),
}
TEXTS = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
BINARIES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_FIXED = {
    "float": "float",
    "double": "double",
    "enum": "string",  # the member's name
    "set": "string",  # as MySQL prints it, `a,b`
    "json": "string",  # canonical JSON text
    "bit": "binary",  # big-endian, (n+7)/8 bytes
    "date": "date",
    "datetime": "timestamp_ntz",
    "timestamp": "timestamp",  # a UTC instant
    "time": "string",  # [-]HHH:MM:SS[.ffffff]
    "year": "smallint",
    "vector": "string",  # as TiDB prints it, [1,2.5]
}
MAX_DECIMAL_PRECISION = 38  # Spark's; wider DECIMALs are kept as their exact text


def delta_type(base: str, *, unsigned: bool = False, precision: int = 10, scale: int = 0,
               binary_charset: bool = False) -> str:  # fmt: skip
    """The Delta type of a column of MySQL base type `base` (lower case: `int`, `varchar`, `decimal`, ...).

    `binary_charset`: a CHAR/VARCHAR/TEXT column with the binary character set holds bytes.
    """
    if base in INTEGERS:
        return INTEGERS[base][1 if unsigned else 0]
    if base == "decimal":
        return f"decimal({precision},{scale})" if precision <= MAX_DECIMAL_PRECISION else "string"
    if base in TEXTS:
        return "binary" if binary_charset else "string"
    if base in BINARIES:
        return "binary"
    if base in _FIXED:
        return _FIXED[base]
    raise ValueError(f"no Delta type for the MySQL type {base!r}")


def arrow_type(delta: str) -> pa.DataType:
    """The Arrow type Spark reads and writes for a Delta type (TIMESTAMP: microseconds in UTC)."""
    import pyarrow as pa

    simple = {
        "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
        "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "binary": pa.binary(),
        "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    }  # fmt: skip
    if delta in simple:
        return simple[delta]
    if delta.startswith("decimal("):
        precision, scale = (int(p) for p in delta[8:-1].split(","))
        return pa.decimal128(precision, scale)
    raise ValueError(f"no Arrow type for {delta}")
