"""The initial load from the upstream itself (`[source.initial] upstream_tso`): every tracked table that
exists at the TSO is read over Spark's JDBC source (MariaDB Connector/J, on spark.jars) and gets its first
Delta version at that TSO, like a Dumpling export's (docs/architecture.md "Starting from a snapshot").

What one load reads:
- **TiDB**: every connection runs at `tidb_snapshot` = the TSO (the driver's `sessionVariables`, so
  Spark's own schema query too; `SHOW CREATE TABLE` at the TSO as well): all tables and all partitions
  see the one state of the TSO. A table is read in up to `upstream_partitions` ranges of its integer
  handle (its integer primary key, or `_tidb_rowid`), bounds from `MIN`/`MAX` at the TSO, one Spark task
  each.
- **MySQL / MariaDB** have no reads at a ts: each table is read in one connection inside one
  `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY` (connections cannot share a snapshot, so a
  table is not split): each table is exactly one committed state. That the state is the one of
  `upstream_tso` is the user's statement (a stopped replica, a restored backup); tables are read one
  after another, so they agree with each other only while nothing writes to them during the load.

Values are read as MySQL text (BIT as its unsigned number, binary strings as bytes) and typed by the same
text decoder as the Dumpling and storage-sink paths, so the Delta tables are the same whichever gave them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pymysql

from backfill.codec import ColumnKind, DecodeStats, TableSchema
from backfill.codec.errors import CodecError
from backfill.codec.schema import ROWID_NAME
from backfill.initial.export import typed_rows
from backfill.sources.base import CheckpointBook
from backfill.sources.ticdc.change_rows import ParsedRows
from backfill.sources.upstream_schema import upstream_table_infos
from backfill.tables import table_matches
from tidelake import output
from tidelake.conventions import COMMIT_TS
from tidelake.errors import ConfigError, InputError, UpstreamError, UpstreamUnavailable
from tidelake.sparkerrors import from_task, in_task, input_errors
from tidelake.sqlident import quote_ident
from tidelake.upstream import (
    connect,
    failure,
    scrub,
    server_name,
    server_version,
    snapshot_too_old,
    with_retries,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tidelake.config import InitialLoadConfig, TidelakeConfig, UpstreamConfig

DRIVER = "org.mariadb.jdbc.Driver"
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys", "metrics_schema")
# the driver's error in a JVM trace: its class and message
_JDBC_FAILURE = re.compile(r"java\.sql\.(\w*Exception): ([^\n]*)")
# the driver's classes for a connection that could not be made or broke (refused, reset, lost, timed out)
_CONNECTION_FAILURES = frozenset(
    {"SQLNonTransientConnectionException", "SQLTransientConnectionException", "SQLRecoverableException",
     "SQLTimeoutException"}
)  # fmt: skip
_SPLITTABLE = (ColumnKind.INT, ColumnKind.UINT, ColumnKind.UINT64)


@dataclass(frozen=True)
class UpstreamTable:
    """One tracked table to load: its schema at the TSO, its Delta path, and the WHERE predicates of
    its partitions (one Spark task each)."""

    schema: TableSchema
    path: str
    tidb: bool  # read at tidb_snapshot (else in one consistent-snapshot transaction)
    split: str | None  # the column the predicates split by
    predicates: tuple[str, ...]


def snapshot_name(upstream: UpstreamConfig) -> str:
    """Where the rows came from, as `backfill status` shows it (never the user or password)."""
    return f"{upstream.kind}://{upstream.host}:{upstream.port}"


def load_from_upstream(
    spark: SparkSession, config: TidelakeConfig
) -> tuple[str, int, list[tuple[UpstreamTable, DataFrame, int]]]:
    """Every tracked table without a checkpoint read at the TSO and checked, nothing committed yet:
    (source name, TSO, [(table, rows, count)]). The caller commits them, then unpersists the rows.
    A connection lost, reset or refused while listing or reading is tried again (`[upstream]` `retries`,
    `retry_wait`; a table's read starts over from new connections); past the retries, or on any other
    failure, an UpstreamError naming host:port (and the table), InputError on a value that does not fit
    its column."""
    initial = config.source.initial
    upstream = config.upstream
    assert initial is not None and initial.upstream_tso is not None and upstream is not None
    tso = initial.upstream_tso
    book = CheckpointBook(spark, config.target.warehouse, config.job.app_id)

    def retrying(message: str) -> None:
        output.note(f"snapshot: {message}", "backfill")

    tables, _ = with_retries(
        lambda: _tables_to_load(upstream, initial, config.target.tables, book, tso), upstream, retrying
    )
    read: list[tuple[UpstreamTable, DataFrame, int]] = []
    try:
        for table in tables:
            (frame, count), _ = with_retries(
                partial(_read_table, spark, upstream, initial, table, tso), upstream, retrying
            )
            read.append((table, frame, count))
    except BaseException:
        for _, frame, _ in read:
            frame.unpersist()
        raise
    return snapshot_name(upstream), tso, read


def _read_table(
    spark: SparkSession, upstream: UpstreamConfig, initial: InitialLoadConfig, table: UpstreamTable, tso: int
) -> tuple[DataFrame, int]:
    """One table's rows read, checked and persisted (unpersisted again when the read fails)."""
    name = f"{table.schema.schema_name}.{table.schema.name}"
    frame: DataFrame | None = None
    try:
        with (
            upstream_read_errors(upstream, name, tso),  # Spark asks the server for the columns here already
            input_errors("upstream"),
            output.activity(f"snapshot: reading {name} from {server_name(upstream)}"),
        ):
            frame = table_rows(spark, upstream, initial, table, tso).persist()
            return frame, frame.count()
    except BaseException:
        if frame is not None:
            frame.unpersist()
        raise


def _tables_to_load(
    upstream: UpstreamConfig,
    initial: InitialLoadConfig,
    patterns: tuple[str, ...],
    book: CheckpointBook,
    tso: int,
) -> list[UpstreamTable]:
    """The tracked tables at the TSO that have no checkpoint yet, with their partitions' predicates."""
    if upstream.ssl_cert or upstream.ssl_key:
        raise ConfigError(
            "source.initial: upstream_tso reads over JDBC, which takes no ssl_cert/ssl_key client certificate; "
            "use a user that logs in with a password (TLS by ssl_ca or ssl = true)"
        )
    conn = connect(upstream)
    try:
        tidb = "tidb" in server_version(conn).lower()
        names = [
            (db, name)
            for db, name in _list_tables(conn, upstream, tso if tidb else None)
            if table_matches(patterns, db, name) and book.recorded_at(book.path(db, name)) is None
        ]
        infos = upstream_table_infos(upstream, {key: tso for key in names})
        found = []
        for db, name in names:
            try:
                schema = TableSchema.from_table_info(infos[(db, name)], schema_name=db)
            except CodecError as exc:
                raise InputError(f"{server_name(upstream)}: table {db}.{name} at {tso}: {exc}") from None
            column = _split_column(schema, tidb)
            predicates: tuple[str, ...] = ("1 = 1",)
            if column is not None and initial.upstream_partitions > 1:
                low, high = _bounds(conn, upstream, db, name, column, tso)
                predicates = split_predicates(column, low, high, initial.upstream_partitions)
            split = column if len(predicates) > 1 else None
            found.append(UpstreamTable(schema, book.path(db, name), tidb, split, predicates))
    finally:
        conn.close()
    return found


def _list_tables(
    conn: pymysql.connections.Connection, upstream: UpstreamConfig, tso: int | None
) -> list[tuple[str, str]]:
    excluded = ", ".join(f"'{s}'" for s in SYSTEM_SCHEMAS)
    sql = (
        "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
        f"AND LOWER(table_schema) NOT IN ({excluded}) ORDER BY table_schema, table_name"
    )
    return [(str(db), str(name)) for db, name in _query(conn, upstream, sql, tso, "listing its tables")]


def _split_column(schema: TableSchema, tidb: bool) -> str | None:
    """The integer handle to split a table's reads by: TiDB only (MySQL/MariaDB read a table whole)."""
    if not tidb:
        return None
    if schema.pk_kind == "rowid":
        return ROWID_NAME
    first = schema.handle_column or (schema.common_handle[0][0] if schema.common_handle else None)
    return first.name if first is not None and first.kind in _SPLITTABLE else None


def _bounds(
    conn: pymysql.connections.Connection, upstream: UpstreamConfig, db: str, name: str, column: str, tso: int
) -> tuple[int | None, int | None]:
    sql = f"SELECT MIN({quote_ident(column)}), MAX({quote_ident(column)}) FROM {quote_ident(db)}.{quote_ident(name)}"
    ((low, high),) = _query(conn, upstream, sql, tso, f"reading the key range of {db}.{name}")
    return (None, None) if low is None else (int(low), int(high))


def _query(
    conn: pymysql.connections.Connection, upstream: UpstreamConfig, sql: str, tso: int | None, doing: str
) -> list[tuple[Any, ...]]:
    at = f" at tidb_snapshot {tso}" if tso is not None else ""
    try:
        with conn.cursor() as cur:
            if tso is not None:
                cur.execute("SET @@tidb_snapshot = %s", (str(tso),))
            cur.execute(sql)
            rows = list(cur.fetchall())
            if tso is not None:
                cur.execute("SET @@tidb_snapshot = ''")
    except (pymysql.err.MySQLError, OSError) as exc:
        found = failure(exc, upstream, f"{doing}{at}")  # a lost connection: worth another try
        hint = snapshot_too_old(exc, tso, "take a newer snapshot (upstream_tso) and a changefeed from it")
        raise (UpstreamError(f"{found}{hint}") if hint else found) from None
    return rows


def split_predicates(column: str, low: int | None, high: int | None, parts: int) -> tuple[str, ...]:
    """WHERE predicates that split `column`'s values [low, high] into up to `parts` ranges of equal width
    and together hold every row exactly once (the first takes NULLs and all below, the last all above)."""
    if low is None or high is None or high - low + 1 < 2 or parts < 2:
        return ("1 = 1",)
    parts = min(parts, high - low + 1)
    step = (high - low + 1) / parts
    cuts = [low + round(step * i) for i in range(1, parts)]
    col = quote_ident(column)
    out = [f"{col} < {cuts[0]} OR {col} IS NULL"]
    out += [f"{col} >= {a} AND {col} < {b}" for a, b in pairwise(cuts)]
    out.append(f"{col} >= {cuts[-1]}")
    return tuple(out)


def jdbc_url(upstream: UpstreamConfig) -> str:
    """The driver's URL: MySQL text values as the server prints them (TINYINT(1) and YEAR as numbers),
    statements sent as text, TLS as `[upstream]` asks; the `jdbc:mysql:` scheme, so Spark quotes
    identifiers as MySQL does (its MySQL dialect)."""
    params = [
        "permitMysqlScheme",
        "tinyInt1isBit=false",
        "yearIsDateType=false",
        "useServerPrepStmts=false",
        f"connectTimeout={upstream.connect_timeout * 1000}",
        f"socketTimeout={upstream.read_timeout * 1000}",
    ]
    if upstream.ssl or upstream.ssl_ca:
        params.append("sslMode=verify-full" if upstream.ssl_verify else "sslMode=trust")
        if upstream.ssl_ca:
            params.append(f"serverSslCert={upstream.ssl_ca}")
    return f"jdbc:mysql://{upstream.host}:{upstream.port}/?{'&'.join(params)}"


def session_settings(tidb: bool, tso: int) -> dict[str, str]:
    """The driver properties that put every JDBC connection at the snapshot: `sessionVariables` (set as
    each connection opens, Spark's schema query's too) for UTC TIMESTAMP text and, on TiDB, the TSO; on
    MySQL/MariaDB the JDBC source's `sessionInitStatement` opens each read's consistent snapshot."""
    if tidb:
        return {"sessionVariables": f"time_zone='+00:00',tidb_snapshot='{int(tso)}'"}
    return {
        "sessionVariables": "time_zone='+00:00'",
        "sessionInitStatement": "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
    }


def select_sql(schema: TableSchema, split: str | None) -> str:
    """The table as a derived table of text values (BIT as its number), plus the split column."""
    items = []
    for col in schema.columns:
        name = quote_ident(col.name)
        value = f"CAST({name} AS UNSIGNED)" if col.kind == ColumnKind.BIT else name
        items.append(f"{value} AS {name}")
    if split is not None and split not in schema.by_name:
        items.append(quote_ident(split))
    db, table = quote_ident(schema.schema_name or ""), quote_ident(schema.name)
    return f"(SELECT {', '.join(items)} FROM {db}.{table}) AS tidelake_snapshot"


def _read_types(schema: TableSchema) -> str:
    """The JDBC source's `customSchema`: every column as text, binary strings as bytes."""
    return ", ".join(
        f"{quote_ident(c.name)} {'BINARY' if c.kind == ColumnKind.BINARY else 'STRING'}"
        for c in schema.columns
    )


def table_rows(
    spark: SparkSession, upstream: UpstreamConfig, initial: InitialLoadConfig, table: UpstreamTable, tso: int
) -> DataFrame:
    """The table's rows typed as its Delta columns (decoded on the executors), one task per predicate."""
    schema = table.schema
    properties = {
        "driver": DRIVER,
        "user": upstream.user,
        "password": upstream.password.reveal(),
        "fetchsize": str(initial.upstream_fetch_size),
        "customSchema": _read_types(schema),
        **session_settings(table.tidb, tso),
    }
    raw = spark.read.jdbc(
        jdbc_url(upstream), select_sql(schema, table.split), predicates=list(table.predicates),
        properties=properties,
    )  # fmt: skip
    names = [c.name for c in schema.columns]
    binary = [c.kind == ColumnKind.BINARY for c in schema.columns]
    where = f"{server_name(upstream)} {schema.schema_name}.{schema.name} at {tso}"
    ddl = f"{schema.spark_ddl.replace(' NOT NULL', '')}, {quote_ident(COMMIT_TS)} BIGINT"

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stats = DecodeStats()
        seen = 0
        for batch in batches:
            rows = ParsedRows(
                ops=pa.array(["PUT"] * batch.num_rows, pa.string()),
                lines=pa.array(range(seen + 1, seen + 1 + batch.num_rows), pa.int64()),
                values=[
                    _latin1(batch.column(n)) if is_binary else batch.column(n)
                    for n, is_binary in zip(names, binary, strict=True)
                ],
            )
            seen += batch.num_rows
            try:
                yield from typed_rows(rows, schema, tso, where, stats).to_batches()
            except InputError as exc:
                raise in_task(str(exc)) from None

    return raw.select(*[quote_ident(n) for n in names]).mapInArrow(decode, ddl)


def _latin1(values: pa.Array) -> pa.Array:
    """Binary values as one Latin-1 character a byte: the text form the decoder's binary columns take."""
    return pa.array([None if v is None else v.decode("latin-1") for v in values.to_pylist()], pa.string())


@contextmanager
def upstream_read_errors(upstream: UpstreamConfig, table: str, tso: int) -> Iterator[None]:
    """A JDBC failure inside Spark reading `table` as an UpstreamError naming the server and the table:
    UpstreamUnavailable (worth another try) when the connection was refused, lost, reset or timed out."""
    try:
        yield
    except (InputError, UpstreamError):
        raise
    except Exception as exc:  # Py4J / Spark exceptions carry the JVM message as text
        found = _JDBC_FAILURE.search(str(exc))
        if found is None or from_task(exc) is not None:
            raise
        reason = scrub(found.group(2).strip()[:300], upstream)
        if found.group(1) in _CONNECTION_FAILURES:
            raise UpstreamUnavailable(
                f"{server_name(upstream)}: connection lost while reading {table} at TSO {tso}: {reason}"
            ) from None
        raise UpstreamError(
            f"{server_name(upstream)}: reading {table} at TSO {tso} failed: {reason}"
        ) from None
