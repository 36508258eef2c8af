"""The MySQL family's SQL (the `mysql` dialect, which `mariadb` and `tidb` refine). Pure: builds strings.

The canonical text of each kind follows the spec in `reconcile.encoding`; `reconcile.sparkenc` is the
Delta half of the same bytes. Statements are built for pymysql's `%s` parameters, so every literal
`%` inside SQL text (DATE_FORMAT's `%Y`) is doubled once where a statement is assembled.

Snapshots: each connection opens `START TRANSACTION WITH CONSISTENT SNAPSHOT` (repeatable read); the
upstream reader may hold `LOCK TABLES <table> READ` on another connection meanwhile, so all snapshots
see one committed state. MySQL has no ts to read at.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

from reconcile.chunks import KeyRange
from reconcile.encoding import EXACT_POWER, FloatDigits, JsonMode
from reconcile.schema import Column, Kind, TableSchema
from reconcile.upstream.sqltext import Query, lexicographic_predicate
from tidelake.sqlident import quote_upstream_ident

SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys", "metrics_schema")

D = TypeVar("D", bound="type[MySQL]")
REGISTRY: dict[
    str, type[MySQL]
] = {}  # every dialect by name, in registration order (`reconcile.upstream.dialect`)


def register(cls: D) -> D:
    """Class decorator: make a dialect known by its `name` (later registrations are more specific)."""
    REGISTRY[cls.name] = cls
    return cls


@register
class MySQL:
    """MySQL 8 (and the base of every MySQL-protocol dialect)."""

    name: ClassVar[str] = "mysql"
    placeholder: ClassVar[str] = "%s"
    reads_at_ts: ClassVar[bool] = False  # every read at one ts (TiDB), else consistent snapshots

    def __init__(self, version: str = "") -> None:
        self.version = version

    @classmethod
    def claims(cls, version: str) -> bool:
        return True  # the fallback for any MySQL-protocol server

    @property
    def json_mode(self) -> JsonMode:
        """How JSON is made canonical: the server's own `CAST(j AS CHAR)` against the Delta text."""
        return JsonMode.AS_STORED

    # -- identifiers

    def quote(self, name: str) -> str:
        return quote_upstream_ident(name)

    def table(self, db: str, table: str) -> str:
        return f"{self.quote(db)}.{self.quote(table)}"

    # -- the canonical encoding (spec: reconcile.encoding)

    def text(self, col: Column, digits: FloatDigits) -> str:
        """SQL for the canonical text of one column's value (NULL stays NULL)."""
        q = self.quote(col.name)
        kind = col.kind
        if kind in (Kind.INT, Kind.YEAR):
            return f"CAST({q} + 0 AS CHAR)" if kind is Kind.YEAR else f"CAST({q} AS CHAR)"
        if kind is Kind.DECIMAL:
            text = f"CAST({q} AS CHAR)"
            return f"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {text}))" if col.scale > 0 else text
        if kind in (Kind.FLOAT, Kind.DOUBLE):
            return _float_text(q, digits.of(kind))
        if kind is Kind.TEXT:
            return f"CONVERT({q} USING utf8mb4)"
        if kind is Kind.JSON:
            return self.json_text(q)
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

    def json_text(self, quoted: str) -> str:
        return f"CAST({quoted} AS CHAR)"

    def field(self, text: str) -> str:
        """One self-delimiting field: `N` for NULL, else `<code points>:<text>`."""
        return f"COALESCE(CONCAT(CHAR_LENGTH({text}), ':', {text}), 'N')"

    def row(self, columns: Sequence[Column], digits: FloatDigits) -> str:
        fields = [self.field(self.text(c, digits)) for c in columns]
        return fields[0] if len(fields) == 1 else f"CONCAT({', '.join(fields)})"

    def row_hash(self, row: str) -> str:
        """The row hash: MD5's first 64 bits as an unsigned integer."""
        return f"CAST(CONV(SUBSTRING(MD5({row}), 1, 16), 16, 10) AS UNSIGNED)"

    def checksum(self, columns: Sequence[Column], digits: FloatDigits) -> str:
        """The select list of a chunk checksum: row count and the exact sum of row hashes."""
        return f"COUNT(*), COALESCE(SUM({self.row_hash(self.row(columns, digits))}), 0)"

    def bucket(self, columns: Sequence[Column], digits: FloatDigits, width: int) -> str:
        """The hash bucket of a row (or of its key): the first `width` hex digits of the MD5."""
        return f"SUBSTRING(MD5({self.row(columns, digits)}), 1, {width})"

    # -- keys and reads

    def key_expr(self, col: Column) -> str:
        """A key column as ranges compare it: bytewise for text, so the server and Spark agree.

        A `_ci` key is compared as its UTF-8 bytes (a binary string: NO PAD), not under utf8mb4_bin, which
        pads with spaces ('ab' sorts after 'ab\t' there, before it in Spark). A `*_bin` key is left as it
        is so that ranges use its index; it differs from Spark only for characters below the space."""
        q = self.quote(col.name)
        if col.kind is Kind.TEXT and not col.binary_collation:
            return f"CAST(CONVERT({q} USING utf8mb4) AS BINARY)"
        return q

    def select_expr(self, col: Column) -> str:
        """How a row read fetches a column: exactly, and TIME as the server prints it (the Delta text)."""
        q = self.quote(col.name)
        if col.kind is Kind.FLOAT:
            return f"({q} + 0e0)"  # as a double: a FLOAT alone is sent with 6 digits, not its exact value
        if col.kind in (Kind.TIME, Kind.JSON):
            return f"CAST({q} AS CHAR)"
        return q

    def range_predicate(self, key_range: KeyRange, key_exprs: Sequence[str]) -> tuple[str, list[Any]]:
        return lexicographic_predicate(key_range, key_exprs, self.placeholder)

    # -- snapshots

    def snapshot_statements(self, ts: int | None) -> list[tuple[str, tuple[Any, ...]]]:
        """Run on each reading connection so that all of them read one state of the table."""
        return [
            ("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", ()),
            ("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", ()),
        ]

    # the server's replication position, read while the lock holds the table still: which snapshot it was
    position_variable: ClassVar[str] = "gtid_executed"

    def position_query(self) -> str:
        """UTC time and replication position, read on the locking connection right after the snapshots."""
        return f"SELECT UTC_TIMESTAMP(6), @@GLOBAL.{self.position_variable}"

    def lock_statements(self, db: str, table: str) -> tuple[str, str]:
        """Held on another connection while the snapshots open: (lock, unlock)."""
        return f"LOCK TABLES {self.table(db, table)} READ", "UNLOCK TABLES"

    # -- statements of one table (placeholders in `%s`, literal `%` doubled)

    def boundaries_query(self, schema: TableSchema) -> str:
        """The first key of every `%s` rows after the first chunk, in key order."""
        keys = self._keys(schema)
        aliased = ", ".join(f"{k} AS _k{i}" for i, k in enumerate(keys))
        outer = ", ".join(f"_k{i}" for i in range(len(keys)))
        return (
            f"SELECT {outer} FROM (SELECT {aliased}, ROW_NUMBER() OVER (ORDER BY {', '.join(keys)}) AS _rn "
            f"FROM {self._table(schema)}) AS _b WHERE MOD(_rn, %s) = 1 AND _rn > 1 ORDER BY _rn"
        )

    def checksum_query(
        self, schema: TableSchema, columns: Sequence[Column], digits: FloatDigits, key_range: KeyRange
    ) -> tuple[str, list[Any]]:
        where, params = self.range_predicate(key_range, self._keys(schema))
        select = _literal(self.checksum(columns, digits))
        return f"SELECT {select} FROM {self._table(schema)} WHERE {where}", params

    def split_query(
        self,
        schema: TableSchema,
        columns: Sequence[Column],
        digits: FloatDigits,
        key_range: KeyRange,
        size: int,
    ) -> tuple[str, list[Any]]:
        """Per run of `size` rows in key order: its number, first key, count and hash sum."""
        keys = self._keys(schema)
        order = ", ".join(keys)
        row_hash = _literal(self.row_hash(self.row(columns, digits)))
        aliased = ", ".join(f"{k} AS _k{i}" for i, k in enumerate(keys))
        firsts = ", ".join(f"MAX(CASE WHEN _first THEN _k{i} END)" for i in range(len(keys)))
        where, params = self.range_predicate(key_range, keys)
        sql = (
            f"SELECT _part, {firsts}, COUNT(*), COALESCE(SUM(_h), 0) FROM (SELECT {aliased}, {row_hash} AS _h, "
            f"(ROW_NUMBER() OVER (ORDER BY {order}) - 1) DIV %s AS _part, "
            f"MOD(ROW_NUMBER() OVER (ORDER BY {order}) - 1, %s) = 0 AS _first "
            f"FROM {self._table(schema)} WHERE {where}) AS _s GROUP BY _part ORDER BY _part"
        )
        return sql, [size, size, *params]

    def rows_query(
        self, schema: TableSchema, columns: Sequence[Column], key_range: KeyRange
    ) -> tuple[str, list[Any]]:
        where, params = self.range_predicate(key_range, self._keys(schema))
        return f"SELECT {self._select_list(columns)} FROM {self._table(schema)} WHERE {where}", params

    def bucket_checksums_query(
        self,
        schema: TableSchema,
        columns: Sequence[Column],
        digits: FloatDigits,
        by: Sequence[Column],
        width: int,
    ) -> str:
        bucket = _literal(self.bucket(by, digits, width))
        select = _literal(self.checksum(columns, digits))
        return f"SELECT {bucket} AS _bucket, {select} FROM {self._table(schema)} GROUP BY _bucket"

    def bucket_rows_query(
        self,
        schema: TableSchema,
        columns: Sequence[Column],
        digits: FloatDigits,
        by: Sequence[Column],
        width: int,
        buckets: int,
    ) -> str:
        bucket = _literal(self.bucket(by, digits, width))
        placeholders = ", ".join([self.placeholder] * buckets)
        return f"SELECT {self._select_list(columns)} FROM {self._table(schema)} WHERE {bucket} IN ({placeholders})"

    def _keys(self, schema: TableSchema) -> list[str]:
        return [_literal(self.key_expr(c)) for c in schema.key_columns]

    def _table(self, schema: TableSchema) -> str:
        return _literal(self.table(schema.db, schema.table))

    def _select_list(self, columns: Sequence[Column]) -> str:
        return _literal(", ".join(self.select_expr(c) for c in columns))

    # -- catalog

    def list_tables(self, query: Query) -> list[tuple[str, str]]:
        """Every base table outside the system schemas, as (db, table)."""
        placeholders = ", ".join([self.placeholder] * len(SYSTEM_SCHEMAS))
        rows = query(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
            f"WHERE TABLE_TYPE = 'BASE TABLE' AND LOWER(TABLE_SCHEMA) NOT IN ({placeholders}) "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME",
            SYSTEM_SCHEMAS,
        )
        return [(str(db), str(t)) for db, t in rows]

    def row_estimate(self, query: Query, db: str, table: str) -> int | None:
        found = query(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (db, table),
        )
        return int(found[0][0]) if found and found[0][0] is not None else None

    def columns(self, query: Query, db: str, table: str) -> list[tuple[Any, ...]]:
        """(name, type, nullable YES/NO, collation) per column, in ordinal order."""
        return query(
            "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (db, table),
        )

    def primary_key(self, query: Query, db: str, table: str) -> tuple[str, ...]:
        rows = query(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND "
            "TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
            (db, table),
        )
        return tuple(str(r[0]) for r in rows)

    def json_columns(self, query: Query, db: str, table: str) -> set[str]:
        """Text columns that hold JSON (MariaDB marks them by a check constraint); none here."""
        return set()

    def refine(self, query: Query, schema: TableSchema) -> TableSchema:
        """What the catalog does not say (TiDB's hidden row id); nothing here."""
        return schema


def _literal(sql: str) -> str:
    """SQL text that goes through pymysql's %-formatting unchanged (`%Y` in DATE_FORMAT)."""
    return sql.replace("%", "%%")


def _zero_date_null(q: str, text: str) -> str:
    return f"CASE WHEN MONTH({q}) = 0 OR DAYOFMONTH({q}) = 0 THEN NULL ELSE {text} END"


def _float_text(q: str, digits: int) -> str:
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
