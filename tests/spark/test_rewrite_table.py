"""A small table's changes applied by writing the table again whole (`TableLayout.rewrite_table_below`):
the same rows as the MERGE, one tagged overwrite commit, the table's layout kept, nothing lost to a
writer that commits in between."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from backfill.apply.merge import merge_changes, merged_rows, rewrite_table_with
from backfill.apply.table_layout import MergeStrategy
from backfill.codec import TableSchema
from tests.captures import users_table
from tests.spark.test_table_layout import apply, last_operation
from tidelake import delta
from tidelake.config import TableLayout, TargetConfig
from tidelake.spark import SMALL_WORK

pytestmark = pytest.mark.spark

APP = "tidelake:rewrite"
TABLE = "id BIGINT NOT NULL, name STRING, score INT, _tidb_commit_ts BIGINT NOT NULL"
CHANGES = "id BIGINT, name STRING, score INT, _tidb_commit_ts BIGINT, _tidb_op STRING"
SCHEMA = TableSchema.from_table_info(users_table(), schema_name="app")

START = [
    (1, "one", 1, 100),
    (2, "two", 2, 300),
    (3, "three", 3, 100),
    (4, "four", 4, 300),
    (5, "five", 5, 100),
]
WINDOW = [
    (1, "ONE", 10, 200, "PUT"),  # newer: replaces the row
    (2, "TWO", 20, 200, "PUT"),  # older than the row: the row stays
    (3, None, None, 200, "DELETE"),  # newer delete: the row goes
    (4, None, None, 200, "DELETE"),  # older delete: the row stays
    (5, "FIVE", 50, 100, "PUT"),  # same commit ts: the change wins, as in the MERGE
    (6, "six", 6, 200, "PUT"),  # a new key: inserted
    (7, None, None, 200, "DELETE"),  # a delete of a row the table never had: nothing
]


def table_rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def test_the_rewrite_gives_the_rows_the_merge_gives(spark, warehouse) -> None:
    """Also under the small-work settings, where both sides are joined in one partition without a shuffle."""
    changes = spark.createDataFrame(WINDOW, CHANGES)
    for name, strategy, conf in (
        ("merged", MergeStrategy.MERGE, None),
        ("rewritten", MergeStrategy.REWRITE_TABLE, None),
        ("small", MergeStrategy.REWRITE_TABLE, SMALL_WORK),
    ):
        path = f"{warehouse}/{name}"
        spark.createDataFrame(START, TABLE).write.format("delta").save(path)
        with delta.session_conf_set(spark, conf):
            assert merge_changes(
                spark, path, SCHEMA, changes, app_id=APP, txn_version=200, metadata={"step": "merge"},
                strategy=strategy,
            )  # fmt: skip
    assert last_operation(spark, f"{warehouse}/merged")["operation"] == "MERGE"
    assert last_operation(spark, f"{warehouse}/rewritten")["operation"] == "WRITE"
    expected = [
        (1, "ONE", 10, 200),
        (2, "two", 2, 300),
        (4, "four", 4, 300),
        (5, "FIVE", 50, 100),
        (6, "six", 6, 200),
    ]
    assert table_rows(spark, f"{warehouse}/merged") == expected
    assert table_rows(spark, f"{warehouse}/rewritten") == expected
    assert table_rows(spark, f"{warehouse}/small") == expected
    merged = spark.read.format("delta").load(f"{warehouse}/merged").schema
    assert spark.read.format("delta").load(f"{warehouse}/rewritten").schema == merged


def test_a_small_table_is_rewritten_in_one_tagged_commit_that_keeps_its_layout(spark, warehouse) -> None:
    target = TargetConfig(warehouse)  # the default layout: rewrite below 1mb
    path = f"{warehouse}/app/users"
    apply(spark, target, [(i, f"n{i}", i, "PUT", 10, i) for i in range(1, 201)], 0, 100)
    apply(spark, target, [(5, "five", 50, "PUT", 110, 1), (7, None, None, "DELETE", 120, 1)], 100, 200)
    commit = last_operation(spark, path)
    assert commit["operation"] == "WRITE", commit
    assert commit["metrics"]["numOutputRows"] == "199"
    last = delta.last_commit(spark, path, "tidelake:layout")
    assert last is not None and last.txn_version == 200 and last.user_metadata["resolved_ts"] == 200
    assert last.user_metadata["rows"] == {"deleted": 1, "upserted": 1}
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert list(detail["clusteringColumns"]) == ["id"] and detail["numFiles"] == 1
    assert delta.table_configuration(spark, path)["delta.enableDeletionVectors"] == "true"
    rows = {r["id"]: (r["name"], r["score"]) for r in spark.read.format("delta").load(path).collect()}
    assert len(rows) == 199 and 7 not in rows and rows[5] == ("five", 50) and rows[6] == ("n6", 6)
    version = delta.table_version(spark, path)
    apply(spark, target, [(5, "five", 50, "PUT", 110, 1)], 100, 200)  # a rerun: nothing changes
    assert delta.table_version(spark, path) == version


def test_a_table_with_change_data_feed_or_rewrites_off_is_merged(spark, warehouse) -> None:
    for name, layout in (
        ("feed", TableLayout(change_data_feed=True)),
        ("off", TableLayout(rewrite_table_below="0")),
    ):
        target = TargetConfig(f"{warehouse}/{name}", table_layouts=MappingProxyType({"app.*": layout}))
        path = f"{warehouse}/{name}/app/users"
        apply(spark, target, [(1, "a", 1, "PUT", 10, 1), (2, "b", 2, "PUT", 10, 2)], 0, 100)
        apply(spark, target, [(1, "A", 10, "PUT", 110, 1)], 100, 200)
        assert last_operation(spark, path)["operation"] == "MERGE", name
        assert table_rows(spark, path) == [(1, "A", 10, 110), (2, "b", 2, 10)]


def test_rows_another_writer_commits_during_the_rewrite_are_kept(spark, warehouse, monkeypatch) -> None:
    """The rewrite reads the table, another writer appends, then the overwrite commits: Delta must not let
    it drop the appended row (it conflicts and the rewrite runs again, or it reads the newer snapshot)."""
    from backfill.apply import merge

    path = f"{warehouse}/t"
    spark.createDataFrame(START, TABLE).write.format("delta").save(path)
    changes = spark.createDataFrame([(1, "ONE", 10, 200, "PUT")], CHANGES)
    calls = []

    def another_writer_in_between(table, *args):
        calls.append(1)
        if len(calls) == 1:
            other = spark.newSession().createDataFrame([(9, "nine", 9, 150)], TABLE)  # not our txn
            other.write.format("delta").mode("append").save(path)
        return merged_rows(table, *args)

    monkeypatch.setattr(merge, "merged_rows", another_writer_in_between)
    assert rewrite_table_with(spark, path, changes, ("id",), app_id=APP, txn_version=200, metadata={})
    after = table_rows(spark, path)
    assert (9, "nine", 9, 150) in after and (1, "ONE", 10, 200) in after and len(after) == 6
    assert delta.recorded_txn_version(spark, path, APP) == 200
