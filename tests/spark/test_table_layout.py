"""Table layout from `[target]` (properties, clustering by key, deletion vectors) and MERGE pruning by the
window's key range, through the shared apply stage."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from backfill.apply.stage import ApplyTarget, apply_window
from backfill.changes.typed import TypedRowChanges
from backfill.codec import SchemaVersion, TableSchema
from backfill.sources.base import StageClock, Window
from backfill.tables import TrackedTable
from tests.captures import users_table
from tidelake import delta
from tidelake.config import TableLayout, TargetConfig

pytestmark = pytest.mark.spark

APP = "tidelake:layout"
CHANGE_COLUMNS = "_tidb_op STRING, _tidb_commit_ts BIGINT, _tidb_line BIGINT"


def apply(spark, target: TargetConfig, rows: list[tuple], floor: int, resolved: int) -> None:
    schema = TableSchema.from_table_info(users_table(), schema_name="app")
    ddl = f"{schema.spark_ddl.replace(' NOT NULL', '')}, {CHANGE_COLUMNS}"
    w = Window(floor, resolved, (TrackedTable((SchemaVersion(0, schema),), 0),), (floor,))
    raw = {(0, 0): spark.createDataFrame(rows, ddl)}
    changes = TypedRowChanges(w.segment_keys(raw), raw)
    try:
        apply_window(spark, ApplyTarget(target.warehouse, APP, layouts=target), w, changes, StageClock())
    finally:
        changes.release()


def last_operation(spark, path: str) -> dict:
    row = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    return {"operation": row["operation"], "metrics": row["operationMetrics"], "meta": row["userMetadata"]}


def test_new_tables_get_the_layout_and_merges_use_deletion_vectors(spark, warehouse) -> None:
    # DVs at any size, and a MERGE however small the table
    target = TargetConfig(warehouse, layout=TableLayout(copy_on_write_below="0", rewrite_table_below="0"))
    path = f"{warehouse}/app/users"
    apply(spark, target, [(i, f"n{i}", i, "PUT", 10, i) for i in range(1, 201)], 0, 100)
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert list(detail["clusteringColumns"]) == ["id"]
    props = delta.table_configuration(spark, path)
    assert props["delta.enableDeletionVectors"] == "true"
    assert props["delta.autoOptimize.optimizeWrite"] == "true"
    assert props["delta.enableChangeDataFeed"] == "false"
    apply(spark, target, [(5, "five", 50, "PUT", 110, 1), (7, None, None, "DELETE", 120, 1)], 100, 200)
    merge = last_operation(spark, path)
    assert merge["operation"] == "MERGE"
    assert int(merge["metrics"]["numTargetDeletionVectorsAdded"]) >= 1, merge["metrics"]
    assert int(merge["metrics"]["numTargetFilesRemoved"]) == 0, "with deletion vectors no file is rewritten"
    rows = {r["id"]: (r["name"], r["score"]) for r in spark.read.format("delta").load(path).collect()}
    assert len(rows) == 199 and 7 not in rows and rows[5] == ("five", 50) and rows[6] == ("n6", 6)


def test_a_merge_into_a_small_table_rewrites_its_files_and_keeps_deletion_vectors_on(
    spark, warehouse
) -> None:
    # the default layout (copy on write below 16mb), but a MERGE however small the table
    target = TargetConfig(warehouse, layout=TableLayout(rewrite_table_below="0"))
    path = f"{warehouse}/app/users"
    apply(spark, target, [(i, f"n{i}", i, "PUT", 10, i) for i in range(1, 201)], 0, 100)
    apply(spark, target, [(5, "five", 50, "PUT", 110, 1), (7, None, None, "DELETE", 120, 1)], 100, 200)
    merge = last_operation(spark, path)
    assert merge["operation"] == "MERGE"
    assert int(merge["metrics"]["numTargetDeletionVectorsAdded"]) == 0, merge["metrics"]
    assert int(merge["metrics"]["numTargetFilesRemoved"]) >= 1, "the touched file is rewritten"
    assert delta.table_configuration(spark, path)["delta.enableDeletionVectors"] == "true"
    assert spark.conf.get(delta.MERGE_DELETION_VECTORS, None) is None, "the setting is the MERGE's alone"
    rows = {r["id"]: (r["name"], r["score"]) for r in spark.read.format("delta").load(path).collect()}
    assert len(rows) == 199 and 7 not in rows and rows[5] == ("five", 50) and rows[6] == ("n6", 6)


def test_a_layout_change_lands_in_its_own_tagged_commit(spark, warehouse) -> None:
    plain = TargetConfig(warehouse, layout=TableLayout(deletion_vectors=False, optimize_write=False))
    path = f"{warehouse}/app/users"
    apply(spark, plain, [(1, "a", 1, "PUT", 10, 1)], 0, 100)
    assert delta.table_configuration(spark, path)["delta.enableDeletionVectors"] == "false"
    changed = TargetConfig(
        warehouse,
        layout=TableLayout(deletion_vectors=False),
        table_layouts=MappingProxyType(
            {"app.us*": TableLayout(change_data_feed=True, target_file_size="64mb")}
        ),
    )
    before = delta.table_version(spark, path)
    apply(spark, changed, [(2, "b", 2, "PUT", 110, 1)], 100, 200)
    props = delta.table_configuration(spark, path)
    assert props["delta.enableChangeDataFeed"] == "true" and props["tidelake.target_file_size"] == str(
        64 << 20
    )
    assert props["delta.autoOptimize.optimizeWrite"] == "true"  # the job left it out: the default
    assert props["delta.enableDeletionVectors"] == "false"  # the job's value under the table's
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [r["operation"] for r in history if r["version"] > before] == ["SET TBLPROPERTIES", "MERGE"]
    tagged = json.loads(next(r["userMetadata"] for r in history if r["operation"] == "SET TBLPROPERTIES"))
    assert tagged["app_id"] == APP and tagged["step"] == "properties" and "resolved_ts" not in tagged
    commit = delta.last_commit(spark, path, APP)
    assert commit is not None and commit.txn_version == 200 and commit.user_metadata["resolved_ts"] == 200
    version = delta.table_version(spark, path)
    apply(spark, changed, [(2, "b", 2, "PUT", 110, 1)], 100, 200)  # a rerun: nothing changes, no commit
    assert delta.table_version(spark, path) == version


def test_unknown_layout_keys_and_bad_values_are_rejected() -> None:
    from tidelake.configload import load_dataclass
    from tidelake.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown key 'zorder'"):
        load_dataclass(TargetConfig, {"warehouse": "w", "layout": {"zorder": True}}, "target")
    with pytest.raises(ConfigError, match="target_file_size"):
        load_dataclass(TargetConfig, {"warehouse": "w", "layout": {"target_file_size": "big"}}, "target")
    for key in ("copy_on_write_below", "rewrite_table_below"):
        with pytest.raises(ConfigError, match=key):
            load_dataclass(TargetConfig, {"warehouse": "w", "layout": {key: "1 tb"}}, "target")
    with pytest.raises(ConfigError, match="not a Delta table property"):
        load_dataclass(TargetConfig, {"warehouse": "w", "layout": {"properties": {"x": "1"}}}, "target")
    loaded = load_dataclass(
        TargetConfig, {"warehouse": "w", "table_layouts": {"db.t": {"cluster_by_key": False}}}, "target"
    )
    assert loaded.layout_of("db", "t").cluster_by_key is False
    assert loaded.layout_of("db", "other").cluster_by_key is True


def test_merge_reads_only_the_files_of_the_window_key_range(spark, warehouse) -> None:
    layout = TableLayout(deletion_vectors=False, optimize_write=False, rewrite_table_below="0")
    target = TargetConfig(warehouse, layout=layout)
    path = f"{warehouse}/app/users"
    apply(spark, target, [(1, "a", 1, "PUT", 10, 1)], 0, 100)
    # Ten files with disjoint key ranges, as clustering leaves them.
    for part in range(10):
        (
            spark.range(part * 1000 + 2, part * 1000 + 1002)
            .selectExpr("id", "'x' AS name", "CAST(id AS INT) AS score", "10L AS _tidb_commit_ts")
            .coalesce(1).write.format("delta").mode("append").save(path)
        )  # fmt: skip
    store = spark._jsc.sc().statusStore()
    stages = {s.stageId() for s in _stages(store)}
    apply(spark, target, [(4500, "u", 1, "PUT", 110, 1), (4600, None, None, "DELETE", 120, 1)], 100, 200)
    read = sum(s.inputRecords() for s in _stages(store) if s.stageId() not in stages)
    # One file of 1000 rows scanned for matches and read again to rewrite it, plus the small source;
    # without the key range the scan alone reads all 10001 rows.
    assert 0 < read < 3 * 1000, f"the MERGE read {read} target rows of 10001"
    rows = {r["id"]: r["name"] for r in spark.read.format("delta").load(path).collect()}
    assert rows[4500] == "u" and 4600 not in rows and len(rows) == 10000


def _stages(store) -> list:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    context = spark.sparkContext
    no_quantiles = context._gateway.new_array(context._jvm.double, 0)
    stages = store.stageList(None, False, False, no_quantiles, context._jvm.java.util.ArrayList())
    return [stages.apply(i) for i in range(stages.size())]


def test_key_bounds_are_spark_literals_of_the_same_value(spark) -> None:
    import datetime
    from decimal import Decimal

    from backfill.apply.merge import key_range_condition

    for value in (
        "a'b\\c",
        "ü\tx",
        "",
        2**63 - 1,
        -5,
        Decimal("12345678901234567890"),
        datetime.date(1, 1, 1),
    ):
        condition = key_range_condition("k", (value, value))
        literal = condition.split(">= ", 1)[1].split(" AND", 1)[0]
        assert spark.sql(f"SELECT {literal} AS v").first()["v"] == value, condition


def test_a_first_load_in_big_partitions_writes_a_file_each_though_the_table_optimizes_writes(
    spark, warehouse
) -> None:
    from backfill.apply.merge import FILE_PER_PARTITION_ROWS, create_table, merge_changes

    schema = TableSchema.from_table_info(users_table(), schema_name="app")
    cases = {  # name: (rows, partitions, files)
        "big": (2 * FILE_PER_PARTITION_ROWS, 2, 2),  # a file per partition: no optimized write
        "small": (300, 3, 1),  # the optimized write gathers small partitions into one file
    }
    for name, (rows, partitions, files) in cases.items():
        path = f"{warehouse}/app/{name}"
        create_table(spark, path, schema, layout=TableLayout(optimize_write=True))
        changes = spark.range(rows, numPartitions=partitions).selectExpr(
            "id", "concat('n', id) AS name", "CAST(id % 100 AS INT) AS score", "'PUT' AS _tidb_op",
            "10L AS _tidb_commit_ts",
        )  # fmt: skip
        assert merge_changes(
            spark, path, schema, changes, app_id=APP, txn_version=1, metadata={}, puts_only=True, puts=rows
        )
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
        assert delta.table_configuration(spark, path)["delta.autoOptimize.optimizeWrite"] == "true"
        assert (detail["numFiles"], spark.read.format("delta").load(path).count()) == (files, rows), name
