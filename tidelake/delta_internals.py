"""The one place that drives delta-spark's private Scala API through py4j (docs/architecture.md "The commit
contract"), for what Delta's public API does only at a cost: reading a table's log state without a Spark
job, and committing through the table's own transaction (`commit_in_own_txn`).

Delta's public writers take `(txnAppId, txnVersion)` and skip a recorded version, but they first ask their
snapshot for the recorded transactions, which rebuilds the whole table state (three Spark jobs, about a
second per table even on a tiny one), and a rewrite reads the table through Delta, which rebuilds it again.
Here the recorded versions and a small table's files come from the version's checksum file instead.

These classes change without notice between delta-spark releases. Commits go through them only on the
versions listed in `VERIFIED_DELTA_VERSIONS` (`commits_usable`; elsewhere the sink uses the public writers),
and tests/spark/test_delta_internals.py fails, naming what moved, when a class or method used here is gone.
Reads have no public counterpart without Spark jobs; a moved one fails loudly with py4j's error.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tidelake import fs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# delta-spark releases whose internals below were checked against Delta's source and the tests
VERIFIED_DELTA_VERSIONS = frozenset({"4.0.1"})
# "off": every commit through Delta's public writers, on any version (an operator's escape hatch, a bench)
INTERNALS_ENV = "TIDELAKE_DELTA_INTERNALS"
COMMIT_ATTEMPTS = 3  # a commit that loses a race is tried again this many times in all
TIMESTAMP_NTZ_FEATURE = "delta.feature.timestampNtz"
COLUMN_MAPPING = "delta.columnMapping.mode"

# The private classes and the methods of theirs this module calls (tests/spark/test_delta_internals.py).
USED_INTERNALS: Mapping[str, tuple[str, ...]] = {
    "org.apache.spark.sql.delta.DeltaLog": ("forTable", "update", "startTransaction", "checkpoint"),
    "org.apache.spark.sql.delta.Snapshot": (
        "version", "checksumOpt", "numOfFiles", "sizeInBytes", "metadata", "schema", "transactions",
        "protocol", "deltaLog", "domainMetadata",
    ),
    "org.apache.spark.sql.delta.VersionChecksum": (
        "numFiles", "tableSizeBytes", "setTransactions", "allFiles", "domainMetadata",
    ),
    "org.apache.spark.sql.delta.OptimisticTransaction": (
        "snapshot", "readTxn", "writeFiles", "commit", "readWholeTable", "filterFiles",
        "updateMetadataForTableOverwrite",
    ),
    "org.apache.spark.sql.delta.DeltaOptions": (),
    "org.apache.spark.sql.delta.DeltaOperations$Write": (),
    "org.apache.spark.sql.delta.actions.SetTransaction": ("appId", "version"),
    "org.apache.spark.sql.delta.actions.AddFile": ("path", "toPath", "remove", "deletionVector", "stats"),
    "org.apache.spark.sql.delta.actions.Action$": ("fromJson",),
    "org.apache.spark.sql.delta.actions.Metadata": ("json", "partitionColumns", "configuration"),
    "org.apache.spark.sql.delta.actions.Protocol": ("json",),
    "org.apache.spark.sql.delta.actions.DomainMetadata": ("domain", "configuration", "removed"),
}  # fmt: skip


def jvm_delta_version(spark: SparkSession) -> str:
    """The delta-spark version on the JVM's class path (its jar's manifest)."""
    cls = fs.jvm_class(spark, "org.apache.spark.util.Utils").classForName(
        "org.apache.spark.sql.delta.DeltaLog", True, False
    )
    return str(cls.getPackage().getImplementationVersion())


_usable: dict[int, bool] = {}


def commits_usable(spark: SparkSession) -> bool:
    """Whether commits may go through the table's own transaction: the JVM's delta-spark is a verified one
    and the environment does not turn them off (`INTERNALS_ENV`)."""
    if os.environ.get(INTERNALS_ENV, "").lower() == "off":
        return False
    key = id(spark.sparkContext)
    if key not in _usable:
        version = jvm_delta_version(spark)
        _usable[key] = version in VERIFIED_DELTA_VERSIONS
        if not _usable[key]:
            log.warning(
                "delta-spark %s is not one whose internals tidelake verified (%s): every commit goes "
                "through Delta's public writers, slower per table",
                version, ", ".join(sorted(VERIFIED_DELTA_VERSIONS)),
            )  # fmt: skip
    return _usable[key]


def missing_internals(spark: SparkSession) -> list[str]:
    """`USED_INTERNALS` that the JVM's delta-spark lacks (class, or class.method), by reflection."""
    utils = fs.jvm_class(spark, "org.apache.spark.util.Utils")
    missing = []
    for name, methods in USED_INTERNALS.items():
        try:
            cls = utils.classForName(name, False, False)
        except Exception:  # py4j wraps ClassNotFoundException
            missing.append(name)
            continue
        have = {str(m.getName()) for m in cls.getMethods()}
        missing.extend(f"{name}.{method}" for method in methods if method not in have)
    return missing


