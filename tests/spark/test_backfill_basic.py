"""Backfill end to end on hand-built captures: the Delta table equals what the captures say."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.cli import main
from backfill.run import run_backfill
from tests.captures import Capture, users_table
from tidelake import delta
from tidelake.config import load_config

pytestmark = pytest.mark.spark


def config_file(tmp_path: Path, job: str = "t") -> Path:
    path = tmp_path / "job.toml"
    path.write_text(
        f'[job]\nname = "{job}"\n[source]\npath = "{tmp_path / "scans"}"\n'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\n'
    )
    return path


def table_rows(spark, tmp_path: Path, db: str = "app", table: str = "users") -> list[tuple]:
    df = spark.read.format("delta").load(str(tmp_path / "wh" / db / table))
    return sorted(tuple(r) for r in df.collect())


def test_first_capture_lands_with_commit_ts_and_txn_version(spark, tmp_path: Path) -> None:
    users = users_table()
    cap = Capture(tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=200, tables=[("app", users)])
    cap.put(1, users, 1, {2: "ann", 3: 10}, 110, 111).put(1, users, 2, {2: "bob", 3: 20}, 112, 113)
    cap.put(1, users, 1, {2: "ann", 3: 11}, 120, 121).delete(1, 100, 2, 130, 131)
    cap.put(1, users, 3, {2: "cy", 3: None}, 140, 141)
    cap.init_and_resolve(190).write()
    config = load_config(config_file(tmp_path))

    result = run_backfill(spark, config)

    assert result.resolved_ts == 190
    assert table_rows(spark, tmp_path) == [(1, "ann", 11, 121), (3, "cy", None, 141)]
    (outcome,) = result.tables
    assert (outcome.upserted, outcome.deleted) == (2, 1)
    path = str(tmp_path / "wh" / "app" / "users")
    assert delta.recorded_txn_version(spark, path, "tidelake:t") == 190
    commit = delta.last_commit(spark, path, "tidelake:t")
    assert commit is not None and commit.user_metadata["resolved_ts"] == 190

    # a rerun of the finished window adds no Delta version
    version = delta.table_version(spark, path)
    again = run_backfill(spark, config)
    assert delta.table_version(spark, path) == version
    assert again.note == "nothing new" or again.resolved_ts == 190


def test_only_the_configured_tables_land(spark, tmp_path: Path) -> None:
    users, orders = users_table(), users_table(200, "orders")
    cap = Capture(
        tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=200, tables=[("app", users), ("app", orders)]
    )
    cap.put(1, users, 1, {2: "ann", 3: 10}, 110, 111).put(1, orders, 7, {2: "skipped", 3: 1}, 112, 113)
    cap.init_and_resolve().write()
    conf = config_file(tmp_path)
    conf.write_text(conf.read_text() + 'tables = ["app.u*"]\n')

    result = run_backfill(spark, load_config(conf))

    assert [t.table for t in result.tables] == ["app.users"]
    assert table_rows(spark, tmp_path) == [(1, "ann", 10, 111)]
    assert not (tmp_path / "wh" / "app" / "orders").exists()


def test_cli_run_json_reports_counts(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    users = users_table()
    cap = Capture(tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=200, tables=[("app", users)])
    cap.put(1, users, 5, {2: "eve", 3: 1}, 110, 111).init_and_resolve().write()
    assert main(["run", "--config", str(config_file(tmp_path)), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["resolved_ts"] == 200
    assert report["tables"][0]["rows_upserted"] == 1
    assert report["tables"][0]["table"] == "app.users"


def test_merge_never_overwrites_a_newer_row(spark, tmp_path: Path) -> None:
    from backfill.apply.merge import create_table, merge_changes
    from backfill.codec import TableSchema

    schema = TableSchema.from_table_info(users_table())
    path = str(tmp_path / "t")
    create_table(spark, path, schema)
    ddl = "id BIGINT, name STRING, score INT, _tidb_commit_ts BIGINT, _tidb_op STRING"
    first = spark.createDataFrame([(1, "new", 1, 200, "PUT"), (2, "keep", 2, 200, "PUT")], ddl)
    merge_changes(spark, path, schema, first, app_id="tidelake:m", txn_version=1, metadata={})
    older = spark.createDataFrame([(1, "old", 0, 150, "PUT"), (2, None, None, 150, "DELETE")], ddl)
    merge_changes(spark, path, schema, older, app_id="tidelake:m", txn_version=2, metadata={})
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, "new", 1, 200), (2, "keep", 2, 200)]
    newer = spark.createDataFrame([(1, "newer", 3, 250, "PUT"), (2, None, None, 250, "DELETE")], ddl)
    merge_changes(spark, path, schema, newer, app_id="tidelake:m", txn_version=3, metadata={})
    assert [tuple(r) for r in spark.read.format("delta").load(path).collect()] == [(1, "newer", 3, 250)]


def test_creating_a_table_in_a_folder_that_holds_something_else(spark, tmp_path: Path) -> None:
    """A folder with other files is bad input naming it (exit 2), at once; a folder whose `_delta_log` gets
    its first commit while this run tried to create the table is another run's create (exit 3)."""
    import threading
    import time

    from backfill.apply.merge import create_table
    from backfill.codec import TableSchema
    from tidelake.errors import ConcurrentRunError, InputError

    schema = TableSchema.from_table_info(users_table())
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("not a table")
    started = time.monotonic()
    with pytest.raises(InputError, match=r"stray: the table's folder is not empty and holds no Delta table"):
        create_table(spark, str(stray), schema)
    assert time.monotonic() - started < 20 and list(stray.iterdir()) == [stray / "notes.txt"]

    racing = tmp_path / "racing"
    (racing / "_delta_log").mkdir(parents=True)  # another run's create, its first commit being written
    (racing / "_delta_log" / f".{0:020d}.json.0f1e.tmp").write_text("{}\n")
    first = racing / "_delta_log" / f"{0:020d}.json"
    threading.Timer(5.0, first.write_text, args=("{}\n",)).start()  # after this create gave up
    with pytest.raises(ConcurrentRunError, match=r"racing: another run created this table at the same time"):
        create_table(spark, str(racing), schema)
