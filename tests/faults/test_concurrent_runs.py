"""Two runs at once (issue 17 §2): a scheduler starts the same job twice. Both `backfill run` processes
start together on the same warehouse; the tables must end exactly as after one run, with no commit
without our tag, and a run that lost a race to the other must exit with status 3 and say so (its work is
in the tables through the winner's identical commits; nothing is half-applied)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from backfill.cli import main as backfill_main
from tests.faults.conftest import APP_ID
from tests.faults.harness import REPO, assert_no_secret, command, environment, table_rows, untagged_commits

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.drill]

EXIT_CONCURRENT = 3


@pytest.mark.parametrize("from_scratch", [True, False], ids=["first-load", "merge-and-ddl"])
def test_two_runs_of_one_job_at_once_end_as_one_run(
    spark, workload, prepared, tmp_path, from_scratch: bool, capsys
) -> None:
    warehouse = tmp_path / "wh"
    if not from_scratch:
        shutil.copytree(prepared.start("kv-scan"), warehouse)
    conf = workload.config(tmp_path, "kv-scan", warehouse)
    argv = command("backfill", "run", "--config", str(conf), "--json", "--quiet")
    runs = [
        subprocess.Popen(
            argv, env=environment(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outcomes = []
    for proc in runs:
        out, err = proc.communicate(timeout=600)
        outcomes.append((proc.returncode, out, err))
    codes = sorted(code for code, _, _ in outcomes)
    assert codes in ([0, 0], [0, EXIT_CONCURRENT]), [(c, _error_lines(err)) for c, _, err in outcomes]
    for code, out, err in outcomes:
        assert_no_secret(out, err)
        if code == EXIT_CONCURRENT:
            assert "another run" in err and "Traceback" not in err, err[-2000:]
            assert out == ""
        else:
            json.loads(out)
    assert table_rows(spark, warehouse) == prepared.reference("kv-scan")
    assert untagged_commits(warehouse, APP_ID) == []
    # and the job is done: a plain run changes nothing
    assert backfill_main(["run", "--config", str(conf), "--json", "--quiet"]) == 0
    assert all(
        t["rows_upserted"] == t["rows_deleted"] == 0 for t in json.loads(capsys.readouterr().out)["tables"]
    )


@pytest.mark.parametrize("beside", ["maintain", "repair"])
def test_a_run_beside_maintenance_or_a_repair_ends_as_one_run(
    spark, workload, prepared, tmp_path, beside: str, capsys
) -> None:
    """`backfill run` started together with `backfill maintain` (OPTIMIZE, purge, VACUUM) or with
    `reconcile run --repair` (against the upstream's final state) on the same tables: a MERGE that loses a
    commit race is run again, so the run ends 0; the tables end as one uninterrupted run leaves them."""
    from reconcile.cli import main as reconcile_main
    from tidelake.conventions import COMMIT_TS

    warehouse = tmp_path / "wh"
    shutil.copytree(prepared.start("kv-scan"), warehouse)
    upstream = (
        f'[reconcile.upstream]\nkind = "files"\nformat = "expected"\npath = "{workload.sim / "expected"}"\n'
    )
    conf = str(workload.config(tmp_path, "kv-scan", warehouse, upstream))
    other = (
        command("backfill", "maintain", "--config", conf, "--json")
        if beside == "maintain"
        else command("reconcile", "run", "--repair", "--config", conf, "--json", "--quiet")
    )
    argvs = [command("backfill", "run", "--config", conf, "--json", "--quiet"), other]
    procs = [
        subprocess.Popen(
            argv, env=environment(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for argv in argvs
    ]
    (run_out, run_err), (other_out, other_err) = [p.communicate(timeout=600) for p in procs]
    run_code, other_code = procs[0].returncode, procs[1].returncode
    assert_no_secret(run_out, run_err, other_out, other_err)
    assert run_code == 0, run_err[-3000:]
    json.loads(run_out)
    # maintain retries its own lost races (0); a repair finds differences while the run catches up (0 or 1)
    assert other_code in ((0,) if beside == "maintain" else (0, 1)), other_err[-3000:]
    assert "Traceback" not in other_err, other_err[-3000:]
    if beside == "maintain":
        maintained = json.loads(other_out)["tables"]
        assert maintained and [t["error"] for t in maintained] == [None] * len(maintained)

    assert backfill_main(["run", "--config", conf, "--json", "--quiet"]) == 0
    assert all(
        t["rows_upserted"] == t["rows_deleted"] == 0 for t in json.loads(capsys.readouterr().out)["tables"]
    )
    # a repaired row carries the ts the upstream was read at; every other value is the uninterrupted run's
    drop = (COMMIT_TS,) if beside == "repair" else ()
    assert table_rows(spark, warehouse, drop) == table_rows(
        spark, prepared.reference_warehouse("kv-scan"), drop
    )
    assert untagged_commits(warehouse, APP_ID) == []
    assert reconcile_main(["run", "--config", conf, "--json", "--quiet"]) == 0
    capsys.readouterr()


def _error_lines(stderr: str) -> str:
    """A failed run's stderr without JVM stack frames and Spark's start-up lines: the error itself."""
    noise = ("at ", "WARNING:", "Setting default log level", "To adjust logging level")
    return "\n".join(line for line in stderr.splitlines() if not line.strip().startswith(noise))[-3000:]
