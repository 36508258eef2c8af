"""The Delta sink (`backfill.sink`) and its primitives against the pinned delta-spark: idempotent MERGE,
userMetadata, idle tables, the commits through the table's own transaction and through Delta's writers."""

from __future__ import annotations

import json

import pytest
from delta.tables import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException

from backfill import sink
from tidelake import delta, delta_internals

pytestmark = pytest.mark.spark

APP = "tidelake:test"


def append_with_txn(spark, path: str, rows, *, app_id: str, txn_version: int, metadata) -> bool:
    return sink.commit(spark, path, sink.Append(rows), sink.Txn(app_id, txn_version, metadata)).committed


def advance_txn(spark, path: str, *, app_id: str, txn_version: int, metadata) -> bool:
    return sink.commit(spark, path, sink.Advance(), sink.Txn(app_id, txn_version, metadata)).committed


def rewrite_with_txn(spark, path: str, new_rows, *, app_id: str, txn_version: int, metadata) -> bool:
    return sink.commit(spark, path, sink.Rewrite(new_rows), sink.Txn(app_id, txn_version, metadata)).committed


def replace_table_with_txn(
    spark, path: str, new_rows, *, properties, app_id: str, txn_version: int, metadata
):
    replace = sink.Replace(new_rows, properties)
    return sink.commit(spark, path, replace, sink.Txn(app_id, txn_version, metadata)).committed


def make_table(spark, path: str) -> None:
    spark.createDataFrame([(1, "a"), (2, "b")], "k INT, v STRING").write.format("delta").save(path)


def upsert(source):
    def build(table):
        return (
            table.alias("t")
            .merge(source.alias("s"), "t.k = s.k")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
        )

    return build


