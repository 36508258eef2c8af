"""Delta sink primitives: idempotent commits tagged with a transaction id, and reading them back.

Delta skips a write whose `(txnAppId, txnVersion)` is at or below the version it already recorded for
that app id, which makes a rerun of a committed window a no-op. DataFrame writes take the pair as options;
MERGE takes it only from the session conf, so `delta_transaction` sets it there for exactly one commit and
always unsets it. Appends, the commit that advances an idle table's checkpoint, the rewrite of a small
table and a DDL step's replacement of rows and schema add the SetTransaction to the table's transaction
themselves (`append_with_txn`, `rewrite_with_txn`, `replace_table_with_txn`): Delta's own check of the pair
rebuilds the table state, which costs more than the whole append or rewrite of a small table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelake import fs

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import DataFrame, SparkSession

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
OPTIMIZE_WRITE_OPTION = "optimizeWrite"  # a write option over the table's delta.autoOptimize.optimizeWrite
# false: a MERGE rewrites the files it touches even where the table has deletion vectors enabled
MERGE_DELETION_VECTORS = "spark.databricks.delta.merge.deletionVectors.persistent"
# none: a MERGE reads its source as it is; "auto" copies any source that is not a Delta scan first
# (`localCheckpoint`, one more Spark job and a copy of the rows) so that its two passes see the same rows
MERGE_MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


@dataclass(frozen=True)
class DeltaCommit:
    """What one of our commits left in a table's log."""

    table_version: int
    txn_version: int | None
    user_metadata: Mapping[str, Any] | None


@contextmanager
def delta_transaction(
    spark: SparkSession, app_id: str, txn_version: int, metadata: Mapping[str, Any]
) -> Iterator[None]:
    """Tag the next Delta commit in this session with a transaction id and JSON userMetadata."""
    if txn_version < 0:
        raise ValueError(f"transaction version must not be negative, got {txn_version}")
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(txn_version))
    spark.conf.set(USER_METADATA, metadata_json(metadata))
    try:
        yield
    finally:
        for key in (TXN_APP_ID, TXN_VERSION, USER_METADATA):
            spark.conf.unset(key)


@contextmanager
def commit_info(spark: SparkSession, metadata: Mapping[str, Any]) -> Iterator[None]:
    """Put JSON userMetadata on the next commits in this session that carry no transaction (a table's
    creation, a property change), so that every commit in our tables' logs says which step made it."""
    spark.conf.set(USER_METADATA, metadata_json(metadata))
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA)


def is_delta_table(spark: SparkSession, path: str) -> bool:
    """`DeltaTable.isDeltaTable`, called on the JVM class directly (`fs.jvm_class`): it is asked several
    times per table of a run."""
    return bool(fs.jvm_class(spark, "io.delta.tables.DeltaTable").isDeltaTable(spark._jsparkSession, path))


def table_version(spark: SparkSession, path: str) -> int:
    """The latest version of the Delta table at `path`."""
    return int(_snapshot(spark, path).version())


def file_count(spark: SparkSession, path: str) -> int:
    """Data files in the latest version: from the log's checksum, with no Spark job (DESCRIBE DETAIL runs one)."""
    snapshot = _snapshot(spark, path)
    checksum = snapshot.checksumOpt()  # `numOfFiles()` alone computes the whole state: three Spark jobs
    return int(checksum.get().numFiles() if checksum.isDefined() else snapshot.numOfFiles())


def table_bytes(spark: SparkSession, path: str) -> int:
    """Bytes of the latest version's data files, from the log's checksum where there is one."""
    snapshot = _snapshot(spark, path)
    checksum = snapshot.checksumOpt()
    return int(checksum.get().tableSizeBytes() if checksum.isDefined() else snapshot.sizeInBytes())


def table_configuration(spark: SparkSession, path: str) -> dict[str, str]:
    """The table's properties (`delta.*` and ours), from its log's metadata, with no Spark job."""
    conf = _snapshot(spark, path).metadata().configuration()
    keys = conf.keySet().toList()
    return {str(keys.apply(i)): str(conf.apply(keys.apply(i))) for i in range(keys.size())}


