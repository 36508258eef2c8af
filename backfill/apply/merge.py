"""Writing one table's changes into its Delta table: create it, MERGE a segment (or rewrite a small table
with it), overwrite it for a DDL step.

Every step is one Delta commit tagged `(txnAppId, txnVersion)`, where the version says how far the table
got: a rerun skips what is already there. A MERGE never lets an older change overwrite a newer row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from backfill.apply.table_layout import (
    KEY_COLUMNS_PROPERTY,
    MergeStrategy,
    clustering_columns,
    table_properties,
)
from backfill.changes.collapse import COPIES, before_columns, expand_copies
from backfill.codec import TableSchema
from backfill.sink import Append, Committed, Merge, Replace, Rewrite, Txn, commit
from backfill.tables import RowIdentity
from tidelake import delta, fs
from tidelake.config import TableLayout
from tidelake.conventions import COMMIT_TS, OP, ROWID, TABLE_ID_PROPERTY
from tidelake.errors import ConcurrentRunError, InputError
from tidelake.faults import fault_stage
from tidelake.sqlident import quote_ident as quote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

FILE_PER_PARTITION_ROWS = 50_000  # a first load in partitions this big on average writes one file each


def delta_ddl(schema: TableSchema, identity: RowIdentity = RowIdentity.HANDLE) -> str:
    """The Delta table's columns: the upstream columns (docs/architecture.md "Delta conventions") plus
    `_tidb_commit_ts`.

    `_tidb_rowid` may be NULL where the source cannot know it (identity other than the handle)."""
    ddl = schema.spark_ddl
    if schema.pk_kind == "rowid" and identity is not RowIdentity.HANDLE:
        ddl = ddl.replace(f"{quote(ROWID)} BIGINT NOT NULL", f"{quote(ROWID)} BIGINT", 1)
    return f"{ddl}, {quote(COMMIT_TS)} BIGINT NOT NULL"


def create_table(
    spark: SparkSession,
    path: str,
    schema: TableSchema,
    identity: RowIdentity = RowIdentity.HANDLE,
    layout: TableLayout | None = None,
) -> bool:
    """Create the empty Delta table if it does not exist yet (with `layout`'s properties and clustering);
    True if it was created."""
    if delta.is_delta_table(spark, path):
        return False
    from delta.tables import DeltaTable

    columns = spark.createDataFrame([], delta_ddl(schema, identity)).schema
    builder = (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(columns)
        .property(TABLE_ID_PROPERTY, str(schema.table_id))
    )
    if identity.columns(schema):  # what `backfill maintain` Z-orders an unclustered table by
        builder = builder.property(KEY_COLUMNS_PROPERTY, json.dumps(list(identity.columns(schema))))
    if layout is not None:
        for key, value in table_properties(layout).items():
            builder = builder.property(key, value)
        clustering = clustering_columns(schema, columns, layout)
        if clustering:
            builder = builder.clusterBy(*clustering)
    try:
        with delta.commit_info(spark, {"step": "create", "table_id": schema.table_id}):
            builder.execute()
    except Exception as exc:  # Py4J carries Delta's error class as text
        if not any(marker in str(exc) for marker in _NOT_A_TABLE_YET):
            raise
        if not _first_commit_appears(spark, path):
            raise InputError(
                f"{path}: the table's folder is not empty and holds no Delta table; move what is there "
                "away, or point the job at another warehouse"
            ) from None
        # another run (a scheduler overlap) was creating the table in the same moment: it carries on
        raise ConcurrentRunError(
            f"{path}: another run created this table at the same time, so this run stops before writing "
            "anything to it (run again to finish whatever is left)"
        ) from None
    return True


_NOT_A_TABLE_YET = (  # a create into a folder that is not empty: another run's create, or something else
    "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION", "DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND",
)  # fmt: skip


def _first_commit_appears(spark: SparkSession, path: str, wait_seconds: float = 30.0) -> bool:
    """Whether the table's first commit is there, or appears within `wait_seconds`: a create that found the
    folder holding only another run's `_delta_log` it had not committed to yet."""
    if not fs.exists(spark, fs.join(path, "_delta_log")):
        return False  # not a table being created: something else is in the folder
    first = fs.join(path, "_delta_log", f"{0:020d}.json")
    deadline = time.monotonic() + wait_seconds
    while not fs.exists(spark, first):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
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
    identity: RowIdentity = RowIdentity.HANDLE,
    key_bounds: tuple[Any, Any] | None = None,
    strategy: MergeStrategy = MergeStrategy.MERGE,
    puts: int | None = None,
) -> Committed:
    """One MERGE of decoded, collapsed changes (`_tidb_op` PUT/DELETE) keyed by the row identity.

    `puts_only` says the DELETEs were left out because the table had no rows: it must still have none.
    `key_bounds` (min, max of the changes' leading key column, `key_bounds()`) go into the condition as
    a target-only range, so Delta skips the files whose key statistics lie outside it.
    `strategy` (`layout.merge_strategy`): a MERGE that rewrites the files it touches even where the table has
    deletion vectors, or, for a small table, the whole table written again with the changes in one overwrite
    commit instead of the MERGE (`rewrite_table_with`).
    `puts` (the PUTs among `changes`, when known) lets a first load write a file per partition of
    `changes` (`first_load_optimize_write`).
    A table without a key takes net copies (`changes.collapse.net_copies`) instead: `_merge_multiset`.
    """
    changes = fault_stage(changes, "merge.write")
    session_conf = (
        {delta.MERGE_DELETION_VECTORS: "false"} if strategy is MergeStrategy.MERGE_REWRITING_FILES else {}
    )
    keys = identity.columns(schema)
    if not keys:
        return _merge_multiset(
            spark, path, schema, changes, app_id=app_id, txn_version=txn_version, metadata=metadata,
            session_conf=session_conf,
        )  # fmt: skip
    # The changes are persisted (stage.materialize) and computed again from the same input if a block is
    # lost, so Delta need not copy them before its MERGE reads them twice.
    session_conf[delta.MERGE_MATERIALIZE_SOURCE] = "none"
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys) + key_range_condition(keys[0], key_bounds)
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
        return commit(
            spark,
            path,
            Append(rows, first_load_optimize_write(rows, puts)),
            Txn(app_id, txn_version, metadata),
        )
    if strategy is MergeStrategy.REWRITE_TABLE:
        return rewrite_table_with(
            spark, path, changes, keys, app_id=app_id, txn_version=txn_version, metadata=metadata
        )
    return commit(spark, path, Merge(build, session_conf), Txn(app_id, txn_version, metadata))


