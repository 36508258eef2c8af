"""The private delta-spark classes `tidelake.delta_internals` drives are there on the pinned delta-spark, and
commits go through them only on a verified version: an upgrade fails here, naming what moved, before
anything silently commits differently."""

from __future__ import annotations

import pytest

from backfill import sink
from tidelake import delta, delta_internals

pytestmark = pytest.mark.spark


def test_every_private_class_and_method_the_sink_uses_is_there(spark) -> None:
    version = delta_internals.jvm_delta_version(spark)
    missing = delta_internals.missing_internals(spark)
    assert missing == [], (
        f"delta-spark {version} moved internals that tidelake/delta_internals.py drives: {missing}. Read "
        "Delta's source for their new shape, adapt delta_internals.py, run tests/spark/test_delta_sink.py "
        "and the kill-point drills, then add the version to VERIFIED_DELTA_VERSIONS"
    )


def test_the_jvms_delta_spark_is_a_verified_one(spark) -> None:
    version = delta_internals.jvm_delta_version(spark)
    assert version in delta_internals.VERIFIED_DELTA_VERSIONS, (
        f"delta-spark {version} on the class path is not one whose internals tidelake verified "
        f"({sorted(delta_internals.VERIFIED_DELTA_VERSIONS)}): commits would take Delta's slower public "
        "writers. Check delta_internals.USED_INTERNALS against Delta's source, then list the version"
    )
    assert delta_internals.commits_usable(spark)


def test_the_probe_can_fail(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    moved = {**delta_internals.USED_INTERNALS, "org.apache.spark.sql.delta.DeltaLog": ("startTxnMoved",)}
    monkeypatch.setattr(delta_internals, "USED_INTERNALS", moved)
    assert delta_internals.missing_internals(spark) == ["org.apache.spark.sql.delta.DeltaLog.startTxnMoved"]


@pytest.mark.parametrize("change", ["append", "advance", "rewrite", "replace"])
def test_with_internals_off_every_commit_keeps_the_contract_through_deltas_public_writers(
    spark, warehouse: str, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """What an unverified delta-spark gets: each change through Delta's public writer, tagged, with our
    userMetadata, committed once, also where the rows belong to another session than the commit's."""
    monkeypatch.setenv(delta_internals.INTERNALS_ENV, "off")
    path = f"{warehouse}/t"
    spark.createDataFrame([(1, "a")], "k INT, v STRING").write.format("delta").save(path)
    more = spark.createDataFrame([(2, "b")], "k INT, v STRING")
    changes = {
        "append": sink.Append(more),
        "advance": sink.Advance(),
        "rewrite": sink.Rewrite(lambda table: table.union(more)),
        "replace": sink.Replace(lambda table: table.selectExpr("*", "1 AS n"), {"tidelake.x": "1"}),
    }
    txn = sink.Txn("tidelake:test", 7, {"resolved_ts": 7})
    session = spark.newSession()  # as the apply stage commits: the rows come from another session
    first = sink.commit(session, path, changes[change], txn)
    again = sink.commit(session, path, changes[change], txn)

    assert first.committed and not again.committed
    assert first.table_version == again.table_version == delta.table_version(spark, path)
    assert delta.commit_txn_version(spark, path, first.table_version, "tidelake:test") == 7
    info = delta.read_commit_info(spark, path, first.table_version) or {}
    assert info.get("userMetadata") == '{"resolved_ts":7}'
    assert info.get("operation") == "WRITE"
    expected = {"append": 2, "advance": 1, "rewrite": 2, "replace": 1}[change]
    assert spark.read.format("delta").load(path).count() == expected
    if change == "replace":
        assert delta.table_configuration(spark, path)["tidelake.x"] == "1"
        assert delta.table_column_names(spark, path) == ["k", "v", "n"]