def table_schema_string(spark: SparkSession, path: str) -> str:
    """The latest version's schema as Spark's simple string (`struct<k:int,...>`), from the log, no job."""
    return str(_snapshot(spark, path).schema().simpleString())


def table_column_names(spark: SparkSession, path: str) -> list[str]:
    """The latest version's column names, from the log, with no query planned."""
    return [str(name) for name in _snapshot(spark, path).schema().fieldNames()]


def recorded_txn_version(spark: SparkSession, path: str, app_id: str) -> int | None:
    """The last transaction version recorded for `app_id` in the table's log, or None if never."""
    if not is_delta_table(spark, path):
        return None
    return _recorded_txns(_snapshot(spark, path)).get(app_id)


def _recorded_txns(snapshot: Any) -> dict[str, int]:
    """App id -> transaction version, from the version's checksum file when it holds them (Delta writes
    them there): `Snapshot.transactions()` rebuilds the whole table state with three Spark jobs instead,
    seconds per table even on a tiny one."""
    checksum = snapshot.checksumOpt()  # `setTransactionsIfKnown()` runs the three jobs too
    known = checksum.get().setTransactions() if checksum.isDefined() else None
    if known is not None and known.isDefined():
        txns = known.get()
        return {str(t.appId()): int(t.version()) for t in (txns.apply(i) for i in range(txns.size()))}
    recorded = snapshot.transactions()
    return {
        str(k): int(recorded.apply(k))
        for k in (recorded.keySet().toList().apply(i) for i in range(recorded.size()))
    }


def last_commit(spark: SparkSession, path: str, app_id: str) -> DeltaCommit | None:
    """The newest data commit's userMetadata (one that records a `resolved_ts`: layout and maintenance
    commits in between are passed over), with the app id's recorded transaction version."""
    if not is_delta_table(spark, path):
        return None
    snapshot = _snapshot(spark, path)
    latest = int(snapshot.version())
    found: tuple[int, Any] | None = None
    for version in range(latest, max(-1, latest - 50), -1):
        text = commit_user_metadata(spark, path, version)
        metadata = json_object(text)
        if found is None:
            found = (version, metadata)
        if metadata is not None and "resolved_ts" in metadata:
            found = (version, metadata)
            break
    assert found is not None
    return DeltaCommit(found[0], _recorded_txns(snapshot).get(app_id), found[1])


def commit_txn_version(spark: SparkSession, path: str, version: int, app_id: str) -> int | None:
    """The transaction version one commit records for `app_id` (its `txn` action), or None."""
    from tidelake import fs

    try:
        text = fs.read_text(spark, fs.join(path, "_delta_log", f"{version:020d}.json"))
    except Exception:  # py4j wraps FileNotFoundException: a cleaned-up commit
        return None
    for line in text.splitlines():
        if '"txn"' in line:
            txn = json.loads(line).get("txn")
            if isinstance(txn, dict) and txn.get("appId") == app_id:
                return int(txn["version"])
    return None


def version_before_txn(spark: SparkSession, path: str, app_id: str, txn_version: int) -> int:
    """The newest table version whose content precedes our first commit tagged `txn_version` or above:
    the table as it stood before that ts, however far later runs have taken it since. Commits without our
    tag (properties, layout, maintenance) change no rows, so any version between two tagged ones will do.
    """
    latest = table_version(spark, path)
    first_at_or_above: int | None = None
    for version in range(latest, -1, -1):
        recorded = commit_txn_version(spark, path, version, app_id)
        if recorded is None:
            continue
        if recorded < txn_version:
            return version
        first_at_or_above = version
    return latest if first_at_or_above is None else max(0, first_at_or_above - 1)


