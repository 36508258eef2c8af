"""Exactly once: reruns add nothing, a run killed between two tables' commits finishes on rerun, and two
windows in sequence equal one window over the same span."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.run import run_backfill
from tests.captures import Capture, users_table
from tests.kill import killed_after_first_table, table_label
from tidelake import delta
from tidelake.config import load_config

pytestmark = pytest.mark.spark

USERS, ORDERS = users_table(100, "users"), users_table(200, "orders")


def write_captures(root: Path) -> None:
    """Two overlapping captures over two tables: s2 re-delivers s1's tail."""
    s1 = Capture(root, "s1", checkpoint_ts=100, current_ts=200, tables=[("app", USERS), ("app", ORDERS)])
    s2 = Capture(root, "s2", checkpoint_ts=150, current_ts=300, tables=[("app", USERS), ("app", ORDERS)])
    for commit in range(101, 300, 7):
        handle = commit % 5
        for cap in (s1, s2):
            if cap.checkpoint_ts < commit <= cap.current_ts:
                cap.put(1, USERS, handle, {2: f"u{commit}", 3: commit}, commit - 1, commit)
                if commit % 3 == 0:
                    cap.delete(1, 200, handle, commit - 1, commit)
                else:
                    cap.put(1, ORDERS, handle, {2: f"o{commit}", 3: -commit}, commit - 1, commit)
    s1.init_and_resolve(190).write()
    s2.init_and_resolve(290).write()


def config(tmp_path: Path, warehouse: str):
    conf = tmp_path / f"{warehouse}.toml"
    conf.write_text(f'[job]\nname = "once"\n[source]\npath = "{tmp_path / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / warehouse}"\n')  # fmt: skip
    return load_config(conf)


def snapshot(spark, root: Path) -> dict[str, list[tuple]]:
    return {
        name: sorted(tuple(r) for r in spark.read.format("delta").load(str(root / "app" / name)).collect())
        for name in ("users", "orders")
    }


def test_two_windows_equal_one_and_reruns_add_no_version(spark, tmp_path: Path) -> None:
    write_captures(tmp_path / "scans")
    one = config(tmp_path, "one")
    assert run_backfill(spark, one).resolved_ts == 290

    two = config(tmp_path, "two")
    first = run_backfill(spark, two, until_ts=170)
    assert first.resolved_ts == 170
    assert delta.recorded_txn_version(spark, str(tmp_path / "two" / "app" / "users"), "tidelake:once") == 170
    second = run_backfill(spark, two)
    assert (second.checkpoint_ts, second.resolved_ts) == (170, 290)
    assert snapshot(spark, tmp_path / "two") == snapshot(spark, tmp_path / "one")

    versions = {n: delta.table_version(spark, str(tmp_path / "one" / "app" / n)) for n in ("users", "orders")}
    run_backfill(spark, one)
    assert versions == {n: delta.table_version(spark, str(tmp_path / "one" / "app" / n)) for n in versions}


def test_killed_between_two_tables_commits_then_rerun_finishes_once(
    spark, tmp_path: Path, monkeypatch
) -> None:
    write_captures(tmp_path / "scans")
    reference = config(tmp_path, "ref")
    run_backfill(spark, reference)

    crashing = config(tmp_path, "crash")
    with killed_after_first_table(monkeypatch):
        run_backfill(spark, crashing)

    root = tmp_path / "crash" / "app"
    recorded = {
        n: delta.recorded_txn_version(spark, str(root / n), "tidelake:once") for n in ("users", "orders")
    }
    assert sorted(recorded.values(), key=str) == [290, None] or list(recorded.values()).count(290) == 1
    done = next(n for n, v in recorded.items() if v == 290)
    done_version = delta.table_version(spark, str(root / done))

    result = run_backfill(spark, crashing)
    assert result.resolved_ts == 290
    assert delta.table_version(spark, str(root / done)) == done_version, (
        "the finished table is not written again"
    )
    assert snapshot(spark, tmp_path / "crash") == snapshot(spark, tmp_path / "ref")
    for name, rows in snapshot(spark, tmp_path / "crash").items():
        assert len({r[0] for r in rows}) == len(rows), f"duplicate keys in {name}"


