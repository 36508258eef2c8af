"""Writing one table's changes into its Delta table: create it, MERGE a segment, overwrite it for a DDL step.

Every step is one Delta commit tagged `(txnAppId, txnVersion)`, where the version says how far the table
got: a rerun skips what is already there. A MERGE never lets an older change overwrite a newer row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from backfill.codec import TableSchema
from tidelake import delta
from tidelake.conventions import COMMIT_TS, OP, TABLE_ID_PROPERTY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def delta_ddl(schema: TableSchema) -> str:
    """The Delta table's columns: the upstream columns (DESIGN.md mapping) plus `_tidb_commit_ts`."""
    return f"{schema.spark_ddl}, {quote(COMMIT_TS)} BIGINT NOT NULL"


def create_table(spark: SparkSession, path: str, schema: TableSchema) -> bool:
    """Create the empty Delta table if it does not exist yet; True if it was created."""
    if delta.is_delta_table(spark, path):
        return False
    from delta.tables import DeltaTable

    (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(spark.createDataFrame([], delta_ddl(schema)).schema)
        .property(TABLE_ID_PROPERTY, str(schema.table_id))
        .execute()
    )
    return True


def merge_changes(
    spark: SparkSession,
    path: str,
    schema: TableSchema,
    changes: DataFrame,
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
    puts_only: bool = False,
) -> bool:
    """One MERGE of decoded, collapsed changes (`_tidb_op` PUT/DELETE) keyed by the primary key.

    `puts_only` says the DELETEs were left out because the table had no rows: it must still have none.
    """
    keys = schema.output_names[:1] if schema.pk_kind == "rowid" else schema.pk_columns
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    columns = {quote(name): f"s.{quote(name)}" for name in (*schema.output_names, COMMIT_TS)}
    newer = f"s.{quote(COMMIT_TS)} >= t.{quote(COMMIT_TS)}"

    def build(table: Any) -> Any:
        return (
            table.alias("t")
            .merge(changes.alias("s"), on)
            .whenMatchedDelete(condition=f"s.{quote(OP)} = 'DELETE' AND {newer}")
            .whenMatchedUpdate(condition=f"s.{quote(OP)} = 'PUT' AND {newer}", set=columns)
            .whenNotMatchedInsert(condition=f"s.{quote(OP)} = 'PUT'", values=columns)
        )

    empty = has_no_rows(spark, path)
    if puts_only and not empty:
        raise RuntimeError(f"{path}: rows appeared while this run decoded its changes; run again")
    if empty:
        # First load: nothing to match against, so the PUTs are appended in one tagged commit (a MERGE
        # would join against nothing and cost several times as much) and the DELETEs have nothing to remove.
        rows = changes.filter(f"{quote(OP)} = 'PUT'").select(
            *(quote(c) for c in (*schema.output_names, COMMIT_TS))
        )
        return _append(rows, path, app_id=app_id, txn_version=txn_version, metadata=metadata)
    return delta.merge_with_txn(spark, path, build, app_id=app_id, txn_version=txn_version, metadata=metadata)


def has_no_rows(spark: SparkSession, path: str) -> bool:
    """True where no table exists yet, or one with no data files (just created, or truncated by a DDL step)."""
    return not delta.is_delta_table(spark, path) or delta.file_count(spark, path) == 0


def _append(
    rows: DataFrame, path: str, *, app_id: str, txn_version: int, metadata: Mapping[str, Any]
) -> bool:
    spark = rows.sparkSession
    recorded = delta.recorded_txn_version(spark, path, app_id)
    if recorded is not None and recorded >= txn_version:
        return False
    (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", str(txn_version))
        .option("userMetadata", json.dumps(dict(metadata), sort_keys=True, separators=(",", ":")))
        .save(path)
    )
    return True


def overwrite_table(
    spark: SparkSession,
    path: str,
    rows: DataFrame,
    schema: TableSchema,
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
) -> bool:
    """Replace the table's rows and schema in one commit (how a DDL step lands)."""
    recorded = delta.recorded_txn_version(spark, path, app_id)
    if recorded is not None and recorded >= txn_version:
        return False
    (
        rows.write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .option("txnAppId", app_id)
        .option("txnVersion", str(txn_version))
        .option("userMetadata", json.dumps(dict(metadata), sort_keys=True, separators=(",", ":")))
        .save(path)
    )
    spark.sql(
        f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ('{TABLE_ID_PROPERTY}' = '{schema.table_id}')"
    )
    return True
