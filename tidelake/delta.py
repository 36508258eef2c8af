"""Delta sink primitives: idempotent commits tagged with a transaction id, and reading them back.

Delta skips a write whose `(txnAppId, txnVersion)` is at or below the version it already recorded for
that app id, which makes a rerun of a committed window a no-op. DataFrame writes take the pair as options;
MERGE takes it only from the session conf, so `delta_transaction` sets it there for exactly one commit and
always unsets it. A MERGE whose source is empty still commits and records the transaction (checked in
tests/spark/test_delta_sink.py against the pinned Delta), so the checkpoint of an idle table advances.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelake import fs

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


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
    spark.conf.set(USER_METADATA, json.dumps(dict(metadata), sort_keys=True, separators=(",", ":")))
    try:
        yield
    finally:
        for key in (TXN_APP_ID, TXN_VERSION, USER_METADATA):
            spark.conf.unset(key)


@contextmanager
def commit_info(spark: SparkSession, metadata: Mapping[str, Any]) -> Iterator[None]:
    """Put JSON userMetadata on the next commits in this session that carry no transaction (a table's
    creation, a property change), so that every commit in our tables' logs says which step made it."""
    spark.conf.set(USER_METADATA, json.dumps(dict(metadata), sort_keys=True, separators=(",", ":")))
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA)


def is_delta_table(spark: SparkSession, path: str) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, path))


def table_version(spark: SparkSession, path: str) -> int:
    """The latest version of the Delta table at `path`."""
    return int(_snapshot(spark, path).version())


def file_count(spark: SparkSession, path: str) -> int:
    """Data files in the latest version: from the log's checksum, with no Spark job (DESCRIBE DETAIL runs one)."""
    return int(_snapshot(spark, path).numOfFiles())


def recorded_txn_version(spark: SparkSession, path: str, app_id: str) -> int | None:
    """The last transaction version recorded for `app_id` in the table's log, or None if never."""
    if not is_delta_table(spark, path):
        return None
    recorded = _snapshot(spark, path).transactions().get(app_id)
    return int(recorded.get()) if recorded.isDefined() else None


def last_commit(spark: SparkSession, path: str, app_id: str) -> DeltaCommit | None:
    """The newest commit's userMetadata, with the app id's recorded transaction version."""
    from delta.tables import DeltaTable

    if not is_delta_table(spark, path):
        return None
    (row,) = DeltaTable.forPath(spark, path).history(1).select("version", "userMetadata").collect()
    metadata = json.loads(row["userMetadata"]) if row["userMetadata"] else None
    return DeltaCommit(int(row["version"]), recorded_txn_version(spark, path, app_id), metadata)


def merge_with_txn(
    spark: SparkSession,
    path: str,
    build: Callable[[DeltaTable], DeltaMergeBuilder],
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
) -> bool:
    """Run the MERGE that `build` makes on the table, as one commit tagged `(app_id, txn_version)`.

    Returns False when Delta skipped it because the app id already reached `txn_version`.
    """
    from delta.tables import DeltaTable

    before = recorded_txn_version(spark, path, app_id)
    if before is not None and before >= txn_version:
        return False
    with delta_transaction(spark, app_id, txn_version, metadata):
        build(DeltaTable.forPath(spark, path)).execute()
    return True


def advance_txn(
    spark: SparkSession,
    path: str,
    schema: StructType,
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
) -> bool:
    """Record a transaction version on a table with no changes (an empty MERGE: no files, one commit)."""
    empty: DataFrame = spark.createDataFrame([], schema)
    return merge_with_txn(
        spark,
        path,
        lambda table: table.alias("t").merge(empty.alias("s"), "false").whenNotMatchedInsertAll(),
        app_id=app_id,
        txn_version=txn_version,
        metadata=metadata,
    )


def _snapshot(spark: SparkSession, path: str) -> Any:
    jvm = fs.jvm_view(spark)  # py4j: the Python API has no call for the log's SetTransaction actions
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    none = jvm.scala.Option.empty()
    return log.update(False, none, none)
