"""Delta primitives on Delta's public API: tagged commits, commit metadata, and the table's log read back.

Delta skips a write whose `(txnAppId, txnVersion)` is at or below the version it already recorded for
that app id, which makes a rerun of a committed window a no-op. DataFrame writes take the pair as options
(`tagged_writer`); MERGE, UPDATE and DELETE take it only from the session conf (delta-io/delta#1555), so
`delta_transaction` sets it there for exactly one commit and always unsets it (docs/architecture.md "The
commit contract"). Reads of a table's log state without a Spark job go through `tidelake.delta_internals`,
the one module on delta-spark's private classes; a commit's own log file is read as the Delta protocol
writes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelake import delta_internals, fs
from tidelake.delta_internals import COLUMN_MAPPING, COMMIT_ATTEMPTS, TIMESTAMP_NTZ_FEATURE

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["COLUMN_MAPPING", "COMMIT_ATTEMPTS", "TIMESTAMP_NTZ_FEATURE"]

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
    return int(delta_internals.snapshot(spark, path).version())


def file_count(spark: SparkSession, path: str) -> int:
    """Data files in the latest version: from the log's checksum, with no Spark job (DESCRIBE DETAIL runs one)."""
    return delta_internals.file_count(delta_internals.snapshot(spark, path))


def table_bytes(spark: SparkSession, path: str) -> int:
    """Bytes of the latest version's data files, from the log's checksum where there is one."""
    return delta_internals.table_bytes(delta_internals.snapshot(spark, path))


def table_configuration(spark: SparkSession, path: str) -> dict[str, str]:
    """The table's properties (`delta.*` and ours), from its log's metadata, with no Spark job."""
    return delta_internals.table_configuration(delta_internals.snapshot(spark, path))


def table_schema_string(spark: SparkSession, path: str) -> str:
    """The latest version's schema as Spark's simple string (`struct<k:int,...>`), from the log, no job."""
    return str(delta_internals.snapshot(spark, path).schema().simpleString())


def table_column_names(spark: SparkSession, path: str) -> list[str]:
    """The latest version's column names, from the log, with no query planned."""
    return [str(name) for name in delta_internals.snapshot(spark, path).schema().fieldNames()]


def recorded_txn_version(spark: SparkSession, path: str, app_id: str) -> int | None:
    """The last transaction version recorded for `app_id` in the table's log, or None if never."""
    if not is_delta_table(spark, path):
        return None
    return delta_internals.recorded_txns(delta_internals.snapshot(spark, path)).get(app_id)


def read_rows(spark: SparkSession, path: str) -> DataFrame:
    """The table's rows at its latest version (`delta_internals.read_rows`: without the state rebuild a
    Delta read starts with, where the log's checksum lists the files)."""
    return delta_internals.read_rows(spark, path)


def last_commit(spark: SparkSession, path: str, app_id: str) -> DeltaCommit | None:
    """The newest data commit's userMetadata (one that records a `resolved_ts`: layout and maintenance
    commits in between are passed over), with the app id's recorded transaction version."""
    if not is_delta_table(spark, path):
        return None
    snapshot = delta_internals.snapshot(spark, path)
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
    return DeltaCommit(found[0], delta_internals.recorded_txns(snapshot).get(app_id), found[1])


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


def metadata_json(metadata: Mapping[str, Any]) -> str:
    """Our commits' userMetadata: compact JSON, keys sorted."""
    return json.dumps(dict(metadata), sort_keys=True, separators=(",", ":"))


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
