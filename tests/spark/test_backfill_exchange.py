"""EXCHANGE PARTITION end to end: the simulator swaps a partition of a RANGE-partitioned table with a normal
table as TiDB does (ids change hands at the job's finished ts, no row events), and both Delta tables equal
the expected state, capture by capture, over all captures at once, and after a kill between the two
tables' exchange commits (each commit exactly once)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import backfill.apply.stage as stage
from backfill.run import run_backfill
from tests.expected import warehouse_differences
from tests.faults.harness import kill_at, untagged_commits
from tidbsim import SimulationConfig, load_index, simulate
from tidelake import delta
from tidelake.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXCHANGE_PARTITION = 42


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exchange") / "sim"
    result = simulate(SimulationConfig(out=out, seed=6, tables=4, rows=12, txns=80, scans=3, ddls_per_scan=2,
                                       ddl_kinds=("exchange_partition", "add_column")))  # fmt: skip
    assert result.stats["ddl_exchange_partition"] >= 1
    return out


def _config(tmp_path: Path, source: Path, warehouse: Path, name: str = "exch"):
    conf = tmp_path / f"{name}.toml"
    conf.write_text(f'[job]\nname = "{name}"\n[source]\npath = "{source}"\n'
                    f'[target]\nwarehouse = "{warehouse}"\n')  # fmt: skip
    return load_config(conf)


def _exchange_jobs(sim: Path) -> list[dict]:
    jobs = {}
    for scan in load_index(sim):
        text = (sim / "scans" / scan["scan_id"] / "schema" / "ddl_jobs.jsonl").read_text()
        for job in map(json.loads, text.splitlines()):
            if job["type"] == EXCHANGE_PARTITION:
                jobs[job["id"]] = job
    return list(jobs.values())


def _exchange_commits(spark, path: Path, job_id: int) -> int:
    """How many commits of the table record the exchange job's step."""
    found = 0
    for version in range(delta.table_version(spark, str(path)) + 1):
        metadata = delta.json_object(delta.commit_user_metadata(spark, str(path), version)) or {}
        found += metadata.get("ddl_job_id") == job_id and metadata.get("step") == "ddl"
    return found


@pytest.mark.drill  # long tier (80 s): the kill test below runs the same workload at once in the default suite
def test_capture_by_capture_and_all_at_once_equal_the_expected_state(
    spark, tmp_path: Path, sim: Path
) -> None:
    scans = load_index(sim)
    source = tmp_path / "arriving"
    source.mkdir()
    config = _config(tmp_path, source, tmp_path / "wh1")
    for scan in scans:
        shutil.copytree(sim / "scans" / scan["scan_id"], source / scan["scan_id"])
        run = run_backfill(spark, config)
        assert run.resolved_ts == scan["resolved_ts"], (scan["scan_id"], json.dumps(run.to_dict())[:2000])
        assert warehouse_differences(spark, tmp_path / "wh1", sim, scan["scan_id"]) == []

    run = run_backfill(spark, _config(tmp_path, sim / "scans", tmp_path / "wh2"))
    assert run.resolved_ts == scans[-1]["resolved_ts"]
    assert warehouse_differences(spark, tmp_path / "wh2", sim, scans[-1]["scan_id"]) == []


def test_killed_between_the_two_exchange_commits_the_rerun_does_the_other_once(
    spark, tmp_path: Path, sim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run dies after the first table's exchange commit; the rerun finds that side tagged, reads the
    first table as it stood before the job from its pinned version, and commits only the other side."""
    real, calls = stage.apply_exchange_step, []

    def commit_one_then_die(*args, **kwargs):
        if calls:
            raise SystemExit("killed")
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(stage, "apply_exchange_step", commit_one_then_die)
    config = _config(tmp_path, sim / "scans", tmp_path / "wh")
    with pytest.raises(SystemExit):
        run_backfill(spark, config)
    monkeypatch.setattr(stage, "apply_exchange_step", real)

    scans = load_index(sim)
    assert run_backfill(spark, config).resolved_ts == scans[-1]["resolved_ts"]
    assert warehouse_differences(spark, tmp_path / "wh", sim, scans[-1]["scan_id"]) == []
    job = _exchange_jobs(sim)[0]
    pt_name = job["binlog"]["TableInfo"]["name"]["O"]
    for name in (pt_name, job["table_name"]):
        assert _exchange_commits(spark, tmp_path / "wh" / job["schema_name"] / name, job["id"]) == 1, name


@pytest.mark.drill
def test_sigkill_between_the_two_exchange_commits_then_rerun_equals_the_expected_state(
    spark, tmp_path: Path, sim: Path
) -> None:
    """A real `backfill run` SIGKILLed at `ddl.exchange` (first reached right after the first side's
    commit): the rerun commits the other side once, every commit carries our tag."""
    config = _config(tmp_path, sim / "scans", tmp_path / "wh", name="drill")
    kill_at("ddl.exchange", "backfill", "run", "--config", str(tmp_path / "drill.toml"), "--quiet",
            workdir=tmp_path)  # fmt: skip
    job = _exchange_jobs(sim)[0]
    pt_name = job["binlog"]["TableInfo"]["name"]["O"]
    sides = [tmp_path / "wh" / job["schema_name"] / n for n in (pt_name, job["table_name"])]
    assert sorted(_exchange_commits(spark, p, job["id"]) for p in sides) == [0, 1]
    assert run_backfill(spark, config).resolved_ts == load_index(sim)[-1]["resolved_ts"]
    assert warehouse_differences(spark, tmp_path / "wh", sim, load_index(sim)[-1]["scan_id"]) == []
    assert [_exchange_commits(spark, p, job["id"]) for p in sides] == [1, 1]
    assert untagged_commits(tmp_path / "wh", "tidelake:drill") == []