def json_object(text: str | None) -> dict[str, Any] | None:
    """A commit's userMetadata as a JSON object; None when absent, not JSON or not an object (foreign commits)."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def commit_user_metadata(spark: SparkSession, path: str, version: int) -> str | None:
    """The userMetadata of one commit, read from its log file on the driver (`DeltaTable.history()` runs
    a Spark job per call: a second a table). None when the commit has none or its file was cleaned up."""
    info = read_commit_info(spark, path, version)
    metadata = (info or {}).get("userMetadata")
    return metadata if isinstance(metadata, str) else None


def read_commit_info(spark: SparkSession, path: str, version: int) -> dict[str, Any] | None:
    """The commitInfo action of one commit (timestamp, operation, userMetadata, ...), or None."""
    from tidelake import fs

    log_file = fs.join(path, "_delta_log", f"{version:020d}.json")
    try:
        text = fs.read_text(spark, log_file)
    except Exception:  # py4j wraps FileNotFoundException: a cleaned-up commit has no metadata left
        return None
    for line in text.splitlines():
        if '"commitInfo"' in line:
            info = json.loads(line).get("commitInfo")
            return info if isinstance(info, dict) else None
    return None


TIMESTAMP_NTZ_FEATURE = "delta.feature.timestampNtz"
COLUMN_MAPPING = "delta.columnMapping.mode"
COMMIT_ATTEMPTS = 3  # a commit that loses a race is tried again this many times in all


def commit_with_txn(
    spark: SparkSession,
    path: str,
    write: Callable[[], object],
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
    session_conf: Mapping[str, str] | None = None,
) -> bool:
    """Run `write` (one Delta commit on the table: a MERGE, an overwrite) tagged `(app_id, txn_version)`,
    with `session_conf` set for it alone.

    Returns False when the app id already reached `txn_version` (before, or by a run that won a race).
    A write that lost a commit race to another writer (`backfill maintain`'s OPTIMIZE, a repair) is run
    again on the new snapshot: `write` must read the table afresh each time, and be idempotent (ours are,
    since a change never overwrites a newer row).
    """
    from tidelake.sparkerrors import is_concurrent_commit

    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        before = recorded_txn_version(spark, path, app_id)
        if before is not None and before >= txn_version:
            return False
        try:
            with (
                delta_transaction(spark, app_id, txn_version, metadata),
                session_conf_set(spark, session_conf),
            ):
                write()
            return True
        except Exception as exc:
            if attempt == COMMIT_ATTEMPTS or not is_concurrent_commit(exc):
                raise
    raise AssertionError("unreachable")


def append_with_txn(
    spark: SparkSession,
    path: str,
    rows: DataFrame | None,
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
    optimize_write: bool | None = None,
) -> bool:
    """Append `rows` (None: none) in one commit that records `(app_id, txn_version)`; False when the table
    has it already. `optimize_write` (None: as the table says) overrides the table's optimized writes for
    this write only, as Delta's `optimizeWrite` write option does.

    Delta's own tagged writes ask their snapshot for the recorded transactions, and that rebuilds the whole
    table state: three Spark jobs, about a second on a table of a few rows, paid by every table of a first
    load and by every idle table. Here the table's transaction writes the files and commits them itself
    (`_commit_in_own_txn`). Rows whose column types are not the table's go through Delta's writer, which
    checks them."""
    options = {} if optimize_write is None else {OPTIMIZE_WRITE_OPTION: str(optimize_write).lower()}

    def write(txn: Any) -> Any:
        if rows is None:
            return _empty_seq(spark)
        if not _same_column_types(txn.snapshot().schema(), rows):
            return None
        if not options:
            return txn.writeFiles(rows._jdf)
        return txn.writeFiles(rows._jdf, fs.jvm_class(spark, "scala.Some")(_delta_options(spark, options)))

    operation = _write_operation(spark, metadata, overwrite=False)
    done = _commit_in_own_txn(spark, path, write, app_id=app_id, txn_version=txn_version, operation=operation)
    if done is None:
        assert rows is not None
        writer = tagged_writer(rows, app_id=app_id, txn_version=txn_version, metadata=metadata)
        writer.options(**options).mode("append").save(path)
        return True
    return done


def _delta_options(spark: SparkSession, options: Mapping[str, str]) -> Any:
    """Delta's write options (`DeltaOptions`) for a transaction's `writeFiles`."""
    java_map = fs.jvm_class(spark, "java.util.HashMap")()
    for key, value in options.items():
        java_map.put(key, value)
    scala_map = fs.jvm_class(spark, "org.apache.spark.api.python.PythonUtils").toScalaMap(java_map)
    sql_conf = spark._jsparkSession.sessionState().conf()
    return fs.jvm_class(spark, "org.apache.spark.sql.delta.DeltaOptions")(scala_map, sql_conf)


def rewrite_with_txn(
    spark: SparkSession,
    path: str,
    new_rows: Callable[[DataFrame], DataFrame],
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
) -> bool:
    """Replace the table's rows with `new_rows(its rows)` (of the table's columns and types) in one
    overwrite commit that records `(app_id, txn_version)`; False when the table has it already.

    A small table's rows are read straight from the Parquet files its checksum lists (`_checksum_files`)
    and the commit is made through its own transaction: a Delta read would rebuild the table state first,
    and so would Delta's tagged writer (on a small table, four of the rewrite's nine Spark jobs and 1.5 of
    its 2.2 s). The whole table counts as read, so a writer that changes its rows in between makes Delta
    refuse the commit and the next attempt reads the table again; rows another writer only appends (a blind
    append) in between stay beside the rewritten ones, as with Delta's own overwrite. Any other table is read
    and written through Delta."""

    def write(txn: Any) -> Any:
        snapshot = txn.snapshot()
        files = _checksum_files(snapshot)
        if files is None:
            return None
        txn.readWholeTable()
        actions = txn.writeFiles(new_rows(_read_data_files(spark, snapshot, files))._jdf)
        for file in files:
            actions = actions.appended(file.remove())
        return actions

    operation = _write_operation(spark, metadata, overwrite=True, predicate="true")
    done = _commit_in_own_txn(spark, path, write, app_id=app_id, txn_version=txn_version, operation=operation)
    if done is not None:
        return done

    def through_delta() -> None:
        rows = new_rows(spark.read.format("delta").load(path))
        # `replaceWhere` true: a plain overwrite would drop the clustering columns
        rows.write.format("delta").mode("overwrite").option("replaceWhere", "true").save(path)

    return commit_with_txn(
        spark, path, through_delta, app_id=app_id, txn_version=txn_version, metadata=metadata
    )


def replace_table_with_txn(
    spark: SparkSession,
    path: str,
    new_rows: Callable[[DataFrame], DataFrame],
    *,
    properties: Mapping[str, str],
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
) -> bool | None:
    """Replace the table's rows with `new_rows(its rows)`, its schema with theirs and set `properties` in one
    overwrite commit that records `(app_id, txn_version)`; False when the table has it already, None where
    the table needs Delta's own writer (nothing written).

    What `mode("overwrite").option("overwriteSchema", "true")` does, without its two rebuilds of the table
    state (one for the recorded transactions, one for the files to remove: 1.6 s of a schema change on a
    small table), and keeping the table's clustering, which Delta's writer clears. The rows are read as in
    `rewrite_with_txn` (through Delta where the Parquet files alone would not give them); the schema is
    stored nullable, as Delta's writer stores it. Tables with partition columns or column mapping, and those
    clustered by a column the new schema drops or retypes, go to Delta's writer."""

    def write(txn: Any) -> Any:
        snapshot = txn.snapshot()
        table = json.loads(snapshot.metadata().json())["metaData"]
        if table.get("partitionColumns") or table["configuration"].get(COLUMN_MAPPING, "none") != "none":
            return None
        files = _checksum_files(snapshot)
        plain = files is not None
        if files is None:  # not listed: the table state is rebuilt, once (Delta's writer does it twice)
            files = _scala_list(txn.filterFiles())
            plain = _plain_parquet(snapshot, files)
        current = _read_data_files(spark, snapshot, files) if plain else _delta_rows(spark, path, snapshot)
        rows = new_rows(current)
        schema = rows._jdf.schema().asNullable()
        if not _clustering_survives(snapshot, schema):
            return None
        txn.updateMetadataForTableOverwrite(_metadata_with(spark, table, schema, properties))
        txn.readWholeTable()
        actions = txn.writeFiles(rows._jdf)
        for file in files:
            actions = actions.appended(file.remove())
        return actions

    operation = _write_operation(spark, metadata, overwrite=True)
    return _commit_in_own_txn(spark, path, write, app_id=app_id, txn_version=txn_version, operation=operation)


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