def test_killed_after_the_first_table_of_a_simulated_workload_rerun_loses_nothing(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """A run killed after its first table's commit leaves the other tables without a Delta table at all;
    the rerun must take those back to the oldest capture, not start them at the committed table's ts."""
    from tests.expected import warehouse_differences
    from tidbsim import SimulationConfig, load_index, simulate

    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=3, tables=3, rows=30, txns=90, scans=3))
    conf = tmp_path / "sim.toml"
    conf.write_text(f'[job]\nname = "once"\n[source]\npath = "{out / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    config = load_config(conf)
    with killed_after_first_table(monkeypatch) as finished:
        run_backfill(spark, config)
    created = {
        p: delta.table_version(spark, str(p))
        for p in (tmp_path / "wh").glob("*/*")
        if (p / "_delta_log").is_dir()
    }
    (first,) = finished
    assert {f"{p.parent.name}.{p.name}" for p in created} == {table_label(first)}, (
        "the kill leaves exactly the table that finished its walk"
    )

    last = load_index(out)[-1]
    assert run_backfill(spark, config).resolved_ts == last["resolved_ts"]
    every = [p for p in (tmp_path / "wh").glob("*/*") if (p / "_delta_log").is_dir()]
    assert set(every) > set(created), "the rerun builds the tables the kill left out"
    assert {p: delta.table_version(spark, str(p)) for p in created} == created, (
        "a finished table is written again"
    )
    assert warehouse_differences(spark, tmp_path / "wh", out, last["scan_id"]) == []


def test_a_rename_killed_between_its_new_table_and_removing_the_old_one_is_finished_by_the_rerun(
    spark, tmp_path: Path
) -> None:
    """The state a kill at `ddl.rename` leaves (the drill found it): the new name's table holds the step,
    the old name's table is still there. The rerun removes the old table and reaches the expected state."""
    import json
    import shutil

    from backfill.codec.history import job_finished_ts
    from tests.expected import warehouse_differences
    from tidbsim import SimulationConfig, load_index, simulate

    out = tmp_path / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=4, tables=2, rows=10, txns=40, scans=2, ddls_per_scan=2, ddl_kinds=("rename_table",)
        )
    )
    first, last = load_index(out)
    jobs = (out / "scans" / last["scan_id"] / "schema" / "ddl_jobs.jsonl").read_text().splitlines()
    renames = sorted(
        job_finished_ts(j)
        for j in map(json.loads, jobs)
        if j["type"] == 14 and first["resolved_ts"] < job_finished_ts(j) <= last["resolved_ts"]
    )
    assert renames, "the second window must rename a table"
    conf = tmp_path / "job.toml"
    conf.write_text(f'[job]\nname = "rn"\n[source]\npath = "{out / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    config = load_config(conf)
    run_backfill(spark, config, until_ts=first["resolved_ts"])
    before = {p.parent for p in (tmp_path / "wh").glob("*/*/_delta_log")}
    kept = tmp_path / "kept"
    for path in before:
        shutil.copytree(path, kept / path.parent.name / path.name)

    run_backfill(spark, config, until_ts=renames[0])  # through the rename: the old table is removed
    (old,) = before - {p.parent for p in (tmp_path / "wh").glob("*/*/_delta_log")}
    shutil.copytree(kept / old.parent.name / old.name, old)  # ... but, as after the kill, it is back

    result = run_backfill(spark, config)
    assert result.resolved_ts == last["resolved_ts"]
    assert not old.exists(), "the rerun kept the renamed table's old path"
    assert warehouse_differences(spark, tmp_path / "wh", out, last["scan_id"]) == []
