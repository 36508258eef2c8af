"""`backfill run` over TiCDC storage-sink folders written by hand: both protocols, the metadata checkpoint
as the barrier, both writers' index orders, DDL barriers, at-least-once repeats, multisets, exactly once,
and bad input (exit 2, the file and line named, every table unchanged)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from backfill.cli import main
from backfill.run import run_backfill
from backfill.sources.ticdc.schema_file import (
    ACTION_ADD_COLUMN,
    ACTION_CREATE_SCHEMA,
    ACTION_DROP_SCHEMA,
    ACTION_EXCHANGE_PARTITION,
    ACTION_REORGANIZE_PARTITION,
    ACTION_TRUNCATE_TABLE,
)
from tests.storage_sink import USERS_COLUMNS, SinkFolder, canal_line, csv_line
from tidelake import delta
from tidelake.config import load_config

pytestmark = pytest.mark.spark

WIDER = (*USERS_COLUMNS, ("email", "VARCHAR", {"precision": "64"}))


def config(tmp_path: Path, protocol: str = "csv", extra: str = "") -> Path:
    path = tmp_path / "job.toml"
    path.write_text(
        f'[job]\nname = "sink"\n[source]\nkind = "ticdc-storage"\npath = "{tmp_path / "sink"}"\n'
        f'[source.storage]\nprotocol = "{protocol}"\n{extra}[target]\nwarehouse = "{tmp_path / "wh"}"\n'
    )
    return path


def run(spark, conf: Path):
    return run_backfill(spark, load_config(conf))


def rows(spark, tmp_path: Path, table: str = "users") -> list[tuple]:
    frame = spark.read.format("delta").load(str(tmp_path / "wh" / "app" / table))
    return sorted(tuple(r) for r in frame.collect())


def version(spark, tmp_path: Path, table: str = "users") -> int:
    return delta.table_version(spark, str(tmp_path / "wh" / "app" / table))


def test_csv_window_index_orders_ddl_barrier_and_exactly_once(spark, tmp_path) -> None:
    sink = SinkFolder(tmp_path / "sink")
    sink.schema(
        "users", 100, query="CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(32), score INT)", action=3
    )
    sink.data(
        "users", 100, 1, csv_line("I", "users", 110, 1, "a", 10) + csv_line("I", "users", 110, 2, "b", 20)
    )
    # tiflow: the index names file 3 before it exists; ticdc: file 2 exists before its index names it.
    sink.data("users", 100, 2, csv_line("U", "users", 120, 1, "a2", 11) + csv_line("D", "users", 130, 2, "b", 20),
              index=False)  # fmt: skip
    sink.index(tmp_path / "sink" / "app" / "users" / "100", "CDC000003.csv")
    sink.schema(
        "users", 150, WIDER, query="ALTER TABLE users ADD COLUMN email VARCHAR(64)", action=ACTION_ADD_COLUMN
    )
    sink.data("users", 150, 1, csv_line("I", "users", 160, 3, "c", 30, "c@x") + csv_line("U", "users", 170, 1, "a3", 12, None)
              + csv_line("I", "users", 260, 4, "late", 40, "l@x"))  # fmt: skip
    sink.checkpoint(200)
    conf = config(tmp_path)
    result = run(spark, conf)
    assert result.resolved_ts == 200
    assert rows(spark, tmp_path) == [(1, "a3", 12, None, 170), (3, "c", 30, "c@x", 160)]
    [outcome] = result.tables
    assert outcome.ddl_steps == 1
    before = version(spark, tmp_path)
    run(spark, conf)  # a rerun: nothing new below the checkpoint
    assert version(spark, tmp_path) == before
    # A restart re-writes 160..260 into a new, empty-query version (not a DDL), then the checkpoint moves on.
    sink.schema("users", 240, WIDER)
    sink.data(
        "users",
        240,
        1,
        csv_line("I", "users", 260, 4, "late", 40, "l@x") + csv_line("D", "users", 280, 3, "c", 30, "c@x"),
    )
    sink.checkpoint(300)
    second = run(spark, conf)
    assert second.tables[0].ddl_steps == 0
    assert rows(spark, tmp_path) == [(1, "a3", 12, None, 170), (4, "late", 40, "l@x", 260)]
    assert delta.recorded_txn_version(spark, str(tmp_path / "wh" / "app" / "users"), "tidelake:sink") == 300


def test_canal_json_partitions_dates_dispatchers_and_repeats(spark, tmp_path) -> None:
    sink = SinkFolder(tmp_path / "sink", ".json", width=20)
    sink.schema("users", 100)
    ins = canal_line("INSERT", "users", 110, {"id": 1, "name": "a", "score": 1})
    upd = canal_line(
        "UPDATE", "users", 120, {"id": 5, "name": "moved", "score": 2}, {"id": 1, "name": "a", "score": 1}
    )
    sink.data("users", 100, 1, ins, pid=71, date="2024-05-01")
    sink.data("users", 100, 1, upd + canal_line("INSERT", "users", 130, {"id": 9, "name": "z\u00e9", "score": None}),
              pid=72, date="2024-05-01", dispatcher="d-1")  # fmt: skip
    # The same transactions again in later files (a restart wrote them twice): one change each.
    sink.data("users", 100, 1, ins + upd, pid=72, date="2024-05-02", dispatcher="d-2")
    sink.checkpoint(150)
    run(spark, config(tmp_path, "canal-json", 'date_separator = "day"\n'))
    assert rows(spark, tmp_path) == [(5, "moved", 2, 120), (9, "z\u00e9", None, 130)]


def test_canal_json_enum_names_from_a_create_table_before_the_runs_versions(spark, tmp_path) -> None:
    """tiflow's schema files name no ENUM elements and canal-json carries the index: only the CREATE TABLE
    query names them. A later run whose versions start two DDLs after it still writes names."""
    cols = (("id", "INT", {"precision": "11", "is_pk": "true"}), ("tag", "ENUM", {}))
    wider = (*cols, ("n", "INT", {"precision": "11"}))
    sink = SinkFolder(tmp_path / "sink", ".json")
    sink.schema("t", 100, cols, query="CREATE TABLE `app`.`t` (`id` INT PRIMARY KEY, `tag` ENUM('a','b','c'))",
                action=3)  # fmt: skip
    sink.data("t", 100, 1, canal_line("INSERT", "t", 110, {"id": 1, "tag": 1}))
    sink.schema("t", 150, wider, query="ALTER TABLE `app`.`t` ADD COLUMN `n` INT", action=ACTION_ADD_COLUMN)
    sink.data("t", 150, 1, canal_line("INSERT", "t", 160, {"id": 2, "tag": 2, "n": 7}))
    sink.schema("t", 200, wider, query="ALTER TABLE `app`.`t` ADD INDEX `i_n` (`n`)", action=7)
    sink.data("t", 200, 1, canal_line("INSERT", "t", 210, {"id": 3, "tag": 3, "n": 8}))
    sink.checkpoint(300)
    conf = config(tmp_path, "canal-json")
    run(spark, conf)
    sink.data(
        "t",
        200,
        2,
        canal_line("UPDATE", "t", 310, {"id": 1, "tag": 3, "n": 9}, {"id": 1, "tag": 1, "n": None}),
    )
    sink.checkpoint(400)
    run(spark, conf)
    assert rows(spark, tmp_path, "t") == [(1, "c", 9, 310), (2, "b", 7, 160), (3, "c", 8, 210)]


def test_a_table_without_a_key_is_a_multiset_without_repeated_deliveries(spark, tmp_path) -> None:
    keyless = (("k", "INT", {"precision": "11"}), ("v", "VARCHAR", {"precision": "8"}))
    sink = SinkFolder(tmp_path / "sink")
    sink.schema("my events", 100, keyless)
    txn = (
        csv_line("I", "my events", 110, 1, "x")
        + csv_line("I", "my events", 110, 1, "x")
        + csv_line("I", "my events", 120, 2, "y")
    )
    sink.data("my events", 100, 1, txn)
    sink.data(
        "my events", 100, 2, txn + csv_line("D", "my events", 130, 1, "x")
    )  # 110 and 120 delivered again
    sink.checkpoint(200)
    run(spark, config(tmp_path))
    assert Counter(r[1:3] for r in rows(spark, tmp_path, "my events")) == Counter({(1, "x"): 1, (2, "y"): 1})


def test_truncate_rename_and_drop_table(spark, tmp_path) -> None:
    sink = SinkFolder(tmp_path / "sink")
    sink.schema("users", 100)
    sink.data(
        "users", 100, 1, csv_line("I", "users", 110, 1, "a", 1) + csv_line("I", "users", 115, 2, "b", 2)
    )
    sink.schema("users", 120, query="TRUNCATE TABLE users", action=ACTION_TRUNCATE_TABLE)
    sink.data("users", 120, 1, csv_line("I", "users", 130, 3, "c", 3))
    # The rename's schema file lands under the new name; rows after it too.
    sink.schema("people", 135, query="RENAME TABLE `app`.`users` TO `app`.`people`", action=14)
    sink.data("people", 135, 1, csv_line("I", "people", 137, 4, "d", 4))
    sink.checkpoint(140)
    conf = config(tmp_path)
    run(spark, conf)
    assert rows(spark, tmp_path, "people") == [(3, "c", 3, 130), (4, "d", 4, 137)]
    assert not (tmp_path / "wh" / "app" / "users").exists()
    # Column ids follow names: dropping a middle column keeps `score` where it was, a renamed one moves.
    after = (USERS_COLUMNS[0], ("points", "INT", {"precision": "11"}))
    sink.schema("people", 145, after, query="ALTER TABLE people DROP COLUMN name, RENAME COLUMN score TO points",
                action=ACTION_ADD_COLUMN)  # fmt: skip
    sink.checkpoint(146)
    run(spark, conf)
    assert rows(spark, tmp_path, "people") == [(3, 3, 130), (4, 4, 137)]
    sink.schema("people", 150, query="DROP TABLE people", action=4)
    sink.checkpoint(160)
    run(spark, conf)
    assert not (tmp_path / "wh" / "app" / "people").exists()


def test_database_schema_files_create_and_drop_every_table_of_their_database(spark, tmp_path) -> None:
    """Database-level schema files (`<db>/meta/`, no columns): CREATE / ALTER DATABASE change no table;
    each DROP DATABASE drops the database's tables as DROP TABLE does, also one with a newer table version
    after it (the database and table created again): rows from before the drop do not come back."""
    sink = SinkFolder(tmp_path / "sink")
    sink.schema("", 90, (), query="CREATE DATABASE `app`", action=ACTION_CREATE_SCHEMA)
    sink.schema(
        "users", 100, query="CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(32), score INT)", action=3
    )
    sink.data(
        "users", 100, 1, csv_line("I", "users", 110, 1, "a", 1) + csv_line("I", "users", 115, 2, "b", 2)
    )
    sink.schema("", 120, (), query="ALTER DATABASE `app` CHARSET utf8mb4", action=15)
    sink.checkpoint(125)
    conf = config(tmp_path)
    run(spark, conf)
    assert rows(spark, tmp_path) == [(1, "a", 1, 110), (2, "b", 2, 115)]
    sink.schema("", 130, (), query="DROP DATABASE `app`", action=ACTION_DROP_SCHEMA)
    sink.schema("", 140, (), query="CREATE DATABASE `app`", action=ACTION_CREATE_SCHEMA)
    sink.schema(
        "users", 150, query="CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(32), score INT)", action=3
    )
    sink.data("users", 150, 1, csv_line("I", "users", 160, 3, "c", 3))
    sink.checkpoint(170)
    run(spark, conf)
    assert rows(spark, tmp_path) == [(3, "c", 3, 160)]
    sink.schema("", 180, (), query="DROP DATABASE `app`", action=ACTION_DROP_SCHEMA)
    sink.checkpoint(190)
    run(spark, conf)
    assert not (tmp_path / "wh" / "app" / "users").exists()


def test_a_rename_killed_before_removing_the_old_table_is_finished_by_the_rerun(spark, tmp_path) -> None:
    """The state a run killed at `ddl.rename` leaves: the new table committed with the rename's step, the
    old one not yet removed. The checkpoint is the rename itself, so the rerun must still see the version
    before it (it once planned from the rename on and kept both tables)."""
    import shutil

    sink = SinkFolder(tmp_path / "sink")
    sink.schema("users", 100)
    sink.data("users", 100, 1, csv_line("I", "users", 110, 1, "a", 1))
    sink.schema("people", 135, query="RENAME TABLE `app`.`users` TO `app`.`people`", action=14)
    sink.data("people", 135, 1, csv_line("I", "people", 137, 2, "b", 2))
    sink.checkpoint(134)
    conf = config(tmp_path)
    run(spark, conf)
    left_behind = tmp_path / "users-before-the-rename"
    shutil.copytree(tmp_path / "wh" / "app" / "users", left_behind)
    sink.checkpoint(135)
    run(spark, conf)  # the rename: `people` at its ts, `users` removed ...
    shutil.copytree(left_behind, tmp_path / "wh" / "app" / "users")  # ... which the kill prevented
    sink.checkpoint(140)

    run(spark, conf)

    assert not (tmp_path / "wh" / "app" / "users").exists()
    assert rows(spark, tmp_path, "people") == [(1, "a", 1, 110), (2, "b", 2, 137)]


def test_reorganize_partition_keeps_rows_and_exchange_partition_stops_clearly(
    spark, tmp_path, capsys
) -> None:
    """REORGANIZE PARTITION moves rows between partitions of one table: a barrier and nothing else. EXCHANGE
    PARTITION swaps rows with another table, which a schema file cannot tell: exit 2, the DDL named."""
    sink = SinkFolder(tmp_path / "sink")
    sink.schema("users", 100)
    sink.data(
        "users", 100, 1, csv_line("I", "users", 110, 1, "a", 1) + csv_line("I", "users", 115, 2, "b", 2)
    )
    reorganize = "ALTER TABLE `app`.`users` REORGANIZE PARTITION `p0`, `p1` INTO (PARTITION `p3` VALUES LESS THAN (10))"
    sink.schema("users", 120, query=reorganize, action=ACTION_REORGANIZE_PARTITION)
    sink.data("users", 120, 1, csv_line("U", "users", 130, 2, "b2", 3))
    sink.checkpoint(140)
    conf = config(tmp_path)
    assert main(["run", "--config", str(conf)]) == 0
    capsys.readouterr()
    assert rows(spark, tmp_path) == [(1, "a", 1, 110), (2, "b2", 3, 130)]
    before = version(spark, tmp_path)
    exchange = "ALTER TABLE `app`.`users` EXCHANGE PARTITION `p3` WITH TABLE `app`.`spare`"
    sink.schema("users", 150, query=exchange, action=ACTION_EXCHANGE_PARTITION)
    sink.data("users", 150, 1, csv_line("I", "users", 155, 3, "c", 4))
    sink.checkpoint(160)
    fails(conf, capsys, "app.users", exchange, "table version 150", "removes the rows of partitions")
    assert version(spark, tmp_path) == before
    assert rows(spark, tmp_path) == [(1, "a", 1, 110), (2, "b2", 3, 130)]


@pytest.fixture
def landed(spark, tmp_path):
    """A sink whose first window landed in two tables."""
    sink = SinkFolder(tmp_path / "sink")
    for table in ("users", "other"):
        sink.schema(table, 100)
        sink.data(table, 100, 1, csv_line("I", table, 110, 1, "a", 1))
    sink.checkpoint(150)
    conf = config(tmp_path)
    assert main(["run", "--config", str(conf)]) == 0
    return sink, conf, {t: version(spark, tmp_path, t) for t in ("users", "other")}


def fails(conf: Path, capsys, *needles: str) -> None:
    assert main(["run", "--config", str(conf)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize(
    ("damage", "needles"),
    [
        ("malformed", ("CDC000002.csv:2", "malformed CSV")),
        ("columns", ("CDC000002.csv:1", "5 fields, expected 7")),
        ("checksum", ("schema_100_0000000001.json", "checksum mismatch")),
        ("no-schema", ("no schema file for table version 100",)),
    ],
)
def test_bad_input_exits_2_naming_the_place_and_leaves_tables_unchanged(
    spark, tmp_path, landed, capsys, damage, needles
) -> None:
    sink, conf, before = landed
    sink.data("other", 100, 2, csv_line("I", "other", 160, 2, "b", 2))
    good = csv_line("I", "users", 170, 3, "c", 3)
    if damage == "malformed":
        sink.data("users", 100, 2, good + '"I","users","app",171,4,"unterminated\r\n')
    elif damage == "columns":
        sink.data("users", 100, 2, '"I","users","app",171,4\r\n')
    else:
        sink.data("users", 100, 2, good)
        meta = tmp_path / "sink" / "app" / "users" / "meta"
        schema_file = next(meta.iterdir())
        if damage == "checksum":
            schema_file.rename(meta / "schema_100_0000000001.json")
        else:
            schema_file.unlink()
    sink.checkpoint(200)
    fails(conf, capsys, *needles)
    assert {t: version(spark, tmp_path, t) for t in ("users", "other")} == before


def test_a_sink_folder_that_does_not_exist_exits_2_and_one_without_metadata_yet_exits_0(
    spark, tmp_path, capsys
) -> None:
    """A typo in `path` must fail a scheduled job, not do nothing forever; an existing prefix the sink has
    not written its first checkpoint to yet is a clear no-op."""
    conf = config(tmp_path)
    fails(conf, capsys, f"{tmp_path / 'sink'}: the storage sink's folder does not exist")
    (tmp_path / "sink").mkdir()
    assert main(["run", "--config", str(conf), "--json", "--quiet"]) == 0
    assert "no metadata file: the storage sink has not written a checkpoint yet" in capsys.readouterr().out


def test_canal_json_that_does_not_parse_names_file_and_line(spark, tmp_path, capsys) -> None:
    sink = SinkFolder(tmp_path / "sink", ".json")
    sink.schema("users", 100)
    sink.data(
        "users",
        100,
        1,
        canal_line("INSERT", "users", 110, {"id": 1, "name": "a", "score": 1}) + "{not json\r\n",
    )
    sink.checkpoint(150)
    fails(config(tmp_path, "canal-json"), capsys, "CDC000001.json:2", "not JSON")
    assert not (tmp_path / "wh" / "app" / "users").exists()


def test_status_reports_the_sink_checkpoint(spark, tmp_path, landed, capsys) -> None:
    _, conf, _ = landed
    assert main(["status", "--config", str(conf), "--json"]) == 0
    out = capsys.readouterr().out
    assert "checkpoint-ts 150" in out or '"newest_scan_ts": 150' in out, out


@pytest.mark.drill  # long tier (`pytest --drill`); CI keeps the kv-scan and Kafka kill-between-tables cases
@pytest.mark.slow  # a simulated sink and four runs: the kill needs several tables. The kill and the rerun
# are the source-agnostic apply stage's; CSV with old values is the protocol with the most to get wrong.
@pytest.mark.parametrize("protocol", ["csv"])
def test_a_run_killed_between_two_tables_finishes_once_on_rerun(
    spark, tmp_path, monkeypatch, protocol
) -> None:
    """A simulated sink folder; the run dies after its first table's commit. The rerun builds the tables an
    uninterrupted run builds, leaves the finished table's version alone, and a third run adds nothing."""
    from tests.integration.test_sources_agree import warehouse_tables
    from tests.kill import killed_after_first_table, table_label
    from tidbsim import SimulationConfig, simulate
    from tidbsim.config import StorageSink
    from tidbsim.storage_codec import CsvOptions

    csv = CsvOptions(output_old_value=True)
    sink = StorageSink(protocol=protocol, csv=csv, restarts=1, seed=3)
    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=3, tables=3, rows=20, txns=60, scans=2, storage_sinks=(sink,)))
    extra = "output_old_value = true\n" if protocol == "csv" else ""

    def job(name: str):
        path = tmp_path / f"{name}.toml"
        path.write_text(
            f'[job]\nname = "once"\n[source]\nkind = "ticdc-storage"\npath = "{out / "storage" / protocol}"\n'
            f'[source.storage]\nprotocol = "{protocol}"\n{extra}[target]\nwarehouse = "{tmp_path / name}"\n'
        )
        return load_config(path)

    def table_versions(name: str) -> dict[str, int]:
        return {
            f"{t.parent.name}.{t.name}": delta.table_version(spark, str(t))
            for t in (tmp_path / name).glob("*/*")
            if (t / "_delta_log").is_dir()
        }

    reference = run_backfill(spark, job("ref"))
    crashing = job("crash")
    with killed_after_first_table(monkeypatch) as finished:
        run_backfill(spark, crashing)
    committed = table_versions("crash")
    (first,) = finished
    assert set(committed) == {table_label(first)}, "the kill leaves exactly the table that finished its walk"
    assert set(table_versions("ref")) > set(committed), "an uninterrupted run builds more tables"

    result = run_backfill(spark, crashing)
    assert result.resolved_ts == reference.resolved_ts
    after = table_versions("crash")
    assert {t: after[t] for t in committed} == committed, "a finished table is written again"
    assert warehouse_tables(spark, tmp_path / "crash") == warehouse_tables(spark, tmp_path / "ref")
    run_backfill(spark, crashing)
    assert table_versions("crash") == after