def _clustering_survives(snapshot: Any, schema: Any) -> bool:
    """Whether the table's clustering columns are all in `schema` with their types (the checksum lists the
    table's domain metadata; else the table state has it)."""
    checksum = snapshot.checksumOpt()
    listed = checksum.get().domainMetadata() if checksum.isDefined() else None
    domains = listed.get() if listed is not None and listed.isDefined() else snapshot.domainMetadata()
    old = {str(f.name()): str(f.dataType().json()) for f in snapshot.schema().fields()}
    new = {str(f.name()): str(f.dataType().json()) for f in schema.fields()}
    for domain in _scala_list(domains):
        if str(domain.domain()) != "delta.clustering" or domain.removed():
            continue
        for column in json.loads(str(domain.configuration())).get("clusteringColumns", []):
            if len(column) != 1 or column[0] not in new or new[column[0]] != old.get(column[0]):
                return False
    return True


def _commit_in_own_txn(
    spark: SparkSession,
    path: str,
    write: Callable[[Any], Any],
    *,
    app_id: str,
    txn_version: int,
    operation: Any,
) -> bool | None:
    """One commit made through the table's own transaction (`DeltaLog.startTransaction`): `write(txn)`
    writes the files and returns the actions to commit, or None where this table needs Delta's own writer
    (then None is returned and nothing is written). The actions are committed as `operation` (a
    `_write_operation`) with the SetTransaction `(app_id, txn_version)`; False when the app id has the
    version already.

    The recorded version is read from the transaction's own snapshot's checksum (no Spark job), and the app
    id goes into the transaction's read set, as Delta's `txnVersion` puts it: a writer that records the same
    app id first makes this commit fail (ConcurrentTransactionException), and the next attempt finds the
    version recorded and writes nothing. A commit that lost a race to another writer is tried again."""
    from tidelake.sparkerrors import is_concurrent_commit

    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        txn = delta_log(spark, path).startTransaction()
        recorded = _recorded_txns(txn.snapshot()).get(app_id)
        if recorded is not None and recorded >= txn_version:
            return False
        try:
            getattr(txn.readTxn(), "$plus$eq")(app_id)
            actions = write(txn)
            if actions is None:
                return None
            recorded_txn = _set_transaction(spark, app_id, txn_version)
            txn.commit(actions.appended(recorded_txn), operation)
            return True
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


