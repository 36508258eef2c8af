"""Simulated tables: column definitions, table versions (one per schema state) and their TableInfo JSON.

A :class:`TableVersion` is immutable. Online DDL produces a chain of them: intermediate versions whose
non-public columns tell a writer which column ids a row must carry (reference §3.5), and a final, done
version that a consumer decodes with. ``uid`` names the upstream table in the model across rename and
truncate (TiDB itself gives a truncated table a new id).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

from backfill.codec import TableSchema
from tidbsim import coltypes as ct
from tidbsim.coltypes import SqlType
from tidelake.conventions import ROWID
from tidelake.sqlident import quote_ident, quote_qualified

# SchemaState
NONE, DELETE_ONLY, WRITE_ONLY, WRITE_REORG, DELETE_REORG, PUBLIC, REPLICA_ONLY = 0, 1, 2, 3, 4, 5, 6
WRITABLE = frozenset({WRITE_ONLY, WRITE_REORG, PUBLIC})

NO_DEFAULT = object()
"""Marks a column declared without DEFAULT (distinct from DEFAULT NULL)."""


def cistr(name: str) -> dict[str, str]:
    return {"O": name, "L": name.lower()}


@dataclass(frozen=True)
class ColumnDef:
    """One column of one table version.

    ``role`` says what a writer puts in a non-public column: ``adding`` (ADD COLUMN: its origin default),
    ``dropping`` (DROP COLUMN in write-only: the row's current value) or ``changing`` (the hidden
    ``_Col$_`` column of a reorganising MODIFY COLUMN: ``source_id``'s value converted).
    """

    id: int
    name: str
    type: SqlType
    nullable: bool = True
    default: Any = NO_DEFAULT
    pk: bool = False
    state: int = PUBLIC
    role: str = ""
    source_id: int = 0
    dependency_offset: int | None = None

    @property
    def default_value(self) -> Any:
        return None if self.default is NO_DEFAULT else self.default

    def flag(self) -> int:
        f = 0
        if not self.nullable:
            f |= ct.NOT_NULL
        if self.pk:
            f |= ct.PRI_KEY
        if self.default is NO_DEFAULT and not self.nullable and not self.pk:
            f |= ct.NO_DEFAULT
        return f

    def column_info(self, offset: int) -> dict[str, Any]:
        default = ct.default_text(self.type, self.default_value)
        return {
            "id": self.id,
            "name": cistr(self.name),
            "offset": offset,
            "origin_default": default,
            "origin_default_bit": None,
            "default": default,
            "default_bit": None,
            "default_is_expr": False,
            "generated_expr_string": "",
            "generated_stored": False,
            "dependences": None,
            "type": self.type.field_type(self.flag()),
            "state": self.state,
            "comment": "",
            "hidden": False,
            "change_state_info": (
                None if self.dependency_offset is None else {"relative_col_offset": self.dependency_offset}
            ),
            "version": 2,
        }

    def sql(self) -> str:
        """Column definition for CREATE/ALTER TABLE (MySQL/MariaDB/TiDB syntax)."""
        parts = [quote_ident(self.name), self.type.column_sql(), "NULL" if self.nullable else "NOT NULL"]
        if self.default is not NO_DEFAULT:
            parts.append(f"DEFAULT {ct.sql_literal(self.type, self.default)}")
        return " ".join(parts)


@dataclass(frozen=True)
class PartitionDef:
    id: int
    name: str
    less_than: int


@dataclass(frozen=True)
class Partitioning:
    """RANGE partitioning on one integer column (no MAXVALUE, so ADD PARTITION can extend it)."""

    column: str
    defs: tuple[PartitionDef, ...]
    adding: tuple[PartitionDef, ...] = ()
    dropping: tuple[PartitionDef, ...] = ()
    ddl_state: int = 0  # the schema state of a REORGANIZE PARTITION in progress (TiDB's DDLState)

    def lower_bound(self, d: PartitionDef) -> int:
        prev = [p.less_than for p in self.defs if p.less_than < d.less_than]
        return max(prev) if prev else 0

    def info(self) -> dict[str, Any]:
        def one(d: PartitionDef) -> dict[str, Any]:
            return {
                "id": d.id,
                "name": cistr(d.name),
                "less_than": [str(d.less_than)],
                "in_values": None,
                "policy_ref_info": None,
            }

        return {
            "type": 1,
            "expr": f"`{self.column}`",
            "columns": None,
            "enable": True,
            "is_empty_columns": False,
            "definitions": [one(d) for d in self.defs],
            "adding_definitions": [one(d) for d in self.adding],
            "dropping_definitions": [one(d) for d in self.dropping],
            "NewPartitionIDs": None,
            "states": None,
            "num": len(self.defs),
            "ddl_state": self.ddl_state,
            "new_table_id": 0,
            "ddl_type": 0,
            "ddl_expr": "",
            "ddl_columns": None,
            "ddl_update_indexes": None,
        }

    def sql(self) -> str:
        parts = ", ".join(
            f"PARTITION {quote_ident(d.name)} VALUES LESS THAN ({d.less_than})" for d in self.defs
        )
        return f"PARTITION BY RANGE ({quote_ident(self.column)}) ({parts})"


@dataclass(frozen=True, eq=False)
class TableVersion:
    """One schema state of one table. Columns are in ``cols`` order: public ones first, by position."""

    uid: int
    db: str
    table_id: int
    name: str
    columns: tuple[ColumnDef, ...]
    pk_kind: str  # "int" | "common" | "rowid"
    partition: Partitioning | None = None
    max_col_id: int = 0
    update_ts: int = 0
    revision: int = 1
    template: str = field(default="", compare=False)

    # ------------------------------------------------------------ shape

    @cached_property
    def public(self) -> tuple[ColumnDef, ...]:
        return tuple(c for c in self.columns if c.state == PUBLIC)

    @cached_property
    def pk_columns(self) -> tuple[ColumnDef, ...]:
        return tuple(c for c in self.columns if c.pk)

    @cached_property
    def physical_ids(self) -> tuple[int, ...]:
        return tuple(d.id for d in self.partition.defs) if self.partition else (self.table_id,)

    @property
    def qualified(self) -> str:
        return quote_qualified(self.db, self.name)

    def column(self, name: str) -> ColumnDef:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def by_id(self, cid: int) -> ColumnDef | None:
        for c in self.columns:
            if c.id == cid:
                return c
        return None

    # ------------------------------------------------------------ TiDB metadata

    def table_info(self) -> dict[str, Any]:
        """TiDB ``TableInfo`` JSON (model.TableInfo field names)."""
        return self._table_info

    @cached_property
    def _table_info(self) -> dict[str, Any]:
        cols = [c.column_info(i) for i, c in enumerate(self.columns)]
        offsets = {c.name: i for i, c in enumerate(self.columns)}
        indices = []
        if self.pk_kind == "common":
            indices.append(
                {
                    "id": 1,
                    "idx_name": cistr("PRIMARY"),
                    "tbl_name": cistr(""),
                    "idx_cols": [
                        {"name": cistr(c.name), "offset": offsets[c.name], "length": -1}
                        for c in self.pk_columns
                    ],
                    "state": PUBLIC,
                    "backfill_state": 0,
                    "comment": "",
                    "index_type": 1,
                    "is_unique": True,
                    "is_primary": True,
                    "is_invisible": False,
                    "is_global": False,
                    "mv_index": False,
                }
            )
        return {
            "id": self.table_id,
            "name": cistr(self.name),
            "charset": "utf8mb4",
            "collate": "utf8mb4_bin",
            "cols": cols,
            "index_info": indices,
            "constraint_info": None,
            "fk_info": None,
            "state": PUBLIC,
            "pk_is_handle": self.pk_kind == "int",
            "is_common_handle": self.pk_kind == "common",
            "common_handle_version": 1 if self.pk_kind == "common" else 0,
            "comment": "",
            "auto_inc_id": 0,
            "auto_id_cache": 0,
            "auto_rand_id": 0,
            "max_col_id": self.max_col_id,
            "max_idx_id": 1 if indices else 0,
            "max_fk_id": 0,
            "max_cst_id": 0,
            "update_timestamp": self.update_ts,
            "ShardRowIDBits": 0,
            "max_shard_row_id_bits": 0,
            "auto_random_bits": 0,
            "auto_random_range_bits": 0,
            "pre_split_regions": 0,
            "partition": self.partition.info() if self.partition else None,
            "compression": "",
            "view": None,
            "sequence": None,
            "Lock": None,
            "version": 5,
            "tiflash_replica": None,
            "is_columnar": False,
            "temp_table_type": 0,
            "cache_table_status": 0,
            "policy_ref_info": None,
            "stats_options": None,
            "exchange_partition_info": None,
            "ttl_info": None,
            "revision": self.revision,
        }

    @cached_property
    def schema(self) -> TableSchema:
        """The codec's view of this version: encoder (all columns) and decoder (public ones)."""
        return TableSchema.from_table_info(self._table_info, schema_name=self.db)

    def create_sql(self, *, mysql: bool = False) -> str:
        """CREATE TABLE text. For MariaDB a rowid table gets an INVISIBLE `_tidb_rowid` primary key, so the
        downstream row identity matches TiDB's hidden handle (and ``SELECT *`` still hides it)."""
        defs = [c.sql() for c in self.public]
        if self.pk_kind == "rowid" and mysql:
            defs.insert(0, f"{quote_ident(ROWID)} BIGINT NOT NULL DEFAULT 0 INVISIBLE")
            defs.append(f"PRIMARY KEY ({quote_ident(ROWID)})")
        elif self.pk_kind != "rowid":
            cols = ", ".join(quote_ident(c.name) for c in self.pk_columns)
            clustered = "" if mysql else " /*T![clustered_index] CLUSTERED */"
            defs.append(f"PRIMARY KEY ({cols}){clustered}")
        text = f"CREATE TABLE {self.qualified} ({', '.join(defs)})"
        if self.partition:
            text += " " + self.partition.sql()
        return text


# ---------------------------------------------------------------- templates


@dataclass(frozen=True)
class Template:
    """The shape of an initial (or created) table: columns as (name, type, nullable, default, pk)."""

    key: str
    db: str
    name: str
    pk_kind: str
    columns: tuple[tuple[str, SqlType, bool, Any, bool], ...]
    partitions: int = 0


def _c(
    name: str, t: SqlType, nullable: bool = True, default: Any = NO_DEFAULT, pk: bool = False
) -> tuple[str, SqlType, bool, Any, bool]:
    return (name, t, nullable, default, pk)


TEMPLATES: tuple[Template, ...] = (
    Template(
        "orders",
        "shop",
        "orders",
        "int",
        (
            _c("id", ct.BIGINT, False, pk=True),
            _c("c_tiny", ct.TINYINT),
            _c("c_tiny_u", ct.TINYINT_U),
            _c("c_small", ct.SMALLINT),
            _c("c_small_u", ct.SMALLINT_U, False, 0),
            _c("c_medium", ct.MEDIUMINT),
            _c("c_medium_u", ct.MEDIUMINT_U),
            _c("qty", ct.INT, False, 1),
            _c("c_int_u", ct.INT_U),
            _c("c_big", ct.BIGINT),
            _c("c_big_u", ct.BIGINT_U),
            _c("c_float", ct.FLOAT),
            _c("c_double", ct.DOUBLE),
            _c("amount", ct.decimal(12, 3)),
            _c("c_wide_dec", ct.decimal(50, 10)),
            _c("title", ct.varchar(64), False, ""),
            _c("code", ct.char(8)),
            _c("body", ct.TEXT),
            _c("status", ct.enum("new", "paid", "shipped", "cancelled"), False, "new"),
            _c("flags", ct.set_of("gift", "rush", "fragile", "promo")),
            _c("meta", ct.JSON),
        ),
    ),
    Template(
        "items",
        "shop",
        "items",
        "common",
        (
            _c("sku", ct.varchar(32), False, pk=True),
            _c("seq", ct.INT, False, pk=True),
            _c("price", ct.decimal(10, 2), False, Decimal("0.00")),
            _c("c_bin", ct.binary(4)),
            _c("c_varbin", ct.varbinary(16)),
            _c("c_blob", ct.BLOB),
            _c("c_bit", ct.bit(10)),
            _c("c_date", ct.DATE),
            _c("c_dt", ct.datetime(3)),
            _c("c_ts", ct.timestamp(6)),
            _c("c_time", ct.time(2)),
            _c("c_year", ct.YEAR),
            _c("note", ct.varchar(32)),
        ),
    ),
    Template(
        "events",
        "ops",
        "events",
        "rowid",
        (
            _c("kind", ct.varchar(16), False, "info"),
            _c("level", ct.SMALLINT),
            _c("payload", ct.JSON),
            _c("at", ct.datetime(0)),
            _c("ip", ct.varbinary(16)),
            _c("score", ct.DOUBLE),
            _c("c_ts", ct.timestamp(0)),
            _c("day", ct.DATE),
            _c("tag", ct.enum("a", "b", "c")),
        ),
    ),
    Template(
        "metrics",
        "ops",
        "metrics",
        "int",
        (
            _c("id", ct.BIGINT, False, pk=True),
            _c("val", ct.INT),
            _c("ratio", ct.decimal(8, 4)),
            _c("label", ct.varchar(32)),
            _c("at", ct.timestamp(3)),
            _c("day", ct.DATE),
            _c("dur", ct.time(0)),
            _c("flag", ct.bit(1)),
        ),
        partitions=3,
    ),
)


def named_by_text(version: TableVersion) -> bool:
    """A table keyed by one clustered string column (the collation tables)."""
    pk = version.pk_columns
    return version.pk_kind == "common" and len(pk) == 1 and pk[0].type.is_text


def collation_template(collate: str) -> Template:
    """A table with a clustered VARCHAR primary key under `collate` (a `_ci` collation: its record keys hold
    sort keys, so 'abc' and 'ABC' are one row); `SimulationConfig.collation_tables` adds one per collation."""
    short = collate.removeprefix("utf8mb4_")
    return Template(
        f"names_{short}",
        "shop",
        f"names_{short}",
        "common",
        (
            _c("name", ct.varchar(24, collate), False, pk=True),
            _c("qty", ct.INT),
            _c("note", ct.varchar(32)),
            _c("at", ct.datetime(0)),
        ),
    )


def build_table(
    template: Template, *, uid: int, name: str, ids: Sequence[int], partition_width: int, update_ts: int
) -> TableVersion:
    """A fresh table from a template: ``ids`` = table id, then one id per partition."""
    cols = tuple(
        ColumnDef(i + 1, n, t, nullable=nullable and not pk, default=default, pk=pk)
        for i, (n, t, nullable, default, pk) in enumerate(template.columns)
    )
    partition = None
    if template.partitions:
        defs = tuple(
            PartitionDef(ids[1 + i], f"p{i}", (i + 1) * partition_width) for i in range(template.partitions)
        )
        partition = Partitioning("id", defs)
    return TableVersion(
        uid=uid,
        db=template.db,
        table_id=ids[0],
        name=name,
        columns=cols,
        pk_kind=template.pk_kind,
        partition=partition,
        max_col_id=len(cols),
        update_ts=update_ts,
        template=template.key,
    )


# ---------------------------------------------------------------- DDL menus

ADD_COLUMN_MENU: tuple[tuple[SqlType, Any], ...] = (
    (ct.INT, 7),
    (ct.varchar(32), "fresh"),
    (ct.decimal(8, 2), Decimal("1.50")),
    (ct.datetime(0), dt.datetime(2020, 1, 2, 3, 4, 5)),
    (ct.enum("lo", "hi"), "hi"),
)


def modification(t: SqlType) -> tuple[SqlType, bool] | None:
    """The MODIFY COLUMN the simulator applies to a column of type ``t``: (new type, needs reorg).

    Integer and VARCHAR widening only change metadata in TiDB (same column id); a DECIMAL scale change
    rewrites the data through a hidden changing column with a new id.
    """
    if t.sql == "INT":
        return ct.BIGINT, False
    if t.sql == "SMALLINT":
        return ct.INT, False
    if t.gen == "text" and t.tp == 15 and t.flen < 128:
        return ct.varchar(128, t.collate), False
    if t.gen == "decimal" and t.flen + 4 <= 38:
        return ct.decimal(t.flen + 4, t.decimal + 2), True
    return None
