"""Kill it anywhere (issue 17 §1): a real `backfill run` / `reconcile run --repair` subprocess is stopped
with SIGKILL at a named `tidelake.faults` point it reached; a plain rerun must leave the tables exactly as
an uninterrupted run does (row by row, `_tidb_commit_ts` included), as the simulator expects them, and
with no commit in any Delta log that does not carry our transaction tag.

Each case starts from a warehouse already back-filled through the first capture (copied from one setup
run per source), so the killed run MERGEs into existing rows and walks DDL steps, not just first loads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from backfill.cli import main as backfill_main
from tests.expected import warehouse_differences
from tests.faults.conftest import APP_ID, Workload
from tests.faults.harness import assert_no_secret, delta_tables, kill_at, table_rows, untagged_commits
from tidelake import delta

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.drill]

# (source, point): every point on kv-scan; on the storage sources the points whose code differs per
# source (the MERGE of its rows, its DDL barriers); planning is the sources' own code, so every source.
CASES = [
    ("kv-scan", "backfill.plan"),
    ("kv-scan", "merge.write"),
    ("kv-scan", "apply.after_merge"),
    ("kv-scan", "apply.before_ddl"),
    ("kv-scan", "ddl.rewrite"),
    ("kv-scan", "ddl.rename"),  # the workload renames in its first window: this case starts empty
    ("csv", "backfill.plan"),
    ("csv", "merge.write"),
    ("csv", "ddl.rename"),
    ("canal-json", "backfill.plan"),
    ("canal-json", "merge.write"),
    ("canal-json", "apply.before_ddl"),
    ("kafka", "backfill.plan"),
    ("kafka", "merge.write"),
    ("kafka", "apply.before_ddl"),
]
FROM_EMPTY = {"ddl.rename"}


@pytest.mark.parametrize(("source", "point"), CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_killed_at_a_point_then_rerun_equals_an_uninterrupted_run(
    spark, workload: Workload, prepared, tmp_path: Path, source: str, point: str, capsys, request
) -> None:
    if source == "kafka":
        request.getfixturevalue("drill_kafka")  # publishes the topic, adds the source
    start, reference = prepared.start(source), prepared.reference(source)
    warehouse = tmp_path / "wh"
    if point not in FROM_EMPTY:
        shutil.copytree(start, warehouse)
    conf = workload.config(tmp_path, source, warehouse)

    kill_at(point, "backfill", "run", "--config", str(conf), "--quiet", workdir=tmp_path)
    assert untagged_commits(warehouse, APP_ID) == [], "the killed run left a commit without our tag"

    assert backfill_main(["run", "--config", str(conf), "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert_no_secret(captured.out, captured.err)
    result = json.loads(captured.out)
    assert table_rows(spark, warehouse) == reference
    assert untagged_commits(warehouse, APP_ID) == []
    if source == "kv-scan":  # the TiCDC sources carry no `_tidb_rowid`: compared with kv-scan's run instead
        assert warehouse_differences(spark, warehouse, workload.sim, workload.last_scan) == []
    # a second rerun finds everything done: no table gets a new version
    versions = {str(t): delta.table_version(spark, str(t)) for t in delta_tables(warehouse)}
    assert backfill_main(["run", "--config", str(conf), "--json", "--quiet"]) == 0
    capsys.readouterr()
    assert {str(t): delta.table_version(spark, str(t)) for t in delta_tables(warehouse)} == versions
    for table in (t for t in result["tables"] if t.get("path")):
        # the transaction version the rerun reports is the one recorded in the table's log
        assert delta.recorded_txn_version(spark, table["path"], APP_ID) == table["resolved_ts"]


def test_reconcile_repair_killed_while_writing_then_rerun_repairs_once(
    spark, workload: Workload, prepared, tmp_path: Path, capsys
) -> None:
    """`reconcile run --repair` against the simulator's expected state, killed inside its MERGE: the table
    is as before the repair; a rerun repairs it, and a third run finds it equal."""
    from reconcile.cli import main as reconcile_main
    from tests.faults.harness import delta_tables
    from tidelake.conventions import COMMIT_TS

    warehouse = tmp_path / "wh"
    shutil.copytree(prepared.reference_warehouse("kv-scan"), warehouse)
    damaged = delta_tables(warehouse)[0]
    with delta.delta_transaction(spark, "drill:tamper", 1, {"step": "drill-tamper"}):
        spark.sql(f"DELETE FROM delta.`{damaged}` WHERE {COMMIT_TS} % 3 = 0")
    conf = workload.config(
        tmp_path, "kv-scan", warehouse,
        f'[reconcile.upstream]\nkind = "files"\nformat = "expected"\npath = "{workload.sim / "expected"}"\n',
    )  # fmt: skip
    damaged_rows = table_rows(spark, warehouse)

    kill_at(
        "repair.write", "reconcile", "run", "--repair", "--config", str(conf), "--quiet", workdir=tmp_path
    )
    assert table_rows(spark, warehouse) == damaged_rows, "a killed repair changed the table"

    assert reconcile_main(["run", "--repair", "--config", str(conf), "--json", "--quiet"]) == 0
    repaired = json.loads(capsys.readouterr().out)
    assert sum(t["repair"]["upserted"] for t in repaired["tables"] if t.get("repair")) > 0
    assert reconcile_main(["run", "--config", str(conf), "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert_no_secret(captured.out, captured.err)
    # repaired rows carry the ts the upstream was read at; every other value is the uninterrupted run's
    reference = table_rows(spark, prepared.reference_warehouse("kv-scan"), drop=(COMMIT_TS,))
    assert table_rows(spark, warehouse, drop=(COMMIT_TS,)) == reference
    assert untagged_commits(warehouse, APP_ID) == []


@pytest.mark.parametrize("point", ["maintain.optimize", "maintain.purge", "maintain.vacuum"])
def test_maintain_killed_at_a_step_then_rerun_keeps_every_row(
    spark, workload: Workload, prepared, tmp_path: Path, point: str, capsys
) -> None:
    """`backfill maintain` killed before its OPTIMIZE, between OPTIMIZE and the purge, or before VACUUM:
    the rows are untouched, a rerun finishes maintenance, and the job's next run finds nothing to do."""
    warehouse = tmp_path / "wh"
    shutil.copytree(prepared.reference_warehouse("kv-scan"), warehouse)
    conf = workload.config(tmp_path, "kv-scan", warehouse)
    before = table_rows(spark, warehouse)

    kill_at(point, "backfill", "maintain", "--config", str(conf), workdir=tmp_path)
    assert table_rows(spark, warehouse) == before
    assert untagged_commits(warehouse, APP_ID) == []

    assert backfill_main(["maintain", "--config", str(conf), "--json"]) == 0
    maintained = json.loads(capsys.readouterr().out)
    assert [t["error"] for t in maintained["tables"]] == [None] * len(maintained["tables"])
    assert {"optimize", "purge", "vacuum", "checkpoint"} <= set(maintained["tables"][0]["steps"])
    assert table_rows(spark, warehouse) == before
    assert backfill_main(["run", "--config", str(conf), "--json", "--quiet"]) == 0
    assert all(
        t["rows_upserted"] == t["rows_deleted"] == 0 for t in json.loads(capsys.readouterr().out)["tables"]
    )
    assert table_rows(spark, warehouse) == before
    assert untagged_commits(warehouse, APP_ID) == []
