"""`backfill maintain` on small tables: OPTIMIZE, deletion-vector purge, VACUUM, log checkpoint, each a
commit tagged with our app id that checkpoints and reconcile pass over."""

from __future__ import annotations

import json
import os
import time

import pytest

from backfill.maintain import maintain_table, vacuum_retention_hours
from tests.spark.test_table_layout import APP, apply
from tidelake import delta
from tidelake.config import TableLayout, TargetConfig

pytestmark = pytest.mark.spark


def contents(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


@pytest.mark.parametrize("clustered", [True, False])
def test_maintain_compacts_purges_vacuums_and_checkpoints(spark, warehouse, clustered: bool) -> None:
    target = TargetConfig(warehouse, layout=TableLayout(cluster_by_key=clustered))
    path = f"{warehouse}/app/users"
    apply(spark, target, [(i, f"n{i}", i, "PUT", 10, i) for i in range(1, 51)], 0, 100)
    apply(spark, target, [(i, None, None, "DELETE", 110, i) for i in range(1, 11)], 100, 200)
    apply(spark, target, [(60, "new", 1, "PUT", 210, 1)], 200, 300)
    before = contents(spark, path)

    result = maintain_table(spark, path, "app.users", APP)

    assert result.error is None, result.error
    assert set(result.steps) == {"optimize", "purge", "vacuum", "checkpoint"}
    assert result.retention_hours == 168
    assert contents(spark, path) == before
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    ours = [
        json.loads(r["userMetadata"])
        for r in history
        if r["userMetadata"] and "maintain" in r["userMetadata"]
    ]
    assert ours and all(m["app_id"] == APP and m["step"] == "maintain" for m in ours)
    operations = {r["operation"] for r in history}
    assert "OPTIMIZE" in operations
    if not clustered:
        optimize = next(r for r in history if r["operation"] == "OPTIMIZE")
        assert "id" in optimize["operationParameters"]["zOrderBy"]
    assert spark.sql(f"SELECT count(*) FROM delta.`{path}`").first()[0] == 41
    assert not any(f["deletionVector"] for f in _files(spark, path)), "the purge leaves no deletion vector"
    assert any(name.endswith(".checkpoint.parquet") for name in os.listdir(f"{path}/_delta_log"))
    commit = delta.last_commit(spark, path, APP)
    assert commit is not None and commit.user_metadata["resolved_ts"] == 300 and commit.txn_version == 300


def test_vacuum_retention_covers_the_newest_recorded_checkpoint(spark, warehouse) -> None:
    path = f"{warehouse}/app/users"
    apply(spark, TargetConfig(warehouse), [(1, "a", 1, "PUT", 10, 1)], 0, 100)
    assert vacuum_retention_hours(spark, path, 168) == 168
    ten_days_later = time.time() + 10 * 24 * 3600
    assert vacuum_retention_hours(spark, path, 168, now=ten_days_later) >= 240


def test_a_failing_table_is_reported_not_raised(spark, warehouse) -> None:
    result = maintain_table(spark, f"{warehouse}/absent", "app.absent", APP)
    assert result.error is not None and not result.steps


def _files(spark, path: str) -> list:
    log = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    snapshot = log.update(False, spark._jvm.scala.Option.empty(), spark._jvm.scala.Option.empty())
    frame = snapshot.allFiles().toDF()
    from pyspark.sql import DataFrame

    return DataFrame(frame, spark).select("deletionVector").collect()
