"""Target tables by name: each Delta table registered in the Spark catalog as `<prefix><db>.<table>`.

The folders are the truth and the catalog follows them: a table is registered as an EXTERNAL Delta table
over its folder when the apply stage creates it, re-registered under its new name after a rename, and
unregistered when its folder goes (drop table; a database whose last table went is dropped too, unless
something else lives in it). A truncate keeps the folder, so the entry stands. Every step is idempotent,
and each run starts and ends with a sweep of the whole warehouse, so a run killed between a commit and
its registration is made whole by the next one.

Only entries that point at the job's own folders are ever dropped; a name held by a managed table or a
view is a conflict, never overwritten. A session without Hive support (a spark-submit session without
`spark.sql.catalogImplementation=hive`) registers into its in-memory catalog and says so once.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidelake import conventions, delta, fs
from tidelake.errors import ConcurrentRunError, ConfigError, TidelakeError
from tidelake.sqlident import quote_ident, quote_qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.config import TargetConfig

SESSION_CATALOG = "spark_catalog"
_LOCK = threading.Lock()  # tables apply on threads; one catalog change at a time keeps CREATE DATABASE simple
_told_in_memory: set[int] = set()


class CatalogConflict(ConfigError):
    """A table cannot be registered under its name: held by something not this job's, or refused."""


class MetastoreUnreachable(ConfigError):
    """The metastore (a service, or its database over the network) does not answer: exit 2 naming it."""


# A metastore that does not answer, in the Hive client's failure text (JDBC to its database, Thrift to a
# service): a refused or reset connection, a timeout, SQLSTATE 08xxx (connection exceptions).
_METASTORE_UNREACHABLE = (
    "Connection refused", "ConnectException", "SocketTimeoutException", "SocketException",
    "SQLNonTransientConnectionException", "SQLTransientConnectionException", "SQLSTATE: 08",
    "Communications link failure", "TTransportException", "Could not connect to meta store",
    "Unable to instantiate org.apache.hadoop.hive.ql.metadata.SessionHiveMetaStoreClient",
)  # fmt: skip


REGISTERED_NEXT_RUN = (
    "what this run committed to Delta stays, whole and tagged (the folders are the truth); the next run "
    "registers the tables once it answers"
)


def metastore_address(spark: SparkSession) -> str:
    """The metastore a Hive session uses, for messages: the service's URI, else its database's JDBC URL
    (without `;user=`/`;password=` and other attributes), else "the embedded metastore"."""
    uris = spark.conf.get("spark.hadoop.hive.metastore.uris", "") or ""
    if uris:
        return f"metastore {uris}"
    url = spark.conf.get("spark.hadoop.javax.jdo.option.ConnectionURL", "") or ""
    return f"metastore database {url.split(';')[0]}" if url else "the embedded metastore"


@contextmanager
def metastore_calls(spark: SparkSession, then: str) -> Iterator[None]:
    """Turn a metastore that does not answer, inside the block, into MetastoreUnreachable naming it and
    saying `then` (what it means for the run's tables)."""
    try:
        yield
    except TidelakeError:
        raise
    except Exception as exc:  # Py4J carries the Hive client's failure as text
        text = str(exc)
        if not metastore_unreachable(text) or _embedded(spark):
            raise
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]
        raise MetastoreUnreachable(
            f"{metastore_address(spark)} cannot be reached ({first}): {then}"
        ) from None


def metastore_unreachable(failure: str) -> bool:
    """Whether a Hive client's failure text says the metastore did not answer."""
    return any(marker in failure for marker in _METASTORE_UNREACHABLE)


def embedded_derby(url: str, uris: str) -> bool:
    """Derby inside this JVM (`jdbc:derby:;databaseName=...`), not Derby's network server
    (`jdbc:derby://host:port/...`) nor a metastore service (`uris`)."""
    return not uris and url.startswith("jdbc:derby:") and not url.startswith("jdbc:derby://")


def _embedded(spark: SparkSession) -> bool:
    return embedded_derby(
        spark.conf.get("spark.hadoop.javax.jdo.option.ConnectionURL", "") or "",
        spark.conf.get("spark.hadoop.hive.metastore.uris", "") or "",
    )