def first_load_optimize_write(rows: DataFrame, puts: int | None) -> bool | None:
    """False (no optimized write, whatever the table says) where `puts` rows of a first load are spread over
    partitions of `FILE_PER_PARTITION_ROWS` rows or more on average: each partition is then a file of a
    fair size, as the decode stage sizes its tasks, and the optimized write's shuffle would only funnel a
    big table into one writing task (bench/NOTES.md "Optimized write on a first load"). None (the table
    decides) for rows in many small partitions."""
    if not puts:
        return None
    partitions = rows._jdf.rdd().getNumPartitions()  # planned only: no Spark job
    return False if puts >= FILE_PER_PARTITION_ROWS * partitions else None


def merged_rows(table: DataFrame, changes: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The table's rows with `changes` applied as `merge_changes`'s MERGE applies them: a change at or
    after a row's commit ts replaces it (PUT) or removes it (DELETE), an older one leaves it as it is, a
    PUT of a new key adds a row. One change per key (collapsed); the result has the table's columns."""
    from pyspark.sql import functions as F

    # SQL text, parsed by Spark in one call each: built from Column objects, a table of 15 columns took ~100
    # py4j calls, a tenth of a small table's rewrite.
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    change_ts, row_ts = f"s.{quote(COMMIT_TS)}", f"t.{quote(COMMIT_TS)}"
    change_wins = f"({change_ts} IS NOT NULL AND ({row_ts} IS NULL OR {change_ts} >= {row_ts}))"
    joined = table.alias("t").join(changes.alias("s"), F.expr(on), "full_outer")
    return joined.where(f"NOT {change_wins} OR s.{quote(OP)} = 'PUT'").selectExpr(
        *(
            f"CAST(CASE WHEN {change_wins} THEN s.{quote(field.name)} ELSE t.{quote(field.name)} END "
            f"AS {field.dataType.simpleString()}) AS {quote(field.name)}"
            for field in table.schema.fields
        )
    )


def rewrite_table_with(
    spark: SparkSession,
    path: str,
    changes: DataFrame,
    keys: Sequence[str],
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
) -> Committed:
    """The table written again whole with the changes merged in (`merged_rows`), one tagged overwrite
    commit (`sink.Rewrite`). For a small table that is one pass over it where a MERGE makes two,
    with fewer Spark jobs and much less planning on the driver; the table's properties, clustering and schema
    stay. A writer that commits in between loses nothing: Delta checks the rewrite's read of the table
    against later commits as it checks a MERGE's.

    Where the join's shuffle has one partition anyway (`tidelake.spark.SMALL_WORK`, a step of few changes),
    both sides are read into one partition and joined where they are: one stage, no shuffle (60-70 of a
    small table's 600 ms)."""

    def new_rows(table: DataFrame) -> DataFrame:
        if spark.conf.get("spark.sql.shuffle.partitions") == "1":
            return merged_rows(table.coalesce(1), changes.coalesce(1), keys)
        return merged_rows(table, changes, keys)

    return commit(spark, path, Rewrite(new_rows), Txn(app_id, txn_version, metadata))


# Leading key types whose bounds are written as SQL literals exactly (no time zone, no float rounding).
PRUNABLE_KEY_TYPES = ("byte", "short", "integer", "long", "decimal", "string", "date")


def key_range_columns(changes: DataFrame, keys: tuple[str, ...]) -> str | None:
    """The leading key column whose bounds can prune a MERGE of `changes`, or None."""
    if not keys:
        return None
    kind = changes.schema[keys[0]].dataType.typeName()
    return keys[0] if kind.startswith(PRUNABLE_KEY_TYPES) else None


def key_bound_aggregates(column: str) -> list[Any]:
    """min and max of the key column (NULL keys ignored), for the job that materializes the changes."""
    from pyspark.sql import functions as F

    return [F.min(F.col(quote(column))).alias("_key_lo"), F.max(F.col(quote(column))).alias("_key_hi")]


def arrow_key_bounds(changes: pa.Table, column: str) -> tuple[Any, Any]:
    """`key_bound_aggregates` of changes held on the driver, before the before/after key rule: a key a
    change moves away from (`changes.collapse.before_columns`) is deleted too, so it counts. Arrow orders
    strings by their UTF-8 bytes, as Spark does."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = [name for name in (column, *before_columns([column])) if name in changes.column_names]
    values = pa.chunked_array(
        [chunk for name in names for chunk in changes.column(name).chunks], changes.schema.field(column).type
    )
    bounds = pc.min_max(values)
    return bounds["min"].as_py(), bounds["max"].as_py()


def key_range_condition(column: str, bounds: tuple[Any, Any] | None) -> str:
    """` AND t.k BETWEEN lo AND hi`, or nothing. Exact: every pair that `t.k = s.k` matches has its key
    within the bounds of the source's keys (a NULL key matches nothing either way)."""
    if bounds is None or bounds[0] is None or bounds[1] is None:
        return ""
    lo, hi = (_sql_literal(b) for b in bounds)
    if lo is None or hi is None:
        return ""
    return f" AND t.{quote(column)} >= {lo} AND t.{quote(column)} <= {hi}"


def _sql_literal(value: Any) -> str | None:
    import datetime
    from decimal import Decimal

    if isinstance(value, bool):
        return None
    if isinstance(value, int | Decimal):
        return f"{value:f}BD" if isinstance(value, Decimal) else str(value)
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return None


def _merge_multiset(
    spark: SparkSession,
    path: str,
    schema: TableSchema,
    changes: DataFrame,
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
    session_conf: Mapping[str, str] | None = None,
) -> Committed:
    """Net copies of whole rows into a table without a key, in one tagged MERGE.

    Copies of one row cannot be told apart, so every row the window touches is cleared and written again
    with its new count: the MERGE source holds one `clear` row per touched row (matching all its copies,
    NULLs equal) and the `insert` rows, which never match. A count that would go below zero stops at zero
    (the upstream deleted a row this table never had).
    """
    from pyspark.sql import functions as F

    content = list(schema.output_names)
    columns = [*content, COMMIT_TS]
    if has_no_rows(spark, path):
        rows = expand_copies(changes.filter(F.col(OP) == "PUT").select(*map(quote, columns), COPIES))
        return commit(spark, path, Append(rows), Txn(app_id, txn_version, metadata))
    target = spark.read.format("delta").load(path)
    same = [F.col(f"t.{quote(c)}").eqNullSafe(F.col(f"c.{quote(c)}")) for c in content]
    touched = changes.select(*map(quote, content)).distinct()
    existing = (
        target.alias("t")
        .join(touched.alias("c"), on=_all(same), how="left_semi")
        .groupBy(*map(quote, content))
        .agg(F.count(F.lit(1)).alias("have"), F.max(COMMIT_TS).alias("have_ts"))
    )
    delta_copies = F.when(F.col(OP) == "PUT", F.col(COPIES)).otherwise(-F.col(COPIES))
    joined = changes.alias("n").join(
        existing.alias("e"),
        on=_all([F.col(f"n.{quote(c)}").eqNullSafe(F.col(f"e.{quote(c)}")) for c in content]),
        how="left",
    )
    final = joined.select(
        *(F.col(f"n.{quote(c)}").alias(c) for c in content),
        F.greatest(F.col(f"n.{quote(COMMIT_TS)}"), F.coalesce(F.col("e.have_ts"), F.lit(0))).alias(COMMIT_TS),
        F.greatest(F.coalesce(F.col("e.have"), F.lit(0)) + delta_copies, F.lit(0))
        .cast("bigint")
        .alias(COPIES),
    )
    inserts = expand_copies(final.filter(F.col(COPIES) > 0)).withColumn("_action", F.lit("insert"))
    clears = touched.select(*map(quote, content), F.lit(0).cast("bigint").alias(COMMIT_TS)).withColumn(
        "_action", F.lit("clear")
    )
    source = clears.unionByName(inserts.select(*map(quote, columns), "_action"))
    on = " AND ".join(["s._action = 'clear'", *(f"t.{quote(c)} <=> s.{quote(c)}" for c in content)])
    values = {quote(c): f"s.{quote(c)}" for c in columns}

    def build(table: Any) -> Any:
        return (
            table.alias("t")
            .merge(source.alias("s"), on)
            .whenMatchedDelete()
            .whenNotMatchedInsert(condition="s._action = 'insert'", values=values)
        )

    return commit(spark, path, Merge(build, session_conf or {}), Txn(app_id, txn_version, metadata))


def _all(conditions: list[Any]) -> Any:
    from functools import reduce

    return reduce(lambda a, b: a & b, conditions)


def has_no_rows(spark: SparkSession, path: str) -> bool:
    """True where no table exists yet, or one with no data files (just created, or truncated by a DDL step)."""
    return not delta.is_delta_table(spark, path) or delta.file_count(spark, path) == 0


def overwrite_table(
    spark: SparkSession,
    path: str,
    new_rows: Callable[[DataFrame], DataFrame],
    schema: TableSchema,
    *,
    app_id: str,
    txn_version: int,
    metadata: Mapping[str, Any],
    identity: RowIdentity = RowIdentity.HANDLE,
    layout: TableLayout | None = None,
) -> Committed:
    """Replace the table's rows with `new_rows(its rows)`, and its schema with theirs, in one commit that also
    sets the table id (how a DDL step lands; a rename's new path is created first, with `layout`)."""
    create_table(spark, path, schema, identity, layout)
    replace = Replace(new_rows, {TABLE_ID_PROPERTY: str(schema.table_id)})
    return commit(spark, path, replace, Txn(app_id, txn_version, metadata))