def delta_log(spark: SparkSession, path: str) -> Any:
    """The table's `DeltaLog` (py4j)."""
    return fs.jvm_class(spark, "org.apache.spark.sql.delta.DeltaLog").forTable(spark._jsparkSession, path)


def snapshot(spark: SparkSession, path: str) -> Any:
    """The table's latest snapshot, with no Spark job."""
    none = fs.jvm_class(spark, "scala.Option").empty()
    return delta_log(spark, path).update(False, none, none)


def write_checkpoint(spark: SparkSession, path: str) -> None:
    """Write a checkpoint of the table's log now: no SQL or Python call writes one."""
    delta_log(spark, path).checkpoint()


def file_count(snap: Any) -> int:
    """Data files in the snapshot: from the log's checksum (`numOfFiles()` alone computes the whole
    state: three Spark jobs)."""
    checksum = snap.checksumOpt()
    return int(checksum.get().numFiles() if checksum.isDefined() else snap.numOfFiles())


def table_bytes(snap: Any) -> int:
    """Bytes of the snapshot's data files, from the log's checksum where there is one."""
    checksum = snap.checksumOpt()
    return int(checksum.get().tableSizeBytes() if checksum.isDefined() else snap.sizeInBytes())


def table_configuration(snap: Any) -> dict[str, str]:
    """The snapshot's table properties."""
    conf = snap.metadata().configuration()
    keys = conf.keySet().toList()
    return {str(keys.apply(i)): str(conf.apply(keys.apply(i))) for i in range(keys.size())}


def recorded_txns(snap: Any) -> dict[str, int]:
    """App id -> transaction version, from the version's checksum file when it holds them (Delta writes
    them there): `Snapshot.transactions()` rebuilds the whole table state with three Spark jobs instead,
    seconds per table even on a tiny one."""
    checksum = snap.checksumOpt()  # `setTransactionsIfKnown()` runs the three jobs too
    known = checksum.get().setTransactions() if checksum.isDefined() else None
    if known is not None and known.isDefined():
        txns = known.get()
        return {str(t.appId()): int(t.version()) for t in (txns.apply(i) for i in range(txns.size()))}
    recorded = snap.transactions()
    return {
        str(k): int(recorded.apply(k))
        for k in (recorded.keySet().toList().apply(i) for i in range(recorded.size()))
    }


def commit_in_own_txn(
    spark: SparkSession,
    path: str,
    write: Callable[[Any], Any],
    *,
    app_id: str,
    txn_version: int,
    operation: Callable[[Any, Any], Any],
) -> int | bool | None:
    """One commit made through the table's own transaction (`DeltaLog.startTransaction`): `write(txn)`
    writes the files and returns the actions to commit, or None where this table needs Delta's own writer
    (then None is returned and nothing is written). The actions are committed as `operation(txn, actions)`
    (a `write_operation`, which may say what the actions hold) with the SetTransaction `(app_id,
    txn_version)`; the new table version, or False when the app id has the version already.

    The recorded version is read from the transaction's own snapshot's checksum (no Spark job), and the app
    id goes into the transaction's read set, as Delta's `txnVersion` puts it: a writer that records the same
    app id first makes this commit fail (ConcurrentTransactionException), and the next attempt finds the
    version recorded and writes nothing. A commit that lost a race to another writer is tried again."""
    from tidelake.sparkerrors import is_concurrent_commit

    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        txn = delta_log(spark, path).startTransaction()
        recorded = recorded_txns(txn.snapshot()).get(app_id)
        if recorded is not None and recorded >= txn_version:
            return False
        try:
            getattr(txn.readTxn(), "$plus$eq")(app_id)
            actions = write(txn)
            if actions is None:
                return None
            tagged = actions.appended(_set_transaction(spark, app_id, txn_version))
            return int(txn.commit(tagged, operation(txn, actions)))
        except Exception as exc:
            if attempt == COMMIT_ATTEMPTS or not is_concurrent_commit(exc):
                raise
    raise AssertionError("unreachable")