@dataclass(frozen=True)
class CatalogTarget:
    """Where tables are registered: catalog, database prefix, and the (qualified) warehouse they live in."""

    catalog: str
    prefix: str
    warehouse: str

    @classmethod
    def of(cls, target: TargetConfig) -> CatalogTarget | None:
        """From `[target]` with a qualified warehouse; None when registration is off."""
        if not target.register:
            return None
        return cls(target.catalog, target.database_prefix, target.warehouse)

    def database(self, db: str | None) -> str:
        return self.prefix + (db or conventions.DEFAULT_DATABASE)

    def qualified_database(self, db: str | None) -> str:
        return quote_qualified(self.catalog, self.database(db))

    def qualified(self, db: str | None, table: str) -> str:
        return quote_qualified(self.catalog, self.database(db), table)


@dataclass(frozen=True)
class Entry:
    """What the catalog holds under a name: EXTERNAL, MANAGED or VIEW, and where."""

    kind: str
    location: str | None
    provider: str | None

    def is_ours(self, path: str) -> bool:
        return self.kind == "EXTERNAL" and self.location is not None and same_location(self.location, path)


def same_location(a: str, b: str) -> bool:
    """Two URIs of one folder (`file:/x`, `file:///x/` and `/x` are the same)."""

    def norm(uri: str) -> str:
        uri = uri.rstrip("/")
        for prefix in ("file:///", "file://", "file:/"):
            if uri.startswith(prefix):
                return "/" + uri[len(prefix) :].lstrip("/")
        return uri

    return norm(a) == norm(b)


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def entry(spark: SparkSession, target: CatalogTarget, db: str | None, table: str) -> Entry | None:
    """The catalog's entry under the table's name, or None."""
    if target.catalog == SESSION_CATALOG:
        # The metastore's raw entry: Delta's catalog would load the table's log, which fails once the
        # folder is gone (exactly when the entry must be dropped).
        raw = spark._jsparkSession.sessionState().catalog().externalCatalog()
        database, name = target.database(db).lower(), table.lower()
        if not raw.databaseExists(database) or not raw.tableExists(database, name):
            return None
        found = raw.getTable(database, name)
        kind = str(found.tableType().name())
        provider = found.provider()
        return Entry(
            kind,
            str(found.location().toString()) if kind != "VIEW" else None,
            str(provider.get()) if provider.isDefined() else None,
        )
    return _entry_in(spark, target.qualified_database(db), table)


def _entry_in(spark: SparkSession, database: str, table: str) -> Entry | None:
    """Another catalog's entry through SQL; one that cannot be described (its folder gone) counts as
    not ours, so it is never dropped by us."""
    from pyspark.errors import AnalysisException

    if not spark.sql(f"SHOW TABLES IN {database} LIKE {sql_string(table)}").take(1):
        return None
    try:
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {database}.{quote_ident(table)}").collect()
    except AnalysisException:
        return Entry("UNKNOWN", None, None)
    info = {r["col_name"]: r["data_type"] for r in rows}
    return Entry(str(info.get("Type", "")).upper(), info.get("Location"), info.get("Provider"))


def register(spark: SparkSession, target: CatalogTarget, db: str | None, table: str, path: str) -> bool:
    """Register the Delta table at `path` under its name (re-pointing our own stale entry); True if changed."""
    from pyspark.errors import AnalysisException

    _say_if_in_memory(spark, target)
    name = target.qualified(db, table)
    with _LOCK, metastore_calls(spark, REGISTERED_NEXT_RUN):
        found = entry(spark, target, db, table)
        if found is not None and found.is_ours(path):
            return False
        if found is not None:
            if found.kind != "EXTERNAL" or (found.provider or "").lower() != "delta":
                raise CatalogConflict(
                    f"catalog name {name} is held by a {found.kind.lower()} "
                    f"{found.provider or ''} entry, not an external Delta table: cannot register {path} "
                    "there (choose another [target] database_prefix, or drop that entry)"
                )
            spark.sql(f"DROP TABLE IF EXISTS {name}")  # external: the old folder is left alone
        try:
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {target.qualified_database(db)}")
            spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING DELTA LOCATION {sql_string(path)}")
        except AnalysisException as exc:  # a name the Hive metastore refuses (a space, `$`, `-`)
            # TiDB allows names the metastore does not: the table is still backfilled and readable by
            # its path, so this is a note, not a failed run.
            first_line = str(exc).strip().splitlines()[0]
            sys.stderr.write(f"catalog: {path} is not registered as {name}: {first_line}\n")
            return False
    return True


