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
    assert codes in ([0, 0], [0, EXIT_CONCURRENT]), [(c, err[-2000:]) for c, _, err in outcomes]
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
    assert all(t["upserted"] == 0 for t in json.loads(capsys.readouterr().out)["tables"])