def _set_transaction(spark: SparkSession, app_id: str, txn_version: int) -> Any:
    """The `txn` action that records `(app_id, txn_version)`, timestamped now."""
    now = fs.jvm_class(spark, "java.lang.Long")(int(time.time() * 1000))
    some = fs.jvm_class(spark, "scala.Some")
    return fs.jvm_class(spark, "org.apache.spark.sql.delta.actions.SetTransaction")(
        app_id, txn_version, some(now)
    )


def write_operation(
    spark: SparkSession, user_metadata: str, *, overwrite: bool, predicate: str | None = None
) -> Any:
    """The WRITE operation a commit records, with our userMetadata: an append, or an overwrite (of the rows
    `predicate` selects, as Delta's writer records `replaceWhere`; of the table and its schema without)."""
    some, none = fs.jvm_class(spark, "scala.Some"), fs.jvm_class(spark, "scala.Option").empty()
    save_mode = fs.jvm_class(spark, "org.apache.spark.sql.SaveMode")
    return fs.jvm_class(spark, "org.apache.spark.sql.delta.DeltaOperations$Write")(
        save_mode.Overwrite if overwrite else save_mode.Append,
        none,
        none if predicate is None else some(predicate),
        some(user_metadata),
    )


def append_files(
    spark: SparkSession, path: str, rows: DataFrame | None, *, app_id: str, txn_version: int,
    user_metadata: str | Callable[[int], str], options: Mapping[str, str],
) -> int | bool | None:  # fmt: skip
    """Append `rows` (None: none, a commit that only records the transaction) through the table's own
    transaction (`commit_in_own_txn`'s result). `user_metadata` may be a function of the number of rows
    written (`rows_written`), for a commit that records it without the rows counted before. None, with
    nothing written, where the rows' column types are not the table's: Delta's writer checks those."""

    def write(txn: Any) -> Any:
        if rows is None:
            return _empty_seq(spark)
        if not _same_column_types(txn.snapshot().schema(), rows):
            return None
        if not options:
            return txn.writeFiles(rows._jdf)
        return txn.writeFiles(rows._jdf, fs.jvm_class(spark, "scala.Some")(_delta_options(spark, options)))

    def operation(txn: Any, actions: Any) -> Any:
        if isinstance(user_metadata, str):
            return write_operation(spark, user_metadata, overwrite=False)
        added = [a for a in _scala_list(actions) if str(a.getClass().getSimpleName()) == "AddFile"]
        counted = user_metadata(rows_written(spark, txn.snapshot(), added))
        return write_operation(spark, counted, overwrite=False)

    return commit_in_own_txn(spark, path, write, app_id=app_id, txn_version=txn_version, operation=operation)


def rows_written(spark: SparkSession, snap: Any, files: list[Any]) -> int:
    """The rows in `files` (AddFiles a transaction wrote): the sum of their statistics' `numRecords`, which
    Delta's writer collects as it writes each file; where a file has none (statistics turned off), the
    files are read back and counted."""
    counts = [_num_records(file) for file in files]
    if all(count is not None for count in counts):
        return sum(count for count in counts if count is not None)
    return read_data_files(spark, snap, files).count()


def _num_records(file: Any) -> int | None:
    """An AddFile's `numRecords` statistic, None when it has none."""
    stats = file.stats()
    found = json.loads(str(stats)).get("numRecords") if stats else None
    return int(found) if found is not None else None


def rewrite_files(
    spark: SparkSession, path: str, new_rows: Callable[[DataFrame], DataFrame], *, app_id: str,
    txn_version: int, user_metadata: str,
) -> int | bool | None:  # fmt: skip
    """Replace a small table's rows with `new_rows(its rows)` in one overwrite commit through its own
    transaction. Its rows are read straight from the Parquet files its checksum lists (`checksum_files`); a
    table whose checksum lists none gives None, with nothing written. The whole table counts as read, so a
    writer that changes its rows in between makes Delta refuse the commit and the next attempt reads it
    again; rows another writer only appends in between stay beside the rewritten ones, as with Delta's own
    overwrite."""

    def write(txn: Any) -> Any:
        snap = txn.snapshot()
        files = checksum_files(snap)
        if files is None:
            return None
        txn.readWholeTable()
        actions = txn.writeFiles(new_rows(read_data_files(spark, snap, files))._jdf)
        for file in files:
            actions = actions.appended(file.remove())
        return actions

    return commit_in_own_txn(
        spark, path, write, app_id=app_id, txn_version=txn_version,
        operation=lambda _txn, _actions: write_operation(
            spark, user_metadata, overwrite=True, predicate="true"
        ),
    )  # fmt: skip


