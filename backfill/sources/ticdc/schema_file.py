"""The storage sink's schema files, ``schema_<table-version>_<checksum>.json`` (TiCDC's TableDefinition).

tiflow ``pkg/sink/cloudstorage/table_definition.go`` and ticdc ``pkg/cloudstorage/schema_file.go``: one
file per table version (``<schema>/<table>/meta/``) and per database DDL (``<schema>/meta/``, no
columns). The checksum in the name is the CRC32-IEEE of Go's ``json.MarshalIndent(v, "", "    ")`` of
``{Table, Schema, Version: 0, TableColumns: sorted by ColumnName, TableColumnsTotal}`` (the query, type
and table version are left out); TiCDC's consumers refuse a file whose content does not match its name,
and so do we.

:meth:`TableDefinition.table_info` turns a table's definition into a TiDB TableInfo dict, so rows decode
to the same Delta types as kv-scan's. What a schema file does not say: column ids (numbered by position
unless ``ColumnId`` is written), collations (utf8mb4_bin), whether the primary key is clustered (a primary
key is taken as the handle: an integer one as ``pk_is_handle``, others as a clustered common handle),
partition definitions, and ENUM/SET element names in files written by tiflow (ticdc writes
``ColumnElems``).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backfill.codec import tableinfo
from tidelake.errors import InputError

SCHEMA_FILE = re.compile(r"^schema_(\d+)_(\d{10})\.json$")

# TiDB model.ActionType values a table version's schema file may carry (pkg/meta/model/job.go).
ACTION_CREATE_SCHEMA, ACTION_DROP_SCHEMA, ACTION_CREATE_TABLE, ACTION_DROP_TABLE = 1, 2, 3, 4
ACTION_ADD_COLUMN, ACTION_TRUNCATE_TABLE, ACTION_RENAME_TABLE, ACTION_RENAME_TABLES = 5, 11, 14, 47
ACTION_ADD_PARTITION, ACTION_DROP_PARTITION, ACTION_TRUNCATE_PARTITION = 19, 20, 23
ACTION_EXCHANGE_PARTITION, ACTION_REORGANIZE_PARTITION = 42, 64
ACTION_REMOVE_PARTITIONING, ACTION_ALTER_PARTITIONING = 72, 71
# Partition DDLs that take rows away: without the partition definitions (a schema file has none) their
# effect on the Delta table cannot be computed. (REORGANIZE PARTITION moves rows between partitions of
# one table: nothing to compute, its schema file is an ordinary barrier.)
ROW_REMOVING_PARTITION_DDL = frozenset(
    {ACTION_DROP_PARTITION, ACTION_TRUNCATE_PARTITION, ACTION_EXCHANGE_PARTITION}
)

_FIELD_ORDER = (
    ("ColumnId", "id"),
    ("ColumnName", "name"),
    ("ColumnType", "type"),
    ("ColumnDefault", "default"),
    ("ColumnPrecision", "precision"),
    ("ColumnScale", "scale"),
    ("ColumnNullable", "nullable"),
    ("ColumnIsPk", "is_pk"),
    ("ColumnElems", "elems"),
)
_OMIT_EMPTY = {"ColumnId", "ColumnDefault", "ColumnPrecision", "ColumnScale", "ColumnNullable", "ColumnIsPk"}
_NO_DEFAULT = object()
_INT_TYPES = {"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"}
_SIZED = {"VARCHAR", "CHAR", "VARBINARY", "BINARY", "BIT"}


def parse_schema_file_name(name: str) -> tuple[int, int] | None:
    """(table version, checksum) of ``schema_<version>_<checksum>.json``; None for any other name."""
    found = SCHEMA_FILE.match(name)
    return (int(found.group(1)), int(found.group(2))) if found else None


@dataclass(frozen=True)
class TableColumn:
    """One ``TableColumns`` entry, its string fields as written (empty: absent)."""

    name: str
    type: str
    id: str = ""
    default: Any = _NO_DEFAULT
    precision: str = ""
    scale: str = ""
    nullable: str = ""
    is_pk: str = ""
    elems: tuple[str, ...] = ()

    def go_fields(self) -> dict[str, Any]:
        """The fields Go marshals, in struct order (``omitempty`` ones left out when empty)."""
        out: dict[str, Any] = {}
        for key, attr in _FIELD_ORDER:
            value = getattr(self, attr)
            if key == "ColumnDefault":
                if value is _NO_DEFAULT or value is None:
                    continue
            elif key == "ColumnElems":
                if not value:
                    continue
                value = list(value)
            elif key in _OMIT_EMPTY and value == "":
                continue
            out[key] = value
        return out

    def sql_type(self) -> str:
        """The column type as ``tableinfo.field_type`` reads it, e.g. ``decimal(12,2)``, ``int unsigned``."""
        base = self.type.upper().removesuffix(" UNSIGNED").strip()
        unsigned = " unsigned" if self.type.upper().endswith(" UNSIGNED") else ""
        name = base.lower()
        if base in ("DECIMAL", "FLOAT", "DOUBLE") and self.precision:
            args = f"({self.precision},{self.scale or 0})"
        elif base in ("DATETIME", "TIMESTAMP", "TIME") and self.scale:
            args = f"({self.scale})"
        elif base in _SIZED or base in _INT_TYPES:
            args = f"({self.precision})" if self.precision else ""
            if base in ("VARCHAR", "VARBINARY") and not args:
                args = "(65535)"
        elif base in ("ENUM", "SET"):
            args = "(" + ",".join("'" + e.replace("'", "''") + "'" for e in self.elems) + ")"
        else:
            args = ""
        return f"{name}{args}{unsigned}"


@dataclass(frozen=True)
class TableDefinition:
    """A parsed schema file. ``columns`` empty for a database-level file."""

    table: str
    schema: str
    version: int
    table_version: int
    query: str
    type: int
    columns: tuple[TableColumn, ...]
    total_columns: int

    def checksum(self) -> int:
        """The checksum TiCDC puts in the file name."""
        payload = {
            "Table": self.table,
            "Schema": self.schema,
            "Version": 0,
            "TableColumns": [c.go_fields() for c in sorted(self.columns, key=lambda c: c.name)],
            "TableColumnsTotal": self.total_columns,
        }
        return zlib.crc32(go_marshal_indent(payload).encode("utf-8")) & 0xFFFFFFFF

    def table_info(self, table_id: int, column_ids: Mapping[str, int] | None = None) -> dict[str, Any]:
        """TiDB TableInfo JSON for ``TableSchema.from_table_info`` (see the module docstring). Column ids:
        ``ColumnId`` when the sink wrote it, else ``column_ids[name]``, else the position."""
        cols = []
        pk: list[str] = []
        for offset, column in enumerate(self.columns):
            col_id = int(column.id) if column.id else (column_ids or {}).get(column.name.lower(), offset + 1)
            default = None if column.default is _NO_DEFAULT else column.default
            if isinstance(default, int | float) and not isinstance(default, bool):
                default = str(default)
            info = tableinfo.column_info(
                col_id,
                column.name,
                column.sql_type(),
                offset=offset,
                not_null=column.nullable == "false",
                primary_key=column.is_pk == "true",
                default=default,
                origin_default=default,
            )
            if not column.elems and column.type.upper() in ("ENUM", "SET"):
                info["type"]["Elems"] = None
            cols.append(info)
            if column.is_pk == "true":
                pk.append(column.name)
        types = {c.name: c.type.upper().split(" ")[0] for c in self.columns}
        single_int = len(pk) == 1 and types[pk[0]] in _INT_TYPES
        key: str | list[str] | None = "int" if single_int else (pk or None)
        return tableinfo.table_info(table_id, self.table, cols, pk=key)


_RENAME_COLUMN = re.compile(
    r"(?:RENAME\s+COLUMN\s+`?((?:[^`\s]|``)+)`?\s+TO\s+`?((?:[^`\s]|``)+)`?)"
    r"|(?:CHANGE\s+(?:COLUMN\s+)?`?((?:[^`\s]|``)+)`?\s+`?((?:[^`\s]|``)+)`?)",
    re.IGNORECASE,
)


def renamed_columns(query: str) -> list[tuple[str, str]]:
    """(old, new) names of the columns an ALTER TABLE renames (RENAME COLUMN, CHANGE [COLUMN])."""
    out = []
    for found in _RENAME_COLUMN.finditer(query):
        old, new = (found.group(1), found.group(2)) if found.group(1) else (found.group(3), found.group(4))
        out.append((old.replace("``", "`"), new.replace("``", "`")))
    return out


def go_marshal_indent(value: Any) -> str:
    """``json.MarshalIndent(value, "", "    ")`` as Go writes it (HTML-safe escapes, UTF-8 kept)."""
    text = json.dumps(value, ensure_ascii=False, indent=4, separators=(",", ": "))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def parse_schema_file(text: str, where: str) -> TableDefinition:
    """A schema file's content; ``where`` (its path) names it in errors."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: schema file is not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise InputError(f"{where}: schema file is not a JSON object")
    try:
        columns = tuple(_column(c) for c in _typed(doc, "TableColumns", list, []))
        definition = TableDefinition(
            table=_typed(doc, "Table", str, ""),
            schema=_typed(doc, "Schema", str),
            version=_typed(doc, "Version", int, 0),
            table_version=_typed(doc, "TableVersion", int),
            query=_typed(doc, "Query", str, ""),
            type=_typed(doc, "Type", int, 0),
            columns=columns,
            total_columns=_typed(doc, "TableColumnsTotal", int, 0),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: schema file lacks or mistypes a field: {exc!r}") from None
    if definition.total_columns != len(definition.columns):
        raise InputError(
            f"{where}: TableColumnsTotal {definition.total_columns} but {len(definition.columns)} columns"
        )
    return definition


_REQUIRED: Any = object()


def _typed(doc: Mapping[str, Any], name: str, kind: type, default: Any = _REQUIRED) -> Any:
    """``doc[name]`` of Go's type for it (a null is Go's zero value): ``str``, ``list``, or ``int``
    (never a bool or a fraction, which Go's decoder refuses for an integer field)."""
    value = doc.get(name)
    if value is None:
        if default is _REQUIRED:
            raise KeyError(name)
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{name} is {value!r}, not {kind.__name__}")
    return value


def _column(doc: Any) -> TableColumn:
    if not isinstance(doc, Mapping):
        raise TypeError("a TableColumns entry is not an object")
    elems = doc.get("ColumnElems") or ()
    return TableColumn(
        name=_typed(doc, "ColumnName", str),
        type=_typed(doc, "ColumnType", str),
        id=str(doc.get("ColumnId") or ""),
        default=doc.get("ColumnDefault", _NO_DEFAULT),
        precision=str(doc.get("ColumnPrecision") or ""),
        scale=str(doc.get("ColumnScale") or ""),
        nullable=str(doc.get("ColumnNullable") or ""),
        is_pk=str(doc.get("ColumnIsPk") or ""),
        elems=tuple(str(e) for e in elems),
    )


def read_schema_file(text: str, name: str, where: str) -> TableDefinition:
    """Parse and verify a schema file: its name's table version and checksum must match its content."""
    parsed = parse_schema_file_name(name)
    if parsed is None:
        raise InputError(f"{where}: not a schema file name (schema_<version>_<10-digit checksum>.json)")
    version, checksum = parsed
    definition = parse_schema_file(text, where)
    if definition.table_version != version:
        raise InputError(
            f"{where}: TableVersion {definition.table_version} differs from the name's {version}"
        )
    actual = definition.checksum()
    if actual != checksum:
        raise InputError(
            f"{where}: checksum mismatch: the content hashes to {actual:010d}, the name says {checksum:010d}"
        )
    return definition


def schema_file_name(definition: TableDefinition) -> str:
    """The name TiCDC gives ``definition``'s file (for tests and tools that write a sink folder)."""
    return f"schema_{definition.table_version}_{definition.checksum():010d}.json"


def definition_json(definition: TableDefinition) -> str:
    """The file content TiCDC writes (``MarshalIndent`` of the whole definition)."""
    doc = {
        "Table": definition.table,
        "Schema": definition.schema,
        "Version": definition.version,
        "TableVersion": definition.table_version,
        "Query": definition.query,
        "Type": definition.type,
        "TableColumns": [c.go_fields() for c in definition.columns] if definition.columns else None,
        "TableColumnsTotal": definition.total_columns,
    }
    return go_marshal_indent(doc)


def columns_from_sql(columns: Sequence[tuple[str, str, Mapping[str, str]]]) -> tuple[TableColumn, ...]:
    """TableColumns from (name, ColumnType, other fields) triples — a short way to write test schemas."""
    return tuple(
        TableColumn(
            name=name,
            type=tp,
            precision=extra.get("precision", ""),
            scale=extra.get("scale", ""),
            nullable=extra.get("nullable", ""),
            is_pk=extra.get("is_pk", ""),
            elems=tuple(extra.get("elems", "").split(",")) if extra.get("elems") else (),
        )
        for name, tp, extra in columns
    )
