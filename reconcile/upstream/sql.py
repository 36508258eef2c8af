"""TiDB, MySQL and MariaDB through pymysql: schema, chunk boundaries, pushed-down checksums, row reads.

Connections
    Every connection runs with `time_zone = '+00:00'` and utf8mb4. TLS comes from `ssl_*` in the
    config (an `ssl.SSLContext`, verified unless `ssl_verify = false`). Identifiers are validated and
    backtick-quoted; values always travel as parameters. Error messages name host, port and user,
    never the password.

Snapshots (what a run guarantees)
    TiDB: every connection sets `@@tidb_snapshot` to the same ts (by default the resolved ts recorded
    in the Delta table), so all parallel queries read one MVCC snapshot: exact even while the upstream
    is busy, as long as the ts is above TiDB's GC safe point.
    MySQL/MariaDB: each table is read by `parallelism` connections, each inside its own
    `START TRANSACTION WITH CONSISTENT SNAPSHOT`. With `consistency = "lock"` (the default) a
    separate connection holds `LOCK TABLES <table> READ` while those snapshots are opened (a few
    milliseconds; writers wait, readers do not), so every connection sees the same committed state of
    that table. With `consistency = "snapshot"` no lock is taken and the connections' snapshots may
    differ by writes committed while they were opened: exact only on a quiet table. Either way the
    Delta side is the version chosen by `--at-ts` or the latest, since MySQL has no ts to match.

Bytes
    Every byte pymysql reads from the socket is counted (`bytes_received`), for the report and bench.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import queue
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

import pymysql
from pymysql.constants import CR, ER

from reconcile.chunks import Checksum, Key, KeyRange, Part, predicate
from reconcile.encoding import (
    Dialect,
    FloatDigits,
    JsonMode,
    json_mode,
    quote_ident,
    quote_table,
    sql_bucket,
    sql_checksum,
    sql_hash,
    sql_row,
)
from reconcile.errors import TableNotFound, UpstreamError
from reconcile.schema import Column, Kind, TableSchema, column_from_type

if TYPE_CHECKING:
    from tidelake.config import UpstreamConfig

T = TypeVar("T")
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys", "metrics_schema")


class CountingConnection(pymysql.connections.Connection):  # type: ignore[misc]
    """A pymysql connection that counts the bytes it reads from the server."""

    bytes_received = 0

    def _read_bytes(self, num_bytes: int) -> bytes:
        data: bytes = super()._read_bytes(num_bytes)
        self.bytes_received += len(data)
        return data


@dataclass(frozen=True)
class ServerInfo:
    dialect: Dialect
    version: str
    json_mode: JsonMode


def _ssl_context(config: UpstreamConfig) -> ssl.SSLContext | None:
    wants = config.ssl or config.ssl_ca or config.ssl_cert or config.ssl_key
    if not wants:
        return None
    try:
        context = ssl.create_default_context(cafile=config.ssl_ca)
        if config.ssl_cert:
            context.load_cert_chain(config.ssl_cert, config.ssl_key)
    except (OSError, ssl.SSLError) as exc:
        raise UpstreamError(f"upstream TLS set-up failed: {exc}") from None
    if not config.ssl_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def connect(config: UpstreamConfig, *, database: str | None = None) -> CountingConnection:
    """Open one connection, mapping every failure to an UpstreamError without the password in it."""
    where = f"{config.kind} upstream {config.host}:{config.port} as user {config.user!r}"
    try:
        conn = CountingConnection(
            host=config.host,
            port=config.port,
            user=config.user,
            password=config.password.reveal(),
            database=database,
            charset="utf8mb4",
            connect_timeout=config.connect_timeout,
            read_timeout=None,
            ssl=_ssl_context(config),
            autocommit=True,
            binary_prefix=True,
            init_command="SET time_zone = '+00:00'",
        )
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else None
        if code == ER.ACCESS_DENIED_ERROR:
            reason = "access denied (wrong user or password)"
        elif code in (CR.CR_CONN_HOST_ERROR, CR.CR_CONNECTION_ERROR, CR.CR_UNKNOWN_HOST):
            reason = "cannot connect (is the server running and reachable?)"
        else:
            reason = _scrub(str(exc.args[-1] if exc.args else exc), config)
        raise UpstreamError(f"{where}: {reason}") from None
    except (pymysql.err.MySQLError, OSError, ssl.SSLError) as exc:
        raise UpstreamError(f"{where}: {_scrub(str(exc), config)}") from None
    return conn


def _scrub(message: str, config: UpstreamConfig) -> str:
    secret = config.password.reveal()
    return message.replace(secret, "***") if secret else message


def server_info(conn: pymysql.connections.Connection, configured: str) -> ServerInfo:
    """What the server really is (the config's `kind` is checked, not trusted)."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
    if "tidb" in version.lower():
        dialect = Dialect.TIDB
    elif "mariadb" in version.lower():
        dialect = Dialect.MARIADB
    else:
        dialect = Dialect.MYSQL
    if configured == "tidb" and dialect is not Dialect.TIDB:
        raise UpstreamError(f"upstream kind is 'tidb' but the server is {version}")
    mode = json_mode(dialect)
    if dialect is Dialect.MARIADB and _version_tuple(version) < (10, 7):
        mode = JsonMode.AS_STORED  # JSON_NORMALIZE arrived in 10.7
    return ServerInfo(dialect, version, mode)


def _version_tuple(version: str) -> tuple[int, ...]:
    match = re.search(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


class SqlUpstream:
    """One upstream server for a whole run: lists tables and opens a consistent reader per table."""

    supports_ranges = True

    def __init__(self, config: UpstreamConfig, parallelism: int) -> None:
        self.config = config
        self.parallelism = parallelism
        self._bytes_closed = 0
        self._meta = connect(config)
        self.info = server_info(self._meta, config.kind)
        self.json_mode = self.info.json_mode
        self.reads_at_ts = self.info.dialect is Dialect.TIDB

    def fixed_ts(self) -> int | None:
        return None

    def upstream_ts(self, at_ts: int | None, delta_ts: int | None) -> int | None:
        """TiDB reads at `--at-ts`, else at the Delta table's resolved ts; MySQL has no ts to read at."""
        if self.info.dialect is not Dialect.TIDB:
            return None
        return at_ts if at_ts is not None else delta_ts

    @property
    def bytes_received(self) -> int:
        return self._bytes_closed + self._meta.bytes_received

    def describe(self) -> str:
        return f"{self.info.dialect.value} {self.info.version} at {self.config.host}:{self.config.port}"

    def close(self) -> None:
        self._bytes_closed += self._meta.bytes_received
        self._meta.bytes_received = 0
        self._meta.close()

    def use_snapshot(self, ts: int | None) -> None:
        """On TiDB, read the catalog itself at `ts` too."""
        if self.info.dialect is Dialect.TIDB:
            _set_snapshot(self._meta, ts, self.config)

    def list_tables(self, patterns: Sequence[str]) -> list[tuple[str, str]]:
        """Upstream base tables matching `db.table` patterns; a pattern that matches nothing is an error."""
        placeholders = ", ".join(["%s"] * len(SYSTEM_SCHEMAS))
        with self._meta.cursor() as cur:
            cur.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                f"WHERE TABLE_TYPE = 'BASE TABLE' AND LOWER(TABLE_SCHEMA) NOT IN ({placeholders}) "
                "ORDER BY TABLE_SCHEMA, TABLE_NAME",
                SYSTEM_SCHEMAS,
            )
            names = [(str(db), str(t)) for db, t in cur.fetchall()]
        return match_tables(names, patterns, "upstream")

    def schema(self, db: str, table: str, ts: int | None = None) -> TableSchema:
        self.use_snapshot(ts)
        return read_schema(self._meta, db, table, self.info.dialect)

    def row_estimate(self, db: str, table: str) -> int | None:
        with self._meta.cursor() as cur:
            cur.execute(
                "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (db, table),
            )
            found = cur.fetchone()
        return int(found[0]) if found and found[0] is not None else None

    @contextmanager
    def open_table(
        self, schema: TableSchema, columns: Sequence[Column], digits: FloatDigits, snapshot_ts: int | None
    ) -> Iterator[SqlTableReader]:
        """Connections for one table, all reading the same snapshot (see the module docstring)."""
        conns = [connect(self.config) for _ in range(self.parallelism)]
        lock_note = None
        try:
            if self.info.dialect is Dialect.TIDB:
                for conn in conns:
                    _set_snapshot(conn, snapshot_ts, self.config)
            else:
                lock_note = self._start_snapshots(conns, schema)
            reader = SqlTableReader(schema, columns, self.info, digits, conns)
            reader.notes = [lock_note] if lock_note else []
            yield reader
        finally:
            for conn in conns:
                self._bytes_closed += conn.bytes_received
                with suppress(pymysql.err.Error):
                    conn.close()

    def _start_snapshots(self, conns: Sequence[CountingConnection], schema: TableSchema) -> str | None:
        def begin() -> None:
            for conn in conns:
                with conn.cursor() as cur:
                    cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")

        if self.config.consistency != "lock":
            begin()
            return "snapshots opened without a lock: exact only if the table was quiet"
        try:
            with self._meta.cursor() as cur:
                cur.execute(f"LOCK TABLES {quote_table(schema.db, schema.table)} READ")
        except pymysql.err.MySQLError as exc:
            begin()
            return f"LOCK TABLES refused ({exc.args[-1]}): snapshots opened without a lock"
        try:
            begin()
        finally:
            with self._meta.cursor() as cur:
                cur.execute("UNLOCK TABLES")
        return None


def match_tables(
    names: Sequence[tuple[str, str]], patterns: Sequence[str], side: str
) -> list[tuple[str, str]]:
    """Names matching any `db.table` pattern (`*`, `?`, `[...]` wildcards), in order, without duplicates."""
    chosen: list[tuple[str, str]] = []
    for pattern in patterns:
        db_pattern, _, table_pattern = pattern.partition(".")
        hits = [
            (db, t)
            for db, t in names
            if fnmatch.fnmatchcase(db, db_pattern) and fnmatch.fnmatchcase(t, table_pattern)
        ]
        if not hits:
            raise TableNotFound(f"no {side} table matches {pattern!r}")
        chosen += [h for h in hits if h not in chosen]
    return chosen


def _set_snapshot(conn: pymysql.connections.Connection, ts: int | None, config: UpstreamConfig) -> None:
    try:
        with conn.cursor() as cur:
            cur.execute("SET @@tidb_snapshot = %s", (str(ts) if ts is not None else "",))
    except pymysql.err.MySQLError as exc:
        raise UpstreamError(
            f"TiDB cannot read at ts {ts}: {_scrub(str(exc.args[-1]), config)} "
            "(is the ts older than the GC safe point? raise tidb_gc_life_time)"
        ) from None


def read_schema(conn: pymysql.connections.Connection, db: str, table: str, dialect: Dialect) -> TableSchema:
    """Columns (ordinal order) and primary key from information_schema."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        rows = cur.fetchall()
        if not rows:
            raise TableNotFound(f"upstream table {db}.{table} does not exist")
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND "
            "TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
            (db, table),
        )
        key = tuple(str(r[0]) for r in cur.fetchall())
        json_columns: set[str] = set()
        if dialect is Dialect.MARIADB:
            cur.execute(
                "SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
                "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
                (db, table),
            )
            for _name, clause in cur.fetchall():
                match = re.fullmatch(r"\s*json_valid\(`((?:[^`]|``)+)`\)\s*", str(clause), re.IGNORECASE)
                if match:
                    json_columns.add(match.group(1).replace("``", "`"))
    columns = tuple(
        column_from_type(
            str(name),
            _text(column_type),
            nullable=nullable == "YES",
            json_text=str(name) in json_columns,
            collation=None if collation is None else str(collation),
        )
        for name, column_type, nullable, collation in rows
    )
    return TableSchema(db, table, columns, key)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SqlTableReader:
    """The reads reconcile needs from one upstream table, run in parallel on a fixed set of connections."""

    def __init__(
        self,
        schema: TableSchema,
        columns: Sequence[Column],
        info: ServerInfo,
        digits: FloatDigits,
        conns: Sequence[CountingConnection],
    ) -> None:
        self.schema = schema
        self.columns = tuple(columns)
        self.info = info
        self.digits = digits
        self.notes: list[str] = []
        # Every SQL fragment passes pymysql's %-formatting, so literal % are doubled once, here.
        self._table = _literal(quote_table(schema.db, schema.table))
        self._keys = [_literal(key_expr(c)) for c in schema.key_columns]
        self._pool: queue.Queue[CountingConnection] = queue.Queue()
        for conn in conns:
            self._pool.put(conn)
        self._workers = len(conns)
        self._lock = threading.Lock()
        self.queries = 0
        self.query_seconds = 0.0

    # -- plumbing

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self._pool.get()
        started = time.monotonic()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, tuple(params))
                return list(cur.fetchall())
        except pymysql.err.MySQLError as exc:
            raise UpstreamError(
                f"upstream query on {self.schema.name} failed: {exc.args[-1] if exc.args else exc}"
            ) from None
        finally:
            with self._lock:
                self.queries += 1
                self.query_seconds += time.monotonic() - started
            self._pool.put(conn)

    def _parallel(
        self, fn: Callable[[T], Any], items: Sequence[T], done: Callable[[int], None] | None = None
    ) -> list[Any]:
        """`fn` over `items` on the connections, at most `parallelism` at once; results in order."""
        if len(items) <= 1:
            out = [fn(i) for i in items]
            if done:
                done(len(items))
            return out
        with ThreadPoolExecutor(max_workers=min(self._workers, len(items))) as pool:
            futures = [pool.submit(fn, item) for item in items]
            if done:
                for _ in as_completed(futures):
                    done(1)
            return [f.result() for f in futures]

    # -- range strategy

    def boundaries(self, chunk_size: int) -> list[Key]:
        """The first key of every `chunk_size` upstream rows after the first chunk, in key order."""
        keys = ", ".join(self._keys)
        aliased = ", ".join(f"{k} AS _k{i}" for i, k in enumerate(self._keys))
        outer = ", ".join(f"_k{i}" for i in range(len(self._keys)))
        sql = (
            f"SELECT {outer} FROM (SELECT {aliased}, ROW_NUMBER() OVER (ORDER BY {keys}) AS _rn "
            f"FROM {self._table}) AS _b WHERE MOD(_rn, %s) = 1 AND _rn > 1 ORDER BY _rn"
        )
        return [self._key(row) for row in self._query(sql, (chunk_size,))]

    def checksums(
        self, ranges: Sequence[KeyRange], done: Callable[[int], None] | None = None
    ) -> list[Checksum]:
        select = _literal(sql_checksum(self.columns, self.info.dialect, self.digits))

        def one(key_range: KeyRange) -> Checksum:
            where, params = predicate(key_range, self._keys)
            count, total = self._query(f"SELECT {select} FROM {self._table} WHERE {where}", params)[0]
            return int(count), int(total)

        return self._parallel(one, ranges, done)

    def split(self, requests: Sequence[tuple[KeyRange, Checksum]], parts: int) -> list[list[Part]]:
        """Cut each range into `parts` runs of equal upstream row counts, each with its checksum.

        One query per range (run in parallel): number the range's rows in key order, group them by
        `(row number - 1) DIV size`, and return per group its first key, count and hash sum. The first
        part starts at the range's own lower bound and the last ends at its upper one, so rows only
        the Delta side has still fall in a part.
        """
        keys = ", ".join(self._keys)
        row_hash = _literal(sql_hash(sql_row(self.columns, self.info.dialect, self.digits)))
        aliased = ", ".join(f"{k} AS _k{i}" for i, k in enumerate(self._keys))
        firsts = ", ".join(f"MAX(CASE WHEN _first THEN _k{i} END)" for i in range(len(self._keys)))

        def one(request: tuple[KeyRange, Checksum]) -> list[Part]:
            key_range, (count, _sum) = request
            size = max(-(-count // parts), 1)
            where, params = predicate(key_range, self._keys)
            sql = (
                f"SELECT _part, {firsts}, COUNT(*), COALESCE(SUM(_h), 0) FROM (SELECT {aliased}, {row_hash} AS _h, "
                f"(ROW_NUMBER() OVER (ORDER BY {keys}) - 1) DIV %s AS _part, "
                f"MOD(ROW_NUMBER() OVER (ORDER BY {keys}) - 1, %s) = 0 AS _first "
                f"FROM {self._table} WHERE {where}) AS _s GROUP BY _part ORDER BY _part"
            )
            rows = self._query(sql, [size, size, *params])
            width = len(self._keys)
            starts = [self._key(r[1 : 1 + width]) for r in rows]
            bounds = [key_range.lower, *starts[1:], key_range.upper]
            return [
                (KeyRange(bounds[i], bounds[i + 1]), (int(r[1 + width]), int(r[2 + width])))
                for i, r in enumerate(rows)
            ]

        return self._parallel(one, requests)

    def rows(self, ranges: Sequence[KeyRange]) -> list[tuple[Any, ...]]:
        """Every column of the rows in the ranges, converted to the Delta value domain."""

        def one(key_range: KeyRange) -> list[tuple[Any, ...]]:
            where, params = predicate(key_range, self._keys)
            return self._query(f"SELECT {self._select_list()} FROM {self._table} WHERE {where}", params)

        fetched = self._parallel(one, ranges)
        return [to_delta_row(self.columns, r) for part in fetched for r in part]

    # -- bucket strategy (no usable key order)

    def bucket_checksums(self, width: int, by: Sequence[Column]) -> dict[str, Checksum]:
        bucket = _literal(sql_bucket(by, self.info.dialect, self.digits, width))
        select = _literal(sql_checksum(self.columns, self.info.dialect, self.digits))
        rows = self._query(f"SELECT {bucket} AS _bucket, {select} FROM {self._table} GROUP BY _bucket")
        return {_text(b): (int(c), int(s)) for b, c, s in rows}

    def bucket_rows(self, width: int, by: Sequence[Column], buckets: Sequence[str]) -> list[tuple[Any, ...]]:
        if not buckets:
            return []
        bucket = _literal(sql_bucket(by, self.info.dialect, self.digits, width))
        placeholders = ", ".join(["%s"] * len(buckets))
        sql = f"SELECT {self._select_list()} FROM {self._table} WHERE {bucket} IN ({placeholders})"
        return [to_delta_row(self.columns, r) for r in self._query(sql, list(buckets))]

    # -- helpers

    def _select_list(self) -> str:
        return _literal(", ".join(select_expr(c) for c in self.columns))

    def _key(self, row: Sequence[Any]) -> Key:
        return tuple(to_delta_value(c, v) for c, v in zip(self.schema.key_columns, row, strict=True))


def _literal(sql: str) -> str:
    """SQL text that goes through pymysql's %-formatting unchanged (`%Y` in DATE_FORMAT)."""
    return sql.replace("%", "%%")


def key_expr(col: Column) -> str:
    """A key column as ranges compare it: bytewise for text, so MySQL and Spark agree on the order."""
    q = quote_ident(col.name)
    if col.kind is Kind.TEXT and not col.binary_collation:
        return f"(CONVERT({q} USING utf8mb4) COLLATE utf8mb4_bin)"
    return q


def select_expr(col: Column) -> str:
    """How a row read fetches a column: exactly, and TIME as MySQL prints it, which is the Delta text."""
    q = quote_ident(col.name)
    if col.kind is Kind.FLOAT:
        return f"({q} + 0e0)"  # as a double: a FLOAT alone is sent with 6 digits, not its exact value
    if col.kind is Kind.TIME:
        return f"CAST({q} AS CHAR)"
    if col.kind is Kind.JSON:
        return f"CAST({q} AS CHAR)"
    return q


def to_delta_row(columns: Sequence[Column], row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(to_delta_value(c, v) for c, v in zip(columns, row, strict=True))


def to_delta_value(col: Column, value: Any) -> Any:
    """A pymysql value as the Delta column holds it (DESIGN.md mapping); zero dates become None."""
    if value is None:
        return None
    kind = col.kind
    if kind in (Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP) and isinstance(value, str | bytes):
        return None  # pymysql hands back zero and partial-zero dates as text
    if kind is Kind.TIMESTAMP:
        return value.replace(tzinfo=dt.UTC)
    if kind is Kind.INT and col.delta_type.startswith("decimal"):
        return Decimal(value)
    if kind is Kind.DECIMAL and col.delta_type == "string":
        return format(value, "f")
    if kind in (Kind.TEXT, Kind.JSON, Kind.TIME):
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    if kind in (Kind.BINARY, Kind.BIT):
        return bytes(value)
    if kind is Kind.YEAR:
        return int(value)
    return value
