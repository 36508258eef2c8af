"""Table and column schemas built from TiDB ``TableInfo`` JSON (reference §4.1), with their Delta types.

A column's *kind* (``ColumnKind``) fixes everything the codec does with it: the stored form in row v2/v1,
the Python value (docs/architecture.md "Delta conventions") and the Arrow/Spark type. It is computed once
per column.
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from backfill.codec.errors import CodecError
from tidelake import typemap
from tidelake.conventions import ROWID
from tidelake.sqlident import quote_ident

# MySQL type codes (FieldType.Tp)
TP_TINY, TP_SHORT, TP_LONG, TP_FLOAT, TP_DOUBLE, TP_NULL, TP_TIMESTAMP = 1, 2, 3, 4, 5, 6, 7
TP_LONGLONG, TP_INT24, TP_DATE, TP_DURATION, TP_DATETIME, TP_YEAR, TP_NEWDATE = 8, 9, 10, 11, 12, 13, 14
TP_VARCHAR, TP_BIT, TP_VECTOR, TP_JSON, TP_NEWDECIMAL, TP_ENUM, TP_SET = 15, 16, 225, 245, 246, 247, 248
TP_TINYBLOB, TP_MEDIUMBLOB, TP_LONGBLOB, TP_BLOB, TP_VAR_STRING, TP_STRING, TP_GEOMETRY = (
    249,
    250,
    251,
    252,
    253,
    254,
    255,
)
STRING_TPS = frozenset(
    {TP_VARCHAR, TP_TINYBLOB, TP_MEDIUMBLOB, TP_LONGBLOB, TP_BLOB, TP_VAR_STRING, TP_STRING}
)

# MySQL flag bits (FieldType.Flag)
FLAG_NOT_NULL, FLAG_PRI_KEY, FLAG_UNSIGNED = 1, 2, 32

# SchemaState
STATE_PUBLIC = 5

ROWID_NAME = ROWID  # the Delta column of the handle, as TiDB names it
ROWID_COLUMN_ID = -1  # model.ExtraHandleID


class ColumnKind(enum.Enum):
    """What a column holds, as far as encoding and the Delta type go."""

    INT = "int"  # signed integers, YEAR excluded
    UINT = "uint"  # TINY..INT UNSIGNED: a Python int, a wider Delta int
    UINT64 = "uint64"  # BIGINT UNSIGNED: decimal.Decimal, DECIMAL(20,0)
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    DECIMAL = "decimal"  # p <= 38: decimal.Decimal
    DECIMAL_STR = "decimal_str"  # p > 38: str
    TEXT = "text"
    BINARY = "binary"
    ENUM = "enum"
    SET = "set"
    BIT = "bit"
    JSON = "json"
    DATE = "date"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"
    TIME = "time"
    YEAR = "year"
    VECTOR = "vector"  # TiDB VECTOR(FLOAT32): printed as TiDB does, '[1,2.5]'


# Kinds whose stored form is an unsigned integer (row v2 compact uint, v1 uvarint).
UNSIGNED_STORED = frozenset(
    {
        ColumnKind.UINT,
        ColumnKind.UINT64,
        ColumnKind.ENUM,
        ColumnKind.SET,
        ColumnKind.BIT,
        ColumnKind.DATE,
        ColumnKind.DATETIME,
        ColumnKind.TIMESTAMP,
    }
)
TIME_KINDS = frozenset({ColumnKind.DATE, ColumnKind.DATETIME, ColumnKind.TIMESTAMP})

# The MySQL base type of each type code the codec decodes; its Delta type comes from tidelake.typemap.
BASE_TYPES = {
    TP_TINY: "tinyint", TP_SHORT: "smallint", TP_INT24: "mediumint", TP_LONG: "int", TP_LONGLONG: "bigint",
    TP_FLOAT: "float", TP_DOUBLE: "double", TP_NEWDECIMAL: "decimal",
    TP_VARCHAR: "varchar", TP_VAR_STRING: "varchar", TP_STRING: "char", TP_TINYBLOB: "tinytext",
    TP_BLOB: "text", TP_MEDIUMBLOB: "mediumtext", TP_LONGBLOB: "longtext",
    TP_ENUM: "enum", TP_SET: "set", TP_JSON: "json", TP_BIT: "bit", TP_DATE: "date", TP_NEWDATE: "date",
    TP_DATETIME: "datetime", TP_TIMESTAMP: "timestamp", TP_DURATION: "time", TP_YEAR: "year",
    TP_VECTOR: "vector",
}  # fmt: skip
_KINDS = {
    "float": ColumnKind.FLOAT32, "double": ColumnKind.FLOAT64, "enum": ColumnKind.ENUM,
    "set": ColumnKind.SET, "json": ColumnKind.JSON, "bit": ColumnKind.BIT, "date": ColumnKind.DATE,
    "datetime": ColumnKind.DATETIME, "timestamp": ColumnKind.TIMESTAMP, "time": ColumnKind.TIME,
    "year": ColumnKind.YEAR, "vector": ColumnKind.VECTOR,
}  # fmt: skip


def _kind_and_types(
    tp: int, flag: int, flen: int, dec: int, charset: str
) -> tuple[ColumnKind, str, pa.DataType]:
    base = BASE_TYPES.get(tp)
    if base is None:
        raise CodecError(f"unsupported column type code {tp}")
    unsigned = bool(flag & FLAG_UNSIGNED)
    prec, scale = (flen if flen > 0 else 10), max(dec, 0)
    binary = tp in STRING_TPS and charset == "binary"
    delta = typemap.delta_type(base, unsigned=unsigned, precision=prec, scale=scale, binary_charset=binary)
    if base in typemap.INTEGERS:
        kind = ColumnKind.INT if not unsigned else ColumnKind.UINT64 if tp == TP_LONGLONG else ColumnKind.UINT
    elif base == "decimal":
        kind = ColumnKind.DECIMAL if delta != "string" else ColumnKind.DECIMAL_STR
    elif tp in STRING_TPS:
        kind = ColumnKind.BINARY if binary else ColumnKind.TEXT
    else:
        kind = _KINDS[base]
    return kind, delta.upper(), typemap.arrow_type(delta)


def _cistr(v: Any) -> str:
    """TiDB CIStr ``{"O": original, "L": lower}`` or a plain string."""
    if isinstance(v, Mapping):
        return str(v.get("O", v.get("o", "")))
    return "" if v is None else str(v)


@dataclass(frozen=True, eq=False)
class ColumnSchema:
    """One column of a TiDB table, with its codec kind and Delta types."""

    id: int
    name: str
    offset: int
    tp: int
    flag: int
    flen: int
    decimal: int
    charset: str
    collate: str
    elems: tuple[str, ...]
    origin_default: Any = None
    origin_default_bit: bytes | None = None
    default: Any = None
    version: int = 0
    state: int = STATE_PUBLIC
    hidden: bool = False
    generated_expr: str = ""
    generated_stored: bool = False
    kind: ColumnKind = field(init=False)
    spark_type: str = field(init=False)
    arrow_type: pa.DataType = field(init=False)

    def __post_init__(self) -> None:
        kind, spark, arrow = _kind_and_types(self.tp, self.flag, self.flen, self.decimal, self.charset)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "spark_type", spark)
        object.__setattr__(self, "arrow_type", arrow)

    @property
    def nullable(self) -> bool:
        return not self.flag & FLAG_NOT_NULL

    @property
    def unsigned(self) -> bool:
        return bool(self.flag & FLAG_UNSIGNED)

    @property
    def is_primary_key(self) -> bool:
        return bool(self.flag & FLAG_PRI_KEY)

    @property
    def is_virtual(self) -> bool:
        """Virtual generated columns are never stored and TiCDC does not emit them."""
        return bool(self.generated_expr) and not self.generated_stored

    @property
    def fsp(self) -> int:
        return min(max(self.decimal, 0), 6)

    @property
    def decimal_precision(self) -> tuple[int, int]:
        return (self.flen if self.flen > 0 else 10), max(self.decimal, 0)

    @classmethod
    def from_column_info(cls, info: Mapping[str, Any]) -> ColumnSchema:
        ft = info.get("type") or {}
        bit = info.get("origin_default_bit")
        return cls(
            id=int(info["id"]),
            name=_cistr(info.get("name")),
            offset=int(info.get("offset", 0)),
            tp=int(ft.get("Tp", 0)),
            flag=int(ft.get("Flag", 0)),
            flen=int(ft.get("Flen", -1)),
            decimal=int(ft.get("Decimal", -1)),
            charset=str(ft.get("Charset") or ""),
            collate=str(ft.get("Collate") or ""),
            elems=tuple(ft.get("Elems") or ()),
            origin_default=info.get("origin_default"),
            origin_default_bit=base64.b64decode(bit) if bit else None,
            default=info.get("default"),
            version=int(info.get("version", 0)),
            state=int(info.get("state", STATE_PUBLIC)),
            hidden=bool(info.get("hidden", False)),
            generated_expr=str(info.get("generated_expr_string") or ""),
            generated_stored=bool(info.get("generated_stored", False)),
        )


@dataclass(frozen=True, eq=False)
class TableSchema:
    """The CDC-visible shape of one TiDB table version: public, visible, stored columns in order.

    ``pk_kind``: ``"int"`` (the handle is a single integer PK column, not stored in the value),
    ``"common"`` (clustered non-int PK; the key holds the PK datums) or ``"rowid"`` (no clustered PK; the
    handle is ``_tidb_rowid``, which our Delta tables carry as a leading BIGINT column).
    """

    table_id: int
    name: str
    columns: tuple[ColumnSchema, ...]
    pk_kind: str
    pk_columns: tuple[str, ...]
    physical_ids: tuple[int, ...]
    handle_column: ColumnSchema | None = None
    common_handle: tuple[tuple[ColumnSchema, int], ...] = ()  # (column, prefix length or -1)
    schema_name: str | None = None
    partition_names: Mapping[int, str] = field(default_factory=dict)
    table_info: Mapping[str, Any] = field(default_factory=dict, repr=False)
    all_columns: tuple[ColumnSchema, ...] = ()  # every column in cols (any state), for the encoder
    by_id: Mapping[int, ColumnSchema] = field(init=False, repr=False)
    by_name: Mapping[str, ColumnSchema] = field(init=False, repr=False)
    all_by_id: Mapping[int, ColumnSchema] = field(init=False, repr=False)
    arrow_schema: pa.Schema = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_id", {c.id: c for c in self.columns})
        object.__setattr__(self, "by_name", {c.name: c for c in self.columns})
        object.__setattr__(self, "all_by_id", {c.id: c for c in (*self.all_columns, *self.columns)})
        fields = [pa.field(ROWID_NAME, pa.int64(), nullable=False)] if self.pk_kind == "rowid" else []
        fields += [pa.field(c.name, c.arrow_type, nullable=self._arrow_nullable(c)) for c in self.columns]
        object.__setattr__(self, "arrow_schema", pa.schema(fields))

    def _arrow_nullable(self, col: ColumnSchema) -> bool:
        # Zero dates decode to NULL even in NOT NULL columns, so temporal columns are always nullable.
        return col.nullable or col.kind in TIME_KINDS

    @property
    def output_names(self) -> tuple[str, ...]:
        """Names of the decoded row, in order (``_tidb_rowid`` first for rowid tables)."""
        return tuple(f.name for f in self.arrow_schema)

    @property
    def spark_ddl(self) -> str:
        """Column list as Spark DDL, e.g. ```id` BIGINT NOT NULL, `name` STRING``."""
        return ", ".join(
            f"{quote_ident(f.name)} {self._spark_type(f.name)}{'' if f.nullable else ' NOT NULL'}"
            for f in self.arrow_schema
        )

    def _spark_type(self, name: str) -> str:
        return "BIGINT" if name == ROWID_NAME and self.pk_kind == "rowid" else self.by_name[name].spark_type

    @classmethod
    def from_table_info(cls, table_info: Mapping[str, Any], *, schema_name: str | None = None) -> TableSchema:
        """Build from TiDB TableInfo JSON (a dict as ``json.loads`` gives it)."""
        try:
            table_id = int(table_info["id"])
            if not isinstance(table_info.get("cols"), list):
                raise KeyError("cols")
            all_cols = [ColumnSchema.from_column_info(c) for c in table_info["cols"]]
        except KeyError as e:
            raise CodecError(f"bad TableInfo: no {e.args[0]!r} field") from e
        except (TypeError, ValueError) as e:
            raise CodecError(f"bad TableInfo: {e}") from e
        visible = [c for c in all_cols if c.state == STATE_PUBLIC and not c.hidden and not c.is_virtual]
        visible.sort(key=lambda c: c.offset)
        by_offset = {c.offset: c for c in all_cols}
        handle_column = None
        common: list[tuple[ColumnSchema, int]] = []
        pk_columns: tuple[str, ...]
        if table_info.get("pk_is_handle"):
            handle_column = next((c for c in visible if c.is_primary_key), None)
            if handle_column is None or handle_column.kind not in (
                ColumnKind.INT,
                ColumnKind.UINT,
                ColumnKind.UINT64,
            ):
                raise CodecError("pk_is_handle table without an integer PRI_KEY column", table_id=table_id)
            pk_kind, pk_columns = "int", (handle_column.name,)
        elif table_info.get("is_common_handle"):
            primary = next((ix for ix in table_info.get("index_info") or () if ix.get("is_primary")), None)
            if primary is None:
                raise CodecError("common-handle table without a primary index", table_id=table_id)
            for ic in primary.get("idx_cols") or ():
                col = by_offset.get(int(ic.get("offset", -1)))
                if col is None:
                    raise CodecError(f"primary index column {ic!r} not in cols", table_id=table_id)
                common.append((col, int(ic.get("length", -1))))
            pk_kind, pk_columns = "common", tuple(c.name for c, _ in common)
        else:
            pk_kind, pk_columns = "rowid", (ROWID_NAME,)
        part = table_info.get("partition") or {}
        partition_names: dict[int, str] = {}
        if part and part.get("enable", True) and part.get("definitions"):
            for d in part["definitions"]:
                partition_names[int(d["id"])] = _cistr(d.get("name"))
            physical_ids = tuple(partition_names)
        else:
            physical_ids = (table_id,)
        return cls(
            table_id=table_id,
            name=_cistr(table_info.get("name")),
            columns=tuple(visible),
            pk_kind=pk_kind,
            pk_columns=pk_columns,
            physical_ids=physical_ids,
            handle_column=handle_column,
            common_handle=tuple(common),
            schema_name=schema_name,
            partition_names=partition_names,
            table_info=table_info,
            all_columns=tuple(all_cols),
        )

    def column_ids(self) -> Sequence[int]:
        return [c.id for c in self.columns]