def _write_operation(
    spark: SparkSession, metadata: Mapping[str, Any], *, overwrite: bool, predicate: str | None = None
) -> Any:
    """The WRITE operation a commit records, with our userMetadata: an append, or an overwrite (of the rows
    `predicate` selects, as Delta's writer records `replaceWhere`; of the table and its schema without)."""
    some, none = fs.jvm_class(spark, "scala.Some"), fs.jvm_class(spark, "scala.Option").empty()
    save_mode = fs.jvm_class(spark, "org.apache.spark.sql.SaveMode")
    return fs.jvm_class(spark, "org.apache.spark.sql.delta.DeltaOperations$Write")(
        save_mode.Overwrite if overwrite else save_mode.Append,
        none,
        none if predicate is None else some(predicate),
        some(metadata_json(metadata)),
    )


# Reader features under which a data file holds its rows as a plain Parquet read of it gives them (deletion
# vectors: only where no file has one). Column mapping renames the files' columns, type widening changes
# their types: such tables are read through Delta.
PLAIN_PARQUET_READER_FEATURES = frozenset(
    {"deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}
)


def _checksum_files(snapshot: Any) -> list[Any] | None:
    """The snapshot's data files (AddFile) as its checksum lists them, where a plain Parquet read of them
    gives the table's rows; else None. Delta lists a small table's files in each version's checksum (below
    `allFilesInCrc.thresholdNumFiles`, 50), kept up commit by commit, but not in that of a commit that
    changes the schema (nor in the next one's, when the list would take a state rebuild)."""
    checksum = snapshot.checksumOpt()
    listed = checksum.get().allFiles() if checksum.isDefined() else None
    if listed is None or not listed.isDefined():
        return None
    files = _scala_list(listed.get())
    return files if _plain_parquet(snapshot, files) else None


def _plain_parquet(snapshot: Any, files: list[Any]) -> bool:
    """Whether a plain Parquet read of `files` (the snapshot's) gives the table's rows."""
    protocol = json.loads(snapshot.protocol().json())["protocol"]
    features = set(protocol.get("readerFeatures") or ())
    if protocol["minReaderVersion"] == 2 or not features <= PLAIN_PARQUET_READER_FEATURES:
        return False
    if not snapshot.metadata().partitionColumns().isEmpty():
        return False
    if _has_glob_characters(str(snapshot.deltaLog().dataPath())):
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
    gives them (`_checksum_files`), which skips the state rebuild a Delta read starts with."""
    snapshot = _snapshot(spark, path)
    files = _checksum_files(snapshot)
    return _delta_rows(spark, path, snapshot) if files is None else _read_data_files(spark, snapshot, files)


def _delta_rows(spark: SparkSession, path: str, snapshot: Any) -> DataFrame:
    """The snapshot's rows, read through Delta (at the snapshot's version)."""
    return spark.read.format("delta").option("versionAsOf", int(snapshot.version())).load(path)


def _has_glob_characters(path: str) -> bool:
    """Whether Spark's file source would take `path` for a pattern."""
    return any(c in path for c in "{}[]*?\\")