def replace_files(
    spark: SparkSession, path: str, new_rows: Callable[[DataFrame], DataFrame], *,
    properties: Mapping[str, str], app_id: str, txn_version: int, user_metadata: str,
) -> int | bool | None:  # fmt: skip
    """What `mode("overwrite").option("overwriteSchema", "true")` does, through the table's own transaction:
    its rows replaced by `new_rows(its rows)`, its schema by theirs and `properties` set, in one commit;
    without the writer's two rebuilds of the table state (1.6 s of a schema change on a small table), and
    keeping the table's clustering, which Delta's writer clears. The schema is stored nullable, as Delta's
    writer stores it. None, with nothing written, for tables with partition columns or column mapping and
    those clustered by a column the new schema drops or retypes."""

    def write(txn: Any) -> Any:
        snap = txn.snapshot()
        table = json.loads(snap.metadata().json())["metaData"]
        if table.get("partitionColumns") or table["configuration"].get(COLUMN_MAPPING, "none") != "none":
            return None
        files = checksum_files(snap)
        plain = files is not None
        if files is None:  # not listed: the table state is rebuilt, once (Delta's writer does it twice)
            files = _scala_list(txn.filterFiles())
            plain = _plain_parquet(snap, files)
        current = read_data_files(spark, snap, files) if plain else _delta_rows(spark, path, snap)
        rows = new_rows(current)
        schema = rows._jdf.schema().asNullable()
        if not _clustering_survives(snap, schema):
            return None
        txn.updateMetadataForTableOverwrite(_metadata_with(spark, table, schema, properties))
        txn.readWholeTable()
        actions = txn.writeFiles(rows._jdf)
        for file in files:
            actions = actions.appended(file.remove())
        return actions

    return commit_in_own_txn(
        spark, path, write, app_id=app_id, txn_version=txn_version,
        operation=lambda _txn, _actions: write_operation(spark, user_metadata, overwrite=True),
    )  # fmt: skip


def _delta_options(spark: SparkSession, options: Mapping[str, str]) -> Any:
    """Delta's write options (`DeltaOptions`) for a transaction's `writeFiles`."""
    java_map = fs.jvm_class(spark, "java.util.HashMap")()
    for key, value in options.items():
        java_map.put(key, value)
    scala_map = fs.jvm_class(spark, "org.apache.spark.api.python.PythonUtils").toScalaMap(java_map)
    sql_conf = spark._jsparkSession.sessionState().conf()
    return fs.jvm_class(spark, "org.apache.spark.sql.delta.DeltaOptions")(scala_map, sql_conf)


def _metadata_with(
    spark: SparkSession, table: Mapping[str, Any], schema: Any, properties: Mapping[str, str]
) -> Any:
    """The Metadata action `table` (its JSON) with `schema` (a JVM StructType) and `properties` added. The
    first TIMESTAMP_NTZ column needs Delta's timestampNtz feature, which Delta adds by itself only to a new
    table: the property that asks for it goes in too (Delta moves it from the properties to the protocol)."""
    configuration = {**table.get("configuration", {}), **properties}
    if "timestamp_ntz" in str(schema.simpleString()):
        configuration[TIMESTAMP_NTZ_FEATURE] = "supported"
    action = {"metaData": {**table, "schemaString": schema.json(), "configuration": configuration}}
    return fs.jvm_class(spark, "org.apache.spark.sql.delta.actions.Action").fromJson(json.dumps(action))


def _clustering_survives(snap: Any, schema: Any) -> bool:
    """Whether the table's clustering columns are all in `schema` with their types (the checksum lists the
    table's domain metadata; else the table state has it)."""
    checksum = snap.checksumOpt()
    listed = checksum.get().domainMetadata() if checksum.isDefined() else None
    domains = listed.get() if listed is not None and listed.isDefined() else snap.domainMetadata()
    old = {str(f.name()): str(f.dataType().json()) for f in snap.schema().fields()}
    new = {str(f.name()): str(f.dataType().json()) for f in schema.fields()}
    for domain in _scala_list(domains):
        if str(domain.domain()) != "delta.clustering" or domain.removed():
            continue
        for column in json.loads(str(domain.configuration())).get("clusteringColumns", []):
            if len(column) != 1 or column[0] not in new or new[column[0]] != old.get(column[0]):
                return False
    return True


