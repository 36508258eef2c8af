"""A MySQL-protocol upstream (TiDB, MySQL, MariaDB) through pymysql: connections, snapshots, parallel reads.

Every statement comes from the server's dialect (`reconcile.upstream.dialect`: mysql, mariadb, tidb,
detected from `SELECT VERSION()`); this module only runs them.

Connections
    Every connection runs with `time_zone = '+00:00'` and utf8mb4. TLS comes from `ssl_*` in the
    config (an `ssl.SSLContext`, verified unless `ssl_verify = false`). Identifiers are validated and
    backtick-quoted; values always travel as parameters. Error messages name host, port and user,
    never the password.

Snapshots (what a run guarantees)
    A dialect that reads at a ts (TiDB) sets it on every connection: all parallel queries read one
    MVCC snapshot. Otherwise (MySQL/MariaDB) each table is read by `parallelism` connections, each
    inside its own consistent-snapshot transaction. With `consistency = "lock"` (the default) a
    separate connection holds `LOCK TABLES <table> READ` while those snapshots are opened (a few
    milliseconds; writers wait, readers do not), so every connection sees the same committed state of
    that table. With `consistency = "snapshot"` no lock is taken and the connections' snapshots may
    differ by writes committed while they were opened: exact only on a quiet table. Either way the
    Delta side is the version chosen by `--at-ts` or the latest, since MySQL has no ts to match.

Network failures
    Every statement waits at most `read_timeout` seconds for its answer. A connection refused, reset,
    lost or timed out raises `UpstreamUnavailable` naming the server; the engine then reads the table
    again from new connections (`reconnect` renews the shared one), so a retried table still sees one
    snapshot. Any other failure is an `UpstreamError`. Neither is ever a raw pymysql exception.

Bytes
    Every byte pymysql reads from the socket is counted (`bytes_received`), for the report and bench.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager, suppress
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

import pymysql

from reconcile.chunks import Checksum, Key, KeyRange, Part
from reconcile.encoding import FloatDigits
from reconcile.errors import TableNotFound, UpstreamError, UpstreamUnavailable
from reconcile.schema import Column, Kind, TableSchema, column_from_type
from reconcile.upstream.dialect import detect
from reconcile.upstream.mysql import MySQL
from reconcile.upstream.sqltext import Query
from tidelake.upstream import (
    CountingConnection,
    connect,
    failure,
    scrub,
    server_version,
    snapshot_too_old,
    ssl_context,
)

_ssl_context = ssl_context  # its old name (tests)

if TYPE_CHECKING:
    from tidelake.config import UpstreamConfig

T = TypeVar("T")


def server_dialect(conn: pymysql.connections.Connection, configured: str) -> MySQL:
    """The dialect of what the server really is (the config's `kind` is checked, not trusted)."""
    version = server_version(conn)
    dialect = detect(version)
    if configured == "tidb" and dialect.name != "tidb":
        raise UpstreamError(f"upstream kind is 'tidb' but the server is {version}")
    return dialect


def _query_on(conn: pymysql.connections.Connection) -> Query:
    def run(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with conn.cursor() as cur:
            cur.execute(sql, tuple(params))
            return list(cur.fetchall())

    return run


class SqlUpstream:
    """One upstream server for a whole run: lists tables and opens a consistent reader per table."""

    supports_ranges = True

    def __init__(self, config: UpstreamConfig, parallelism: int) -> None:
        self.config = config
        self.parallelism = parallelism
        self._bytes_closed = 0
        self._meta = connect(config)
        # Tables are reconciled side by side: one at a time on the shared connection (a table's LOCK
        # TABLES ... UNLOCK TABLES, a TiDB snapshot and the schema read under it go together).
        self._meta_lock = threading.RLock()
        self.dialect = self._on_meta(
            "reading the server version", lambda: server_dialect(self._meta, config.kind)
        )
        self.json_mode = self.dialect.json_mode
        self.reads_at_ts = self.dialect.reads_at_ts

    def fixed_ts(self) -> int | None:
        return None

    def upstream_ts(self, at_ts: int | None, delta_ts: int | None) -> int | None:
        """A dialect that reads at a ts reads at `--at-ts`, else at the Delta table's resolved ts."""
        if not self.reads_at_ts:
            return None
        return at_ts if at_ts is not None else delta_ts

    @property
    def bytes_received(self) -> int:
        with self._meta_lock:
            return self._bytes_closed + self._meta.bytes_received

    def describe(self) -> str:
        return f"{self.dialect.name} {self.dialect.version} at {self.config.host}:{self.config.port}"

    def close(self) -> None:
        with self._meta_lock:
            self._bytes_closed += self._meta.bytes_received
            self._meta.bytes_received = 0
            with suppress(pymysql.err.Error):
                self._meta.close()

    def reconnect(self) -> None:
        """A new shared connection in place of one the network may have broken (before a retry)."""
        with self._meta_lock:
            self.close()
            self._meta = connect(self.config)

    def _on_meta(self, doing: str, read: Callable[[], T]) -> T:
        """`read` on the shared connection, its pymysql and socket failures as upstream errors."""
        with self._meta_lock:
            try:
                return read()
            except (pymysql.err.MySQLError, OSError) as exc:
                raise failure(exc, self.config, doing) from None

    def list_tables(self, patterns: Sequence[str]) -> list[tuple[str, str]]:
        """Upstream base tables matching `db.table` patterns; a pattern that matches nothing is an error."""
        names = self._on_meta("listing tables", lambda: self.dialect.list_tables(_query_on(self._meta)))
        return match_tables(names, patterns, "upstream")

    def schema(self, db: str, table: str, ts: int | None = None) -> TableSchema:
        """The table's schema, read from the catalog at `ts` when the dialect reads at a ts."""

        def read() -> TableSchema:
            if self.reads_at_ts:
                _open_snapshot(self._meta, self.dialect, ts, self.config)
            return read_schema(_query_on(self._meta), db, table, self.dialect)

        return self._on_meta(f"reading the schema of {db}.{table}", read)

    def row_estimate(self, db: str, table: str) -> int | None:
        return self._on_meta(
            f"estimating the rows of {db}.{table}",
            lambda: self.dialect.row_estimate(_query_on(self._meta), db, table),
        )

    @contextmanager
    def open_table(
        self, schema: TableSchema, columns: Sequence[Column], digits: FloatDigits, snapshot_ts: int | None
    ) -> Iterator[SqlTableReader]:
        """Connections for one table, all reading the same snapshot (see the module docstring)."""
        conns: list[CountingConnection] = []
        lock_note = None
        try:
            conns += (connect(self.config) for _ in range(self.parallelism))
            if self.reads_at_ts:
                for conn in conns:
                    _open_snapshot(conn, self.dialect, snapshot_ts, self.config)
                described = f"{self.dialect.name} read at ts {snapshot_ts}" if snapshot_ts else None
            else:
                lock_note, described = self._on_meta(
                    f"opening the snapshots of {schema.name}", lambda: self._start_snapshots(conns, schema)
                )
            reader = SqlTableReader(schema, columns, self.dialect, digits, conns, self.config)
            reader.notes = [lock_note] if lock_note else []
            reader.snapshot = described
            yield reader
        finally:
            with self._meta_lock:
                self._bytes_closed += sum(conn.bytes_received for conn in conns)
            for conn in conns:
                with suppress(pymysql.err.Error):
                    conn.close()

    def _start_snapshots(
        self, conns: Sequence[CountingConnection], schema: TableSchema
    ) -> tuple[str | None, str | None]:
        """Open every connection's snapshot (under the table lock unless told not to): a note when the
        snapshots may differ, and which snapshot was read (UTC time and replication position)."""

        def begin() -> None:
            for conn in conns:
                _open_snapshot(conn, self.dialect, None, self.config)

        if self.config.consistency != "lock":
            begin()
            return "snapshots opened without a lock: exact only if the table was quiet", None
        lock, unlock = self.dialect.lock_statements(schema.db, schema.table)
        try:
            with self._meta.cursor() as cur:
                cur.execute(lock)
        except pymysql.err.MySQLError as exc:
            if isinstance(failure(exc, self.config, "locking"), UpstreamUnavailable):
                raise  # the network failed, not the lock: no silent loss of the one snapshot
            begin()
            return f"LOCK TABLES refused ({exc.args[-1]}): snapshots opened without a lock", None
        try:
            begin()
            with self._meta.cursor() as cur:  # nothing commits to the table while the lock is held
                cur.execute(self.dialect.position_query())
                at, position = cur.fetchone() or (None, None)
        finally:
            with self._meta.cursor() as cur:
                cur.execute(unlock)
        position = str(position or "").strip()
        where = f", {self.dialect.position_variable} {position}" if position else ""
        when = f" of {at:%Y-%m-%d %H:%M:%S.%f} UTC" if isinstance(at, dt.datetime) else ""
        return None, f"{self.dialect.name} snapshot{when}{where}"


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


def _open_snapshot(
    conn: pymysql.connections.Connection, dialect: MySQL, ts: int | None, config: UpstreamConfig
) -> None:
    try:
        with conn.cursor() as cur:
            for sql, params in dialect.snapshot_statements(ts):
                cur.execute(sql, params)
    except (pymysql.err.MySQLError, OSError) as exc:
        found = failure(exc, config, "opening a snapshot")
        if isinstance(found, UpstreamUnavailable):
            raise found from None
        reason = scrub(str(exc.args[-1]), config)
        if dialect.reads_at_ts:
            hint = snapshot_too_old(exc, ts, "compare at a newer ts (--at-ts, or a newer Delta version)") or (
                " (is the ts older than the GC safe point? raise tidb_gc_life_time)"
            )
            raise UpstreamError(f"{dialect.name} cannot read at ts {ts}: {reason}{hint}") from None
        raise UpstreamError(f"{dialect.name} cannot open a consistent snapshot: {reason}") from None


def read_schema(query: Query, db: str, table: str, dialect: MySQL) -> TableSchema:
    """Columns (ordinal order) and primary key from the catalog, as the dialect reads it."""
    rows = dialect.columns(query, db, table)
    if not rows:
        raise TableNotFound(f"upstream table {db}.{table} does not exist")
    key = dialect.primary_key(query, db, table)
    json_columns = dialect.json_columns(query, db, table)
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
    return dialect.refine(query, TableSchema(db, table, columns, key))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SqlTableReader:
    """The reads reconcile needs from one upstream table, run in parallel on a fixed set of connections."""

    def __init__(
        self,
        schema: TableSchema,
        columns: Sequence[Column],
        dialect: MySQL,
        digits: FloatDigits,
        conns: Sequence[CountingConnection],
        config: UpstreamConfig,
    ) -> None:
        self.schema = schema
        self.config = config
        self.columns = tuple(columns)
        self.dialect = dialect
        self.digits = digits
        self.notes: list[str] = []
        self.snapshot: str | None = None  # which upstream snapshot the reads see, for the report
        self._pool: queue.Queue[CountingConnection] = queue.Queue()
        for conn in conns:
            self._pool.put(conn)
        self._workers = len(conns)
        self._lock = threading.Lock()
        self.queries = 0  # read by the engine for the report (a files upstream has none)

    # -- plumbing

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self._pool.get()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, tuple(params))
                return list(cur.fetchall())
        except (pymysql.err.MySQLError, OSError) as exc:
            raise failure(exc, self.config, f"reading {self.schema.name}") from None
        finally:
            with self._lock:
                self.queries += 1
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
        return [
            self._key(row) for row in self._query(self.dialect.boundaries_query(self.schema), (chunk_size,))
        ]

    def checksums(
        self, ranges: Sequence[KeyRange], done: Callable[[int], None] | None = None
    ) -> list[Checksum]:
        def one(key_range: KeyRange) -> Checksum:
            sql, params = self.dialect.checksum_query(self.schema, self.columns, self.digits, key_range)
            count, total = self._query(sql, params)[0]
            return int(count), int(total)

        return self._parallel(one, ranges, done)

    def split(self, requests: Sequence[tuple[KeyRange, Checksum]], parts: int) -> list[list[Part]]:
        """Cut each range into `parts` runs of equal upstream row counts, each with its checksum.

        One query per range (run in parallel): the rows of the range in key order, grouped into runs
        of `size`, each with its first key, count and hash sum. The first part starts at the range's
        own lower bound and the last ends at its upper one, so rows only the Delta side has still fall
        in a part.
        """
        width = len(self.schema.primary_key)

        def one(request: tuple[KeyRange, Checksum]) -> list[Part]:
            key_range, (count, _sum) = request
            size = max(-(-count // parts), 1)
            sql, params = self.dialect.split_query(self.schema, self.columns, self.digits, key_range, size)
            rows = self._query(sql, params)
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
            return self._query(*self.dialect.rows_query(self.schema, self.columns, key_range))

        fetched = self._parallel(one, ranges)
        return [to_delta_row(self.columns, r) for part in fetched for r in part]

    # -- bucket strategy (no usable key order)

    def bucket_checksums(self, width: int, by: Sequence[Column]) -> dict[str, Checksum]:
        sql = self.dialect.bucket_checksums_query(self.schema, self.columns, self.digits, by, width)
        return {_text(b): (int(c), int(s)) for b, c, s in self._query(sql)}

    def bucket_rows(self, width: int, by: Sequence[Column], buckets: Sequence[str]) -> list[tuple[Any, ...]]:
        if not buckets:
            return []
        sql = self.dialect.bucket_rows_query(self.schema, self.columns, self.digits, by, width, len(buckets))
        return [to_delta_row(self.columns, r) for r in self._query(sql, list(buckets))]

    def _key(self, row: Sequence[Any]) -> Key:
        return tuple(to_delta_value(c, v) for c, v in zip(self.schema.key_columns, row, strict=True))


def to_delta_row(columns: Sequence[Column], row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(to_delta_value(c, v) for c, v in zip(columns, row, strict=True))


def to_delta_value(col: Column, value: Any) -> Any:
    """A pymysql value as the Delta column holds it (docs/architecture.md "Delta conventions"); zero dates
    become None."""
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