def rows(spark, path: str) -> list[tuple[int, str]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def test_same_merge_twice_commits_once(spark, warehouse: str) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    source = spark.createDataFrame([(2, "B"), (3, "c")], "k INT, v STRING")

    assert delta.merge_with_txn(spark, path, upsert(source), app_id=APP, txn_version=100, metadata={"n": 1})
    version_after_first = delta.table_version(spark, path)
    assert not delta.merge_with_txn(
        spark, path, upsert(source), app_id=APP, txn_version=100, metadata={"n": 1}
    )

    assert delta.table_version(spark, path) == version_after_first == 1
    assert rows(spark, path) == [(1, "a"), (2, "B"), (3, "c")]
    assert delta.recorded_txn_version(spark, path, APP) == 100


def test_delta_itself_skips_a_replayed_transaction(spark, warehouse: str) -> None:
    """Even without our pre-check, Delta drops a MERGE whose (app id, version) it already recorded."""
    path = f"{warehouse}/t"
    make_table(spark, path)
    source = spark.createDataFrame([(5, "e")], "k INT, v STRING")
    for _ in range(2):
        with delta.delta_transaction(spark, APP, 7, {"x": 1}):
            upsert(source)(DeltaTable.forPath(spark, path)).execute()
    assert delta.table_version(spark, path) == 1
    assert rows(spark, path).count((5, "e")) == 1


def test_version_and_user_metadata_round_trip(spark, warehouse: str) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    metadata = {
        "checkpoint_ts": 1,
        "resolved_ts": 449_000_000_000_000_001,
        "scans": ["s-1", "s-2"],
        "rows": {"up": 2},
    }
    source = spark.createDataFrame([(9, "z")], "k INT, v STRING")
    delta.merge_with_txn(
        spark, path, upsert(source), app_id=APP, txn_version=449_000_000_000_000_001, metadata=metadata
    )

    assert delta.last_commit(spark, path, APP) == delta.DeltaCommit(
        table_version=1, txn_version=449_000_000_000_000_001, user_metadata=metadata
    )
    assert delta.recorded_txn_version(spark, path, "tidelake:other-job") is None


def test_empty_batch_advances_the_recorded_version(spark, warehouse: str) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    assert advance_txn(spark, path, app_id=APP, txn_version=5, metadata={"idle": True})
    assert delta.recorded_txn_version(spark, path, APP) == 5
    assert advance_txn(spark, path, app_id=APP, txn_version=6, metadata={"idle": True})
    assert delta.recorded_txn_version(spark, path, APP) == 6
    assert rows(spark, path) == [(1, "a"), (2, "b")]
    files = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"]
    assert files == 2, "an idle commit must not add data files"


def test_session_conf_is_unset_even_when_the_merge_fails(spark, warehouse: str) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    bad = spark.createDataFrame([(1, "x")], "other INT, v STRING")
    # pyspark 4.0.1 cannot look up Delta's error classes, so Delta's analysis error reaches Python as py4j's
    # error (as an AnalysisException where it can); either names the Delta error class.
    with pytest.raises((AnalysisException, Py4JJavaError), match="DELTA_MERGE_UNRESOLVED_EXPRESSION"):
        delta.merge_with_txn(spark, path, upsert(bad), app_id=APP, txn_version=3, metadata={})
    for key in (delta.TXN_APP_ID, delta.TXN_VERSION, delta.USER_METADATA):
        assert spark.conf.get(key, None) is None
    # a later plain write is not tagged by leftovers
    spark.createDataFrame([(4, "d")], "k INT, v STRING").write.format("delta").mode("append").save(path)
    assert delta.recorded_txn_version(spark, path, APP) is None


def test_missing_table_has_no_recorded_version(spark, warehouse: str) -> None:
    assert delta.recorded_txn_version(spark, f"{warehouse}/absent", APP) is None
    assert delta.last_commit(spark, f"{warehouse}/absent", APP) is None


def test_file_count_follows_the_latest_version(spark, warehouse: str) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    described = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"]
    assert delta.file_count(spark, path) == described > 0
    spark.createDataFrame([], "k INT, v STRING").write.format("delta").mode("overwrite").save(path)
    assert delta.file_count(spark, path) == 0, "a truncating overwrite leaves no data files"


def test_concurrent_merges_in_their_own_sessions_record_their_own_transactions(spark, warehouse: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    paths = [f"{warehouse}/t{i}" for i in range(4)]
    for path in paths:
        make_table(spark, path)
    sources = [spark.createDataFrame([(i, f"v{i}")], "k INT, v STRING") for i in range(4)]

    def merge(i: int) -> bool:
        session = spark.newSession()
        return delta.merge_with_txn(
            session, paths[i], upsert(sources[i]), app_id=APP, txn_version=100 + i, metadata={"i": i}
        )

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(merge, range(4))) == [True] * 4
    for i, path in enumerate(paths):
        assert delta.last_commit(spark, path, APP) == delta.DeltaCommit(1, 100 + i, {"i": i})
        assert (i, f"v{i}") in rows(spark, path)
    assert spark.conf.get(delta.TXN_APP_ID, None) is None


def test_a_ddl_step_that_brings_the_first_datetime_column_lands(spark, warehouse: str) -> None:
    """ADD COLUMN ... DATETIME on a table without one: the overwrite needs Delta's timestampNtz feature."""
    from backfill.apply.merge import overwrite_table
    from backfill.codec import TableSchema
    from backfill.codec.tableinfo import column_info, table_info

    path = f"{warehouse}/app/t"
    spark.createDataFrame([(1,)], "id BIGINT").write.format("delta").save(path)
    schema = TableSchema.from_table_info(
        table_info(5, "t", [column_info(1, "id", "bigint", primary_key=True), column_info(2, "d", "datetime")],
                   pk="int")
    )  # fmt: skip
    rows = spark.sql("SELECT CAST(1 AS BIGINT) AS id, TIMESTAMP_NTZ'2024-01-02 03:04:05' AS d")
    assert overwrite_table(
        spark, path, lambda _: rows, schema, app_id="tidelake:t", txn_version=7, metadata={}
    )
    assert spark.read.format("delta").load(path).schema.simpleString() == "struct<id:bigint,d:timestamp_ntz>"
    assert delta.recorded_txn_version(spark, path, "tidelake:t") == 7
    renamed = f"{warehouse}/app/t_renamed"  # a RENAME TABLE step writes a new path
    assert overwrite_table(
        spark, renamed, lambda _: rows, schema, app_id="tidelake:t", txn_version=8, metadata={}
    )
    assert delta.recorded_txn_version(spark, renamed, "tidelake:t") == 8


def test_a_tagged_append_commits_once_with_its_metadata(spark, warehouse: str) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    new = spark.createDataFrame([("c", 3)], "v STRING, k INT")  # columns in another order than the table's

    assert append_with_txn(spark, path, new, app_id=APP, txn_version=9, metadata={"step": "merge"})
    assert not append_with_txn(spark, path, new, app_id=APP, txn_version=9, metadata={"step": "merge"})
    assert not append_with_txn(spark, path, new, app_id=APP, txn_version=8, metadata={"step": "merge"})

    assert rows(spark, path) == [(1, "a"), (2, "b"), (3, "c")]
    assert delta.last_commit(spark, path, APP) == delta.DeltaCommit(
        table_version=1, txn_version=9, user_metadata={"step": "merge"}
    )
    (history,) = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()
    assert (history["operation"], history["operationMetrics"]["numOutputRows"]) == ("WRITE", "1")


@pytest.mark.parametrize("path_taken", ["statistics", "no statistics", "public writer"])
def test_an_append_records_the_rows_it_wrote_in_its_metadata(
    spark, warehouse: str, monkeypatch: pytest.MonkeyPatch, path_taken: str
) -> None:
    """`metadata_of_rows`: counted from the written files' statistics, from the files read back where the
    writer collected none, or (Delta's public writer) from the rows cached before the write."""
    if path_taken == "public writer":
        monkeypatch.setenv(delta_internals.INTERNALS_ENV, "off")
    path = f"{warehouse}/t"
    make_table(spark, path)
    new = spark.range(3, 13, numPartitions=3).selectExpr("CAST(id AS INT) AS k", "'n' AS v")
    append = sink.Append(new, metadata_of_rows=lambda n: {"step": "load", "rows": n})
    conf = {"spark.databricks.delta.stats.collect": "false"} if path_taken == "no statistics" else {}
    with delta.session_conf_set(spark, conf):
        done = sink.commit(spark, path, append, sink.Txn(APP, 5))
        again = sink.commit(spark, path, append, sink.Txn(APP, 5))

    assert done.committed and done.user_metadata == {"step": "load", "rows": 10}, done
    assert not again.committed and again.user_metadata == {}
    assert delta.last_commit(spark, path, APP) == delta.DeltaCommit(
        table_version=1, txn_version=5, user_metadata={"step": "load", "rows": 10}
    )
    assert len(rows(spark, path)) == 12


def race_after_the_transaction_begins(
    spark, monkeypatch: pytest.MonkeyPatch, path: str, app_id: str, row
) -> None:
    """The next `append_with_txn` on `path` starts its transaction, then another writer appends `row`
    tagged `(app_id, 4)` before it commits."""
    real_log = delta_internals.delta_log

    class RacedLog:
        def __init__(self, log) -> None:
            self.log = log

        def startTransaction(self):  # the JVM method's name
            txn = self.log.startTransaction()
            monkeypatch.setattr(delta_internals, "delta_log", real_log)
            other = spark.createDataFrame([row], "k INT, v STRING")
            assert append_with_txn(spark, path, other, app_id=app_id, txn_version=4, metadata={})
            return txn

    monkeypatch.setattr(delta_internals, "delta_log", lambda s, p: RacedLog(real_log(s, p)))


def test_a_tagged_append_loses_its_race_to_the_same_app_id_without_writing_twice(
    spark, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer records the same (app id, version) after this append's transaction began: Delta
    refuses this commit (the app id is in its read set), and the next attempt finds the version recorded."""
    path = f"{warehouse}/t"
    make_table(spark, path)
    race_after_the_transaction_begins(spark, monkeypatch, path, APP, (3, "other"))
    mine = spark.createDataFrame([(3, "mine")], "k INT, v STRING")
    assert not append_with_txn(spark, path, mine, app_id=APP, txn_version=4, metadata={})

    assert rows(spark, path) == [(1, "a"), (2, "b"), (3, "other")]
    assert delta.table_version(spark, path) == 1


def test_a_tagged_append_beside_another_app_commits_both(
    spark, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    race_after_the_transaction_begins(spark, monkeypatch, path, "other-app", (4, "d"))
    mine = spark.createDataFrame([(3, "c")], "k INT, v STRING")
    assert append_with_txn(spark, path, mine, app_id=APP, txn_version=4, metadata={})

    assert rows(spark, path) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    recorded = [delta.recorded_txn_version(spark, path, app) for app in (APP, "other-app")]
    assert recorded == [4, 4]


def test_rows_of_other_types_go_through_deltas_own_checks(spark, warehouse: str) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    wrong = spark.createDataFrame([(3, 3)], "k INT, v INT")
    with pytest.raises((AnalysisException, Py4JJavaError), match="DELTA_FAILED_TO_MERGE_FIELDS|v"):
        append_with_txn(spark, path, wrong, app_id=APP, txn_version=1, metadata={})
    assert rows(spark, path) == [(1, "a"), (2, "b")]
    assert delta.recorded_txn_version(spark, path, APP) is None


def replace_row(spark, key: int, value: str):
    """`new_rows` for `rewrite_with_txn`: the table with `key`'s row set to `value`."""
    return lambda table: table.filter(f"k != {key}").union(
        spark.createDataFrame([(key, value)], table.schema)
    )


def through_delta_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths `rewrite_with_txn` read and wrote through Delta's own reader and writer
    (`commit_with_txn`), not from the table's checksum."""
    calls: list[str] = []
    real = delta.commit_with_txn

    def spy(spark, path, write, **kwargs):
        calls.append(path)
        return real(spark, path, write, **kwargs)

    monkeypatch.setattr(delta, "commit_with_txn", spy)
    return calls


def test_a_rewrite_reads_a_small_table_from_its_checksum_and_commits_once(
    spark, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    spark.createDataFrame([(3, "c")], "k INT, v STRING").write.format("delta").mode("append").save(path)
    files = delta.file_count(spark, path)
    through_delta = through_delta_calls(monkeypatch)

    new_rows = replace_row(spark, 2, "B")
    assert rewrite_with_txn(spark, path, new_rows, app_id=APP, txn_version=5, metadata={"step": "merge"})
    assert not rewrite_with_txn(spark, path, new_rows, app_id=APP, txn_version=5, metadata={})

    assert through_delta == []  # the files came from the checksum: rows of both appends are there
    assert rows(spark, path) == [(1, "a"), (2, "B"), (3, "c")]
    assert delta.last_commit(spark, path, APP) == delta.DeltaCommit(
        table_version=2, txn_version=5, user_metadata={"step": "merge"}
    )
    (history,) = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()
    assert (history["operation"], history["operationParameters"]) == (
        "WRITE",
        {"mode": "Overwrite", "predicate": "true"},
    )
    with open(f"{path}/_delta_log/{2:020d}.json") as commit:
        actions = [next(iter(json.loads(line))) for line in commit]
    assert (actions.count("remove"), actions.count("txn"), "add" in actions) == (files, 1, True)


def deletion_vector(spark, path: str) -> None:
    """A row deleted by a deletion vector: a plain read of the table's files would still give it."""
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    pair = spark.createDataFrame([(5, "e"), (6, "f")], "k INT, v STRING").coalesce(1)
    pair.write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE k = 5")
    (detail,) = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()
    assert detail["operationMetrics"]["numDeletionVectorsAdded"] == "1"


def column_mapping(spark, path: str) -> None:
    """A renamed column: the files still call it by its old name (and the checksum lists them again once
    rows are appended after the change)."""
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name',"
        " 'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')"
    )
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN v TO w")
    more = spark.createDataFrame([(4, "d")], "k INT, w STRING")
    more.write.format("delta").mode("append").save(path)


def no_checksum(spark, path: str) -> None:
    """The newest version's checksum file is gone (a writer that writes none)."""
    import glob
    import os

    for crc in glob.glob(f"{path}/_delta_log/*.crc"):
        os.remove(crc)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


@pytest.mark.parametrize("change", [deletion_vector, column_mapping, no_checksum])
def test_a_table_a_parquet_read_would_get_wrong_is_rewritten_through_delta(
    spark, warehouse: str, monkeypatch: pytest.MonkeyPatch, change
) -> None:
    path = f"{warehouse}/t"
    make_table(spark, path)
    change(spark, path)
    expected = sorted([*rows(spark, path), (3, "c")])
    through_delta = through_delta_calls(monkeypatch)

    assert rewrite_with_txn(spark, path, replace_row(spark, 3, "c"), app_id=APP, txn_version=5, metadata={})

    assert rows(spark, path) == expected
    assert through_delta == [path]
    assert delta.recorded_txn_version(spark, path, APP) == 5


def clustered_table(spark, path: str) -> None:
    """A table clustered by its key (as ours are by default), rows in two files."""
    DeltaTable.create(spark).location(path).addColumn("k", "INT", nullable=False).addColumn(
        "v", "STRING"
    ).clusterBy("k").execute()
    for row in [(1, "a"), (2, "b")]:
        spark.createDataFrame([row], "k INT, v STRING").write.format("delta").mode("append").save(path)


def clustering(spark, path: str) -> list[str]:
    (detail,) = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()
    return list(detail["clusteringColumns"])


def add_column(table):
    """`new_rows` of two ADD COLUMN steps: the table's rows with an empty DATETIME column and an INT NOT NULL
    one (its default a literal: a column Spark knows holds no NULL)."""
    return table.selectExpr("*", "CAST(NULL AS TIMESTAMP_NTZ) AS d", "0 AS n")


def test_a_schema_change_stores_what_deltas_overwrite_stores_and_keeps_the_clustering(
    spark, warehouse: str
) -> None:
    """Against Delta's own `overwriteSchema` writer on a copy: the same schema (nullable as Delta stores
    it), rows and protocol (the first TIMESTAMP_NTZ column brings its feature), in one commit with the
    properties; Delta's writer drops the clustering, ours keeps it."""
    ours, theirs = f"{warehouse}/ours", f"{warehouse}/theirs"
    for path in (ours, theirs):
        clustered_table(spark, path)
    spark.sql(f"ALTER TABLE delta.`{theirs}` SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')")
    add_column(spark.read.format("delta").load(theirs)).write.format("delta").mode("overwrite").option(
        "overwriteSchema", "true"
    ).save(theirs)

    assert replace_table_with_txn(
        spark, ours, add_column, properties={"tidelake.x": "1"}, app_id=APP, txn_version=5, metadata={"s": 1}
    )
    assert not replace_table_with_txn(
        spark, ours, add_column, properties={}, app_id=APP, txn_version=5, metadata={}
    )

    schema = spark.read.format("delta").load(theirs).schema
    assert spark.read.format("delta").load(ours).schema == schema
    assert not any(field.nullable is False for field in schema.fields)  # Delta's writer stores k nullable
    assert rows(spark, ours) == rows(spark, theirs) == [(1, "a", None, 0), (2, "b", None, 0)]
    (mine,), (delta_s,) = (
        spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("tableFeatures").collect()
        for path in (ours, theirs)
    )
    assert sorted(mine[0]) == sorted(delta_s[0]) and "timestampNtz" in mine[0]
    assert (clustering(spark, ours), clustering(spark, theirs)) == (["k"], [])
    assert delta.table_configuration(spark, ours)["tidelake.x"] == "1"
    assert delta.last_commit(spark, ours, APP) == delta.DeltaCommit(
        table_version=3, txn_version=5, user_metadata={"s": 1}
    )


def test_a_second_schema_change_finds_the_files_the_first_one_left_unlisted(
    spark, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that changes the schema leaves the file list out of its checksum: the next step rebuilds
    the table state for it and still commits through its own transaction, keeping the clustering. One that
    drops the clustering column goes to Delta's writer."""
    path = f"{warehouse}/t"
    clustered_table(spark, path)
    assert replace_table_with_txn(spark, path, add_column, properties={}, app_id=APP, txn_version=5,
                                        metadata={})  # fmt: skip
    assert delta_internals.checksum_files(delta_internals.snapshot(spark, path)) is None

    assert replace_table_with_txn(
        spark, path, lambda table: table.drop("d", "n"), properties={}, app_id=APP, txn_version=6, metadata={}
    )
    assert rows(spark, path) == [(1, "a"), (2, "b")]
    assert clustering(spark, path) == ["k"]

    through_delta = through_delta_calls(monkeypatch)
    assert replace_table_with_txn(
        spark, path, lambda table: table.drop("k"), properties={}, app_id=APP, txn_version=7, metadata={}
    )
    assert through_delta == [path]
    assert rows(spark, path) == [("a",), ("b",)]
    assert delta.recorded_txn_version(spark, path, APP) == 7


def test_a_rewrite_reads_the_table_again_after_a_writer_adds_rows_in_between(
    spark, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer MERGEs a row in after the rewrite read the table: the whole table is in the rewrite's
    read set, so Delta refuses its commit and the next attempt reads that row too (else both rows of key 3
    would be there)."""
    path = f"{warehouse}/t"
    make_table(spark, path)
    mine = replace_row(spark, 3, "mine")
    reads = []

    def new_rows(table):
        reads.append(1)
        if len(reads) == 1:
            theirs = spark.createDataFrame([(3, "theirs")], "k INT, v STRING")
            upsert(theirs)(DeltaTable.forPath(spark, path)).execute()
        return mine(table)

    assert rewrite_with_txn(spark, path, new_rows, app_id=APP, txn_version=5, metadata={})

    assert len(reads) == 2
    assert rows(spark, path) == [(1, "a"), (2, "b"), (3, "mine")]


def test_a_commit_outside_utc_costs_what_it_costs_in_utc(spark, warehouse: str) -> None:
    """Delta checks each commit's checksum against a rebuild of the whole table state where a time zone
    is not UTC, unless our session turns that off (tidelake.spark.DELTA_CHECKSUM_CHECK_OUTSIDE_UTC): the
    same append makes as many Spark jobs in either zone."""
    jobs = {}
    for zone in ("UTC", "America/Los_Angeles"):
        path = f"{warehouse}/{zone.replace('/', '_')}"
        make_table(spark, path)
        new = spark.createDataFrame([(3, "c")], "k INT, v STRING")
        delta.table_version(spark, path)  # the table's snapshot is loaded before, in both zones
        with delta.session_conf_set(spark, {"spark.sql.session.timeZone": zone}):
            first = spark._jsc.sc().dagScheduler().nextJobId()
            assert append_with_txn(spark, path, new, app_id=APP, txn_version=1, metadata={})
            jobs[zone] = spark._jsc.sc().dagScheduler().nextJobId() - first
        assert rows(spark, path) == [(1, "a"), (2, "b"), (3, "c")]
    assert jobs["UTC"] > 0 and jobs["America/Los_Angeles"] == jobs["UTC"], jobs