# Reader features under which a data file holds its rows as a plain Parquet read of it gives them (deletion
# vectors: only where no file has one). Column mapping renames the files' columns, type widening changes
# their types: such tables are read through Delta.
PLAIN_PARQUET_READER_FEATURES = frozenset(
    {"deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}
)


def checksum_files(snap: Any) -> list[Any] | None:
    """The snapshot's data files (AddFile) as its checksum lists them, where a plain Parquet read of them
    gives the table's rows; else None. Delta lists a small table's files in each version's checksum (below
    `allFilesInCrc.thresholdNumFiles`, 50), kept up commit by commit, but not in that of a commit that
    changes the schema (nor in the next one's, when the list would take a state rebuild)."""
    checksum = snap.checksumOpt()
    listed = checksum.get().allFiles() if checksum.isDefined() else None
    if listed is None or not listed.isDefined():
        return None
    files = _scala_list(listed.get())
    return files if _plain_parquet(snap, files) else None


def _plain_parquet(snap: Any, files: list[Any]) -> bool:
    """Whether a plain Parquet read of `files` (the snapshot's) gives the table's rows."""
    protocol = json.loads(snap.protocol().json())["protocol"]
    features = set(protocol.get("readerFeatures") or ())
    if protocol["minReaderVersion"] == 2 or not features <= PLAIN_PARQUET_READER_FEATURES:
        return False
    if not snap.metadata().partitionColumns().isEmpty():
        return False
    if _has_glob_characters(str(snap.deltaLog().dataPath())):
        return False
    for file in files:
        name = str(file.path())
        if file.deletionVector() is not None or _has_glob_characters(name) or _hidden_file(name):
            return False
    return True


def _scala_list(seq: Any) -> list[Any]:
    iterator = seq.iterator()
    items = []
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def read_rows(spark: SparkSession, path: str) -> DataFrame:
    """The table's rows at its latest version: read from the Parquet files its checksum lists where that
    gives them (`checksum_files`), which skips the state rebuild a Delta read starts with."""
    snap = snapshot(spark, path)
    files = checksum_files(snap)
    return _delta_rows(spark, path, snap) if files is None else read_data_files(spark, snap, files)


def _delta_rows(spark: SparkSession, path: str, snap: Any) -> DataFrame:
    """The snapshot's rows, read through Delta (at the snapshot's version)."""
    return spark.read.format("delta").option("versionAsOf", int(snap.version())).load(path)


def _has_glob_characters(path: str) -> bool:
    """Whether Spark's file source would take `path` for a pattern."""
    return any(c in path for c in "{}[]*?\\")


def _hidden_file(path: str) -> bool:
    """Whether Spark's file source would pass over the file (a name starting with `_` or `.`)."""
    return path.rsplit("/", 1)[-1].startswith(("_", "."))


def read_data_files(spark: SparkSession, snap: Any, files: list[Any]) -> DataFrame:
    """The rows of `files` (from `checksum_files`), read as Parquet with the table's schema."""
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(json.loads(snap.schema().json()))
    if not files:
        return spark.createDataFrame([], schema)
    data_path = snap.deltaLog().dataPath()
    hadoop_path = fs.jvm_class(spark, "org.apache.hadoop.fs.Path")
    return spark.read.schema(schema).parquet(*(str(hadoop_path(data_path, f.toPath())) for f in files))


def _empty_seq(spark: SparkSession) -> Any:
    """An empty Scala immutable Seq (py4j reaches no Scala companion object directly)."""
    converters = fs.jvm_class(spark, "scala.jdk.javaapi.CollectionConverters")
    return converters.asScala(fs.jvm_class(spark, "java.util.ArrayList")()).toList()


def _same_column_types(table_schema: Any, rows: DataFrame) -> bool:
    """Whether `rows` has exactly the table's columns (any order, names as Delta compares them), each of the
    table's type."""
    table = {str(f.name()).lower(): str(f.dataType().json()) for f in table_schema.fields()}
    given = {str(f.name()).lower(): str(f.dataType().json()) for f in rows._jdf.schema().fields()}
    return table == given
