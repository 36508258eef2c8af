"""TiCDC storage-sink schema files: the ``TableDefinition`` JSON, its checksum and its path.

Mirrors tiflow ``pkg/sink/cloudstorage/table_definition.go`` (ticdc ``pkg/sink/cloudstorage`` is the same):
a column is ``{ColumnId?, ColumnName, ColumnType, ColumnDefault?, ColumnPrecision?, ColumnScale?,
ColumnNullable?, ColumnIsPk?}`` (empty fields omitted); the file is ``json.MarshalIndent(def, "", "    ")``;
the checksum in the file name is CRC32-IEEE of the same marshalling of ``{Table, Schema, Version: 0,
TableColumns sorted by name, TableColumnsTotal}``. A database-level file has no table and
``TableColumns: null`` (``[]`` in the checksummed form, which copies the slice).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from backfill.codec import schema as S
from backfill.codec.schema import ColumnSchema, TableSchema
from tidbsim.ticdc_open import Float32, go_float, go_string

TABLE_DEFINITION_VERSION = 1
UNSPECIFIED = -1

# TiDB parser types.TypeToStr (type2Str), before the binary-charset rewrite.
TYPE_NAMES: Mapping[int, str] = {
    S.TP_BIT: "bit",
    S.TP_BLOB: "text",
    S.TP_DATE: "date",
    S.TP_DATETIME: "datetime",
    S.TP_NEWDECIMAL: "decimal",
    S.TP_DOUBLE: "double",
    S.TP_ENUM: "enum",
    S.TP_FLOAT: "float",
    S.TP_GEOMETRY: "geometry",
    S.TP_INT24: "mediumint",
    S.TP_JSON: "json",
    S.TP_LONG: "int",
    S.TP_LONGLONG: "bigint",
    S.TP_LONGBLOB: "longtext",
    S.TP_MEDIUMBLOB: "mediumtext",
    S.TP_NULL: "null",
    S.TP_SET: "set",
    S.TP_SHORT: "smallint",
    S.TP_STRING: "char",
    S.TP_DURATION: "time",
    S.TP_TIMESTAMP: "timestamp",
    S.TP_TINY: "tinyint",
    S.TP_TINYBLOB: "tinytext",
    S.TP_VARCHAR: "varchar",
    S.TP_VAR_STRING: "var_string",
    S.TP_YEAR: "year",
    S.TP_VECTOR: "vector",
}
_BLOB_TPS = frozenset({S.TP_TINYBLOB, S.TP_MEDIUMBLOB, S.TP_LONGBLOB, S.TP_BLOB})
_CHAR_TPS = frozenset({S.TP_STRING, S.TP_VARCHAR})

# TiDB mysql.GetDefaultFieldLengthAndDecimal
DEFAULT_FLEN_DECIMAL: Mapping[int, tuple[int, int]] = {
    S.TP_TINY: (4, 0),
    S.TP_SHORT: (6, 0),
    S.TP_LONG: (11, 0),
    S.TP_FLOAT: (12, UNSPECIFIED),
    S.TP_DOUBLE: (22, UNSPECIFIED),
    S.TP_TIMESTAMP: (19, 0),
    S.TP_LONGLONG: (20, 0),
    S.TP_INT24: (9, 0),
    S.TP_DATE: (10, 0),
    S.TP_DURATION: (10, 0),
    S.TP_DATETIME: (19, 0),
    S.TP_YEAR: (4, 0),
    S.TP_NEWDATE: (10, 0),
    S.TP_VARCHAR: (5, 0),
    S.TP_BIT: (1, 0),
    S.TP_JSON: (4294967295, 0),
    S.TP_NEWDECIMAL: (10, 0),
    S.TP_ENUM: (1, 0),
    S.TP_SET: (1, 0),
    S.TP_TINYBLOB: (255, 0),
    S.TP_MEDIUMBLOB: (16777215, 0),
    S.TP_LONGBLOB: (4294967295, 0),
    S.TP_BLOB: (65535, 0),
    S.TP_VAR_STRING: (5, 0),
    S.TP_STRING: (1, 0),
}
_PRECISION_ONLY = frozenset(
    {
        S.TP_TINY,
        S.TP_SHORT,
        S.TP_INT24,
        S.TP_LONG,
        S.TP_LONGLONG,
        S.TP_BIT,
        S.TP_VARCHAR,
        S.TP_STRING,
        S.TP_VAR_STRING,
        S.TP_BLOB,
        S.TP_TINYBLOB,
        S.TP_MEDIUMBLOB,
        S.TP_LONGBLOB,
        S.TP_YEAR,
    }
)


def type_to_str(tp: int, charset: str) -> str:
    """TiDB ``types.TypeToStr``: ``text`` types print as ``blob`` and ``char`` as ``binary`` in binary."""
    name = TYPE_NAMES.get(tp, "unspecified")
    if charset != "binary":
        return name
    if tp in _BLOB_TPS:
        return name.replace("text", "blob", 1)
    if tp in _CHAR_TPS:
        return name.replace("char", "binary", 1)
    return name


def table_column(col: ColumnSchema, *, output_column_id: bool = False, elems: bool = False) -> dict[str, Any]:
    """``TableCol.FromTiColumnInfo``: the column object in Go field order, empty fields left out.

    ``elems``: the new architecture's ``ColumnElems`` of ENUM/SET columns (ticdc ``schema_file.go``).
    """
    default_flen, default_dec = DEFAULT_FLEN_DECIMAL.get(col.tp, (UNSPECIFIED, UNSPECIFIED))
    dec = col.decimal
    decimal_not_default = dec != default_dec and dec != 0 and dec != UNSPECIFIED
    flen = default_flen if col.flen == UNSPECIFIED else col.flen
    shown_dec = default_dec if dec == UNSPECIFIED else dec
    out: dict[str, Any] = {}
    if output_column_id:
        out["ColumnId"] = str(col.id)
    out["ColumnName"] = col.name
    out["ColumnType"] = type_to_str(col.tp, col.charset).upper() + (" UNSIGNED" if col.unsigned else "")
    if col.default is not None:
        out["ColumnDefault"] = col.default
    if col.tp in (S.TP_TIMESTAMP, S.TP_DATETIME, S.TP_DURATION):
        if decimal_not_default:
            out["ColumnScale"] = str(shown_dec)
    elif col.tp in (S.TP_DOUBLE, S.TP_FLOAT):
        out["ColumnPrecision"] = str(flen)
        if decimal_not_default:
            out["ColumnScale"] = str(shown_dec)
    elif col.tp == S.TP_NEWDECIMAL:
        out["ColumnPrecision"] = str(flen)
        out["ColumnScale"] = str(shown_dec)
    elif col.tp in _PRECISION_ONLY:
        out["ColumnPrecision"] = str(flen)
    if not col.nullable:
        out["ColumnNullable"] = "false"
    if col.is_primary_key:
        out["ColumnIsPk"] = "true"
    if elems and col.tp in (S.TP_ENUM, S.TP_SET) and col.elems:
        out["ColumnElems"] = list(col.elems)
    # Go orders struct fields: Precision/Scale come after Default, Nullable/IsPk/Elems last.
    order = ("ColumnId", "ColumnName", "ColumnType", "ColumnDefault", "ColumnPrecision", "ColumnScale",
             "ColumnNullable", "ColumnIsPk", "ColumnElems")  # fmt: skip
    return {k: out[k] for k in order if k in out}


def table_definition(
    schema_name: str,
    table: TableSchema | None,
    *,
    table_version: int,
    query: str = "",
    action: int = 0,
    output_column_id: bool = False,
    elems: bool = False,
) -> dict[str, Any]:
    """The ``TableDefinition`` of a table version (or of a database when ``table`` is None)."""
    columns = (
        None
        if table is None
        else [table_column(c, output_column_id=output_column_id, elems=elems) for c in table.columns]
    )
    return {
        "Table": "" if table is None else table.name,
        "Schema": schema_name,
        "Version": TABLE_DEFINITION_VERSION,
        "TableVersion": table_version,
        "Query": query,
        "Type": action,
        "TableColumns": columns,
        "TableColumnsTotal": 0 if columns is None else len(columns),
    }


def checksum(definition: Mapping[str, Any]) -> int:
    """``TableDefinition.Sum32``: CRC32 of the definition without query, version 0, columns by name."""
    columns: Sequence[Mapping[str, Any]] = definition["TableColumns"] or []
    payload = {
        "Table": definition["Table"],
        "Schema": definition["Schema"],
        "Version": 0,
        "TableColumns": sorted(columns, key=lambda c: c["ColumnName"].encode("utf-8")),
        "TableColumnsTotal": definition["TableColumnsTotal"],
    }
    return zlib.crc32(go_marshal_indent(payload)) & 0xFFFFFFFF


def schema_file_path(definition: Mapping[str, Any]) -> str:
    """``<schema>/[<table>/]meta/schema_<table version>_<checksum, 10 digits>.json``."""
    name = f"schema_{definition['TableVersion']}_{checksum(definition):010d}.json"
    table = definition["Table"]
    prefix = f"{definition['Schema']}/{table}/meta" if table else f"{definition['Schema']}/meta"
    return f"{prefix}/{name}"


def go_marshal_indent(obj: Any, indent: str = "    ") -> bytes:
    """Go's ``json.MarshalIndent(obj, "", indent)`` for maps in insertion order (no trailing newline)."""
    out: list[str] = []
    _indent(out, obj, indent, 0)
    return "".join(out).encode("utf-8")


def _indent(out: list[str], obj: Any, indent: str, depth: int) -> None:
    if isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        out.append("{")
        for i, (k, v) in enumerate(obj.items()):
            out.append(("," if i else "") + "\n" + indent * (depth + 1) + go_string(k) + ": ")
            _indent(out, v, indent, depth + 1)
        out.append("\n" + indent * depth + "}")
    elif isinstance(obj, list):
        if not obj:
            out.append("[]")
            return
        out.append("[")
        for i, v in enumerate(obj):
            out.append(("," if i else "") + "\n" + indent * (depth + 1))
            _indent(out, v, indent, depth + 1)
        out.append("\n" + indent * depth + "]")
    elif obj is None:
        out.append("null")
    elif obj is True or obj is False:
        out.append("true" if obj else "false")
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, float):
        out.append(go_float(obj, 32 if isinstance(obj, Float32) else 64))
    elif isinstance(obj, str):
        out.append(go_string(obj))
    else:
        raise TypeError(f"cannot marshal {type(obj).__name__}")


__all__ = [
    "checksum",
    "go_marshal_indent",
    "schema_file_path",
    "table_column",
    "table_definition",
    "type_to_str",
]
