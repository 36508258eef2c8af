"""Target tables by name in the real Hive metastore (embedded Derby, the shared session's): registered as
EXTERNAL Delta tables when created, kept true through rename, drop and truncate, made whole after a kill;
`backfill snapshot` at a resolved ts. Each test has its own database prefix in the shared metastore."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

import backfill.apply.stage as stage
from backfill.apply.table_names import CatalogConflict
from backfill.cli import main
from backfill.run import run_backfill
from tests.captures import Capture, ddl_job, users_table
from tidelake.config import load_config

pytestmark = pytest.mark.spark

CREATE_TABLE, DROP_TABLE, TRUNCATE_TABLE, RENAME_TABLE = 3, 4, 11, 14


def write_job(tmp_path: Path, tables, jobs, rows, *, extra: str = "") -> tuple[Path, str]:
    """Captures of one window resolved at 390 and a job config with its own database prefix."""
    cap = Capture(tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=400, tables=tables, jobs=jobs)
    for table, handle, values, commit in rows:
        cap.put(1, table, handle, values, commit - 1, commit)
    cap.init_and_resolve(390).write()
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "cat"\n[source]\npath = "{tmp_path / "scans"}"\n'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\ndatabase_prefix = "{prefix}"\n{extra}'
    )
    return conf, prefix


def describe(spark, name: str) -> dict[str, str]:
    return {r["col_name"]: r["data_type"] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}


def count(spark, name: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {name}").first()["n"]


def test_created_table_is_registered_as_an_external_delta_table(spark, tmp_path: Path) -> None:
    users = users_table()
    conf, prefix = write_job(tmp_path, [("app", users)], [], [(users, 1, {2: "a", 3: 1}, 110)])
    run_backfill(spark, load_config(conf))
    info = describe(spark, f"{prefix}app.users")
    assert (info["Type"], info["Provider"]) == ("EXTERNAL", "delta")
    assert info["Location"].rstrip("/").endswith(str(tmp_path / "wh" / "app" / "users"))
    assert count(spark, f"{prefix}app.users") == 1
    run_backfill(spark, load_config(conf))  # a rerun registers nothing twice
    assert [t.name for t in spark.catalog.listTables(f"{prefix}app")] == ["users"]


def test_registration_off_leaves_the_catalog_alone(spark, tmp_path: Path) -> None:
    users = users_table()
    conf, prefix = write_job(
        tmp_path, [("app", users)], [], [(users, 1, {2: "a", 3: 1}, 110)], extra="register = false\n"
    )
    run_backfill(spark, load_config(conf))
    assert (tmp_path / "wh" / "app" / "users" / "_delta_log").is_dir()
    assert not spark.catalog.databaseExists(f"{prefix}app")


def test_rename_moves_the_name(spark, tmp_path: Path) -> None:
    before, after = users_table(), users_table(name="members")
    conf, prefix = write_job(
        tmp_path, [("app", before)], [ddl_job(1, RENAME_TABLE, "app", after, 150)],
        [(before, 1, {2: "ann", 3: 1}, 110), (after, 2, {2: "bob", 3: 2}, 160)],
    )  # fmt: skip
    run_backfill(spark, load_config(conf), until_ts=140)
    assert count(spark, f"{prefix}app.users") == 1
    run_backfill(spark, load_config(conf))
    assert not spark.catalog.tableExists(f"{prefix}app.users")
    assert count(spark, f"{prefix}app.members") == 2


def test_drop_table_unregisters_it_and_its_emptied_database(spark, tmp_path: Path) -> None:
    users, orders = users_table(100), users_table(200, name="orders")
    conf, prefix = write_job(
        tmp_path, [("app", users), ("shop", orders)], [ddl_job(1, DROP_TABLE, "app", users, 200)],
        [(users, 1, {2: "ann", 3: 1}, 110), (orders, 7, {2: "o", 3: 70}, 120)],
    )  # fmt: skip
    run_backfill(spark, load_config(conf), until_ts=150)
    assert spark.catalog.tableExists(f"{prefix}app.users")
    run_backfill(spark, load_config(conf))
    assert not spark.catalog.tableExists(f"{prefix}app.users")
    assert not spark.catalog.databaseExists(f"{prefix}app")  # its last table went
    assert count(spark, f"{prefix}shop.orders") == 1


def test_truncate_keeps_the_entry_and_it_reads_the_new_state(spark, tmp_path: Path) -> None:
    before, after = users_table(100), users_table(101)
    conf, prefix = write_job(
        tmp_path, [("app", before)], [ddl_job(1, TRUNCATE_TABLE, "app", after, 150, table_id=100)],
        [(before, 1, {2: "ann", 3: 1}, 110), (before, 2, {2: "bo", 3: 2}, 120), (after, 5, {2: "eve", 3: 5}, 160)],
    )  # fmt: skip
    run_backfill(spark, load_config(conf), until_ts=140)
    assert count(spark, f"{prefix}app.users") == 2
    run_backfill(spark, load_config(conf))
    assert count(spark, f"{prefix}app.users") == 1
    assert describe(spark, f"{prefix}app.users")["Type"] == "EXTERNAL"


def test_a_rerun_registers_what_a_killed_run_did_not(spark, tmp_path: Path, monkeypatch) -> None:
    users = users_table()
    conf, prefix = write_job(tmp_path, [("app", users)], [], [(users, 1, {2: "a", 3: 1}, 110)])

    def killed(*args, **kwargs):
        raise SystemExit("killed between the commit and the registration")

    with monkeypatch.context() as patch:
        patch.setattr(stage, "sync_names", killed)
        with pytest.raises(SystemExit):
            run_backfill(spark, load_config(conf))
    assert (tmp_path / "wh" / "app" / "users" / "_delta_log").is_dir()
    assert not spark.catalog.tableExists(f"{prefix}app.users")
    again = run_backfill(spark, load_config(conf))
    assert again.note == "nothing new"
    assert count(spark, f"{prefix}app.users") == 1


def test_a_name_held_by_a_view_is_a_conflict_not_overwritten(spark, tmp_path: Path) -> None:
    users = users_table()
    conf, prefix = write_job(tmp_path, [("app", users)], [], [(users, 1, {2: "a", 3: 1}, 110)])
    spark.sql(f"CREATE DATABASE {prefix}app")
    spark.sql(f"CREATE VIEW {prefix}app.users AS SELECT 42 AS answer")
    with pytest.raises(CatalogConflict, match=rf"{prefix}app`\.`users` is held by a view"):
        run_backfill(spark, load_config(conf))
    assert spark.sql(f"SELECT answer FROM {prefix}app.users").first()["answer"] == 42


def snapshot_job(spark, tmp_path: Path) -> tuple[Path, str]:
    """users from the start, orders created at 150; runs resolved at 200 and 390."""
    users, orders = users_table(100), users_table(200, name="orders")
    conf, prefix = write_job(
        tmp_path, [("app", users)], [ddl_job(1, CREATE_TABLE, "app", orders, 150)],
        [(users, 1, {2: "a", 3: 1}, 110), (orders, 7, {2: "o", 3: 70}, 160),
         (users, 2, {2: "b", 3: 2}, 250), (orders, 8, {2: "p", 3: 80}, 260), (users, 3, {2: "c", 3: 3}, 270)],
    )  # fmt: skip
    run_backfill(spark, load_config(conf), until_ts=200)
    run_backfill(spark, load_config(conf))
    return conf, prefix


def test_snapshot_at_latest_sql_and_register(spark, tmp_path: Path, capsys) -> None:
    conf, prefix = snapshot_job(spark, tmp_path)
    capsys.readouterr()

    assert main(["snapshot", "--config", str(conf), "--latest", "--json"]) == 0
    latest = json.loads(capsys.readouterr().out)
    assert latest["resolved_ts"] == 390
    assert {(t["table"], t["view"]) for t in latest["tables"]} == {
        ("users", f"`spark_catalog`.`{prefix}app`.`users_at_390`"),
        ("orders", f"`spark_catalog`.`{prefix}app`.`orders_at_390`"),
    }

    assert main(["snapshot", "--config", str(conf), "--at", "200", "--sql"]) == 0
    statements = [s for s in capsys.readouterr().out.split(";\n") if s.strip()]
    assert statements[0] == f"CREATE DATABASE IF NOT EXISTS `spark_catalog`.`{prefix}app`"
    assert all("VERSION AS OF" in s for s in statements[1:]) and len(statements) == 3
    for statement in statements:  # Spark accepts what we print
        spark.sql(statement)
    assert count(spark, f"{prefix}app.users_at_200") == 1
    assert count(spark, f"{prefix}app.orders_at_200") == 1
    assert count(spark, f"{prefix}app.users") == 3

    assert main(["snapshot", "--config", str(conf), "--latest", "--register"]) == 0
    assert "created 2 views" in capsys.readouterr().out
    assert count(spark, f"{prefix}app.users_at_390") == 3
    assert spark.sql(f"SELECT max(_tidb_commit_ts) AS m FROM {prefix}app.orders_at_390").first()["m"] == 260


def test_snapshot_at_a_ts_a_table_never_stood_at_exits_2(spark, tmp_path: Path, capsys) -> None:
    conf, _ = snapshot_job(spark, tmp_path)
    capsys.readouterr()
    assert main(["snapshot", "--config", str(conf), "--at", "300"]) == 2
    err = capsys.readouterr().err
    assert "never stood at resolved ts 300" in err and "200 before and 390 after" in err
    assert main(["snapshot", "--config", str(conf), "--at", "120"]) == 2
    assert "table app.orders never stood at resolved ts 120" in " ".join(capsys.readouterr().err.split())
    assert main(["snapshot", "--config", str(conf)]) == 2  # neither --at nor --latest


@pytest.mark.slow
def test_a_run_whose_embedded_metastore_another_process_holds_stops_before_writing(
    spark, tmp_path: Path
) -> None:
    """Embedded Derby serves one process at a time: a `backfill run` (its own JVM) on the metastore this
    test session holds open waits for it (here 5 s, one Hive try per attempt), then stops with exit 3 and
    says why, before it writes a table."""
    import os
    import re
    import subprocess
    import sys

    from tests import CHECKOUT

    spark.sql("SHOW DATABASES").collect()  # this session's Derby is booted
    url = spark.conf.get("spark.hadoop.javax.jdo.option.ConnectionURL")
    held = re.search(r"databaseName=(.*)/metastore_db", url).group(1)
    conf, _ = write_job(tmp_path, [("app", users_table())], [], [(users_table(), 1, {2: "a", 3: 1}, 120)],
                        extra=f'metastore_dir = "{held}"\n[spark]\nmaster = "local[1]"\ndriver_memory = "1g"\n')  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "TIDELAKE_METASTORE_WAIT": "5"}  # 300 s by default
    env.pop("PYSPARK_GATEWAY_PORT", None)
    run = subprocess.run(
        [sys.executable, "-m", "backfill", "run", "--config", str(conf), "--json", "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 3, run.stderr[-3000:]
    assert "waited 5 s" in run.stderr
    # each of the run's attempts is one try of Hive's (not ten, 2 s apart, which outlast the wait)
    assert "Retrying HMSHandler" in run.stderr and "(attempt 2 of" not in run.stderr
    assert "embedded Derby database is open in another process" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    assert not (tmp_path / "wh").exists() or not any((tmp_path / "wh").rglob("_delta_log"))