def _hidden_file(path: str) -> bool:
    """Whether Spark's file source would pass over the file (a name starting with `_` or `.`)."""
    return path.rsplit("/", 1)[-1].startswith(("_", "."))


def _read_data_files(spark: SparkSession, snapshot: Any, files: list[Any]) -> DataFrame:
    """The rows of `files` (from `_checksum_files`), read as Parquet with the table's schema."""
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(json.loads(snapshot.schema().json()))
    if not files:
        return spark.createDataFrame([], schema)
    data_path = snapshot.deltaLog().dataPath()
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


def tagged_writer(rows: DataFrame, *, app_id: str, txn_version: int, metadata: Mapping[str, Any]) -> Any:
    """A Delta DataFrameWriter for `rows` whose commit is tagged `(app_id, txn_version)` with our
    userMetadata."""
    return (
        rows.write.format("delta")
        .option("txnAppId", app_id)
        .option("txnVersion", str(txn_version))
        .option("userMetadata", metadata_json(metadata))
    )


def metadata_json(metadata: Mapping[str, Any]) -> str:
    """Our commits' userMetadata: compact JSON, keys sorted."""
    return json.dumps(dict(metadata), sort_keys=True, separators=(",", ":"))


def merge_with_txn(
    spark: SparkSession,
    path: str,
    build: Callable[[DeltaTable], DeltaMergeBuilder],
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
    session_conf: Mapping[str, str] | None = None,
) -> bool:
    """The MERGE that `build` makes on the table, as one tagged commit (`commit_with_txn`)."""
    from delta.tables import DeltaTable

    return commit_with_txn(
        spark,
        path,
        lambda: build(DeltaTable.forPath(spark, path)).execute(),
        app_id=app_id,
        txn_version=txn_version,
        metadata=metadata,
        session_conf=session_conf,
    )


@contextmanager
def session_conf_set(spark: SparkSession, settings: Mapping[str, str] | None) -> Iterator[None]:
    """`settings` on the session for the block; what the session had before is put back after it."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings or {}}
    for key, value in (settings or {}).items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


def advance_txn(
    spark: SparkSession, path: str, *, app_id: str, txn_version: int, metadata: Mapping[str, Any]
) -> bool:
    """Record a transaction version on a table with no changes: one commit with no files
    (`append_with_txn` of no rows)."""
    return append_with_txn(spark, path, None, app_id=app_id, txn_version=txn_version, metadata=metadata)


def delta_log(spark: SparkSession, path: str) -> Any:
    """The table's `DeltaLog` (py4j): for what the Python API has no call for (the log's SetTransaction
    actions, writing a checkpoint)."""
    return fs.jvm_class(spark, "org.apache.spark.sql.delta.DeltaLog").forTable(spark._jsparkSession, path)


def _snapshot(spark: SparkSession, path: str) -> Any:
    none = fs.jvm_class(spark, "scala.Option").empty()
    return delta_log(spark, path).update(False, none, none)