@pytest.mark.parametrize("protocol", ["csv", "canal-json"])
def test_a_sink_started_before_create_database_step_by_step_and_at_once(spark, tmp_path, protocol) -> None:
    """A simulated changefeed started before its databases exist (database-level schema files, CREATE
    TABLE versions), restarted (empty-query versions, rows written again), online DDLs, `tables = ["*.*"]`:
    runs at several checkpoints as the folder grows, and one run over the whole folder, reach the
    simulator's expected state; a rerun adds no version."""
    from tests.expected import warehouse_differences
    from tidbsim import SimulationConfig, load_index, simulate
    from tidbsim.config import StorageSink
    from tidbsim.storage_codec import CsvOptions
    from tidbsim.storage_sink import storage_sink_flushes, write_storage_sink

    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=2, tables=3, rows=10, txns=90, scans=3, ticdc_changelog=True))
    scans = load_index(out)
    sink = StorageSink(
        protocol=protocol, csv=CsvOptions(output_old_value=True), restarts=2, from_creation=True
    )
    extra = "output_old_value = true\n" if protocol == "csv" else ""
    # the sink's rows carry no row id: a table without a primary key is a multiset of whole rows, where an
    # update that leaves a row as it was cancels out and keeps the row's earlier commit ts
    without = ("_tidb_rowid", "_tidb_commit_ts")

    def job(name: str):
        path = tmp_path / f"{name}.toml"
        path.write_text(
            f'[job]\nname = "{name}"\n[source]\nkind = "ticdc-storage"\npath = "{tmp_path / name}"\n'
            f'[source.storage]\nprotocol = "{protocol}"\n{extra}[target]\nwarehouse = "{tmp_path / name}-wh"\n'
            'tables = ["*.*"]\n'
        )
        return load_config(path)

    assert (write_storage_sink(out, sink, tmp_path / "once")) == scans[-1]["resolved_ts"]
    assert any((tmp_path / "once").glob("*/meta/schema_*.json")), "database-level schema files"
    result = run_backfill(spark, job("once"))
    assert result.resolved_ts == scans[-1]["resolved_ts"]
    assert (
        warehouse_differences(spark, tmp_path / "once-wh", out, scans[-1]["scan_id"], without=without) == []
    )

    checkpoints = list(storage_sink_flushes(out, sink, tmp_path / "count"))
    runs_at = {checkpoints[len(checkpoints) * k // 4] for k in (1, 2, 3)} | {checkpoints[-1]}
    steps = job("steps")
    for ts in storage_sink_flushes(out, sink, tmp_path / "steps"):
        if ts in runs_at:
            result = run_backfill(spark, steps)
            assert result.resolved_ts == ts
            for scan in scans:
                if scan["resolved_ts"] == ts:
                    where = tmp_path / "steps-wh"
                    assert warehouse_differences(spark, where, out, scan["scan_id"], without=without) == []
    assert result.resolved_ts == scans[-1]["resolved_ts"]
    assert (
        warehouse_differences(spark, tmp_path / "steps-wh", out, scans[-1]["scan_id"], without=without) == []
    )
    before = {str(t): delta.table_version(spark, str(t)) for t in (tmp_path / "steps-wh").glob("*/*")}
    assert run_backfill(spark, steps).note == "nothing new"
    assert {str(t): delta.table_version(spark, str(t)) for t in (tmp_path / "steps-wh").glob("*/*")} == before