def unregister(spark: SparkSession, target: CatalogTarget, db: str | None, table: str, path: str) -> bool:
    """Drop the entry under the table's name if it points at `path` (the folder that went); True if dropped.
    The database goes too when that leaves it empty."""
    name = target.qualified(db, table)
    with _LOCK, metastore_calls(spark, REGISTERED_NEXT_RUN):
        found = entry(spark, target, db, table)
        if found is None or not found.is_ours(path):
            return False
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        _drop_if_empty(spark, target, db)
    return True


def sync_names(spark: SparkSession, target: CatalogTarget, names: Iterable[tuple[str | None, str]]) -> None:
    """Make the catalog true for these table names: registered where a Delta table is, not where none is."""
    for db, table in names:
        path = conventions.table_path(target.warehouse, db, table)
        if delta.is_delta_table(spark, path):
            register(spark, target, db, table, path)
        else:
            unregister(spark, target, db, table, path)


def open_metastore(spark: SparkSession, target: CatalogTarget) -> None:
    """Open the metastore before anything is written. An embedded (Derby) one serves one process at a time:
    a run that finds it open in another process (another run, `backfill maintain`, a spark-sql shell) waits
    for it, up to `TIDELAKE_METASTORE_WAIT` seconds (300), then stops with exit 3."""
    wait = float(os.environ.get("TIDELAKE_METASTORE_WAIT", "300"))
    deadline = time.monotonic() + wait
    embedded = _embedded(spark)
    while True:
        try:
            with metastore_calls(spark, REGISTERED_NEXT_RUN):
                spark.sql(f"SHOW DATABASES IN {quote_ident(target.catalog)}").take(1)
            return
        except Exception as exc:  # Py4J carries the Hive client's failure as text
            if not embedded or not any(marker in str(exc) for marker in _METASTORE_IN_USE):
                raise
            if time.monotonic() >= deadline:
                raise ConcurrentRunError(
                    "could not open the metastore: its embedded Derby database is open in another process "
                    f"(another run, or a spark-sql shell) and serves one at a time; waited {wait:.0f} s, "
                    "nothing was written. Run again once it is free, or give [target] metastore_uri a "
                    "metastore service for runs that overlap"
                ) from None
            time.sleep(2)


_METASTORE_IN_USE = ("Another instance of Derby", "Failed to create database", "SessionHiveMetaStoreClient")


def sync_warehouse(spark: SparkSession, target: CatalogTarget, existing: Iterable[tuple[str, str]]) -> None:
    """Register every Delta table of the warehouse (`existing`: its (db, table) names) and unregister
    entries of the job's databases that point at folders of the warehouse that are gone."""
    open_metastore(spark, target)
    present = set(existing)
    for db, table in sorted(present):
        register(spark, target, db, table, conventions.table_path(target.warehouse, db, table))
    for folder in fs.list_dir(spark, target.warehouse):
        if not folder.is_dir or folder.name.startswith(("_", ".")):
            continue
        db = folder.name
        with metastore_calls(spark, REGISTERED_NEXT_RUN):
            if not spark.catalog.databaseExists(target.qualified_database(db)):
                continue
            listing = spark.sql(f"SHOW TABLES IN {target.qualified_database(db)}").collect()
        for listed in listing:
            table = listed["tableName"]
            if listed["isTemporary"] or (db, table) in present:
                continue
            unregister(spark, target, db, table, conventions.table_path(target.warehouse, db, table))


def _drop_if_empty(spark: SparkSession, target: CatalogTarget, db: str | None) -> None:
    database = target.qualified_database(db)
    if not spark.sql(f"SHOW TABLES IN {database}").filter("NOT isTemporary").take(1):
        spark.sql(f"DROP DATABASE IF EXISTS {database} RESTRICT")


def _say_if_in_memory(spark: SparkSession, target: CatalogTarget) -> None:
    """Note once per session that tables go into an in-memory catalog (gone when the session stops)."""
    if target.catalog != SESSION_CATALOG or id(spark.sparkContext) in _told_in_memory:
        return
    _told_in_memory.add(id(spark.sparkContext))
    if spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
        sys.stderr.write(
            "backfill: note: this Spark session has no Hive support, so tables are registered in its "
            "in-memory catalog only (start it with spark.sql.catalogImplementation=hive and a metastore "
            "to keep them; docs/operations.md: Tables by name)\n"
        )
