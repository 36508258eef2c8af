"""The soak (issue 52): a bounded loop of scheduled runs over a growing history, with random kills,
random network faults and now and then a second run of the same job at once.

The simulated upstream's captures are in a bucket of S3Proxy reached only through Toxiproxy; the history grows
as the loop goes: tick `i` of `n` may read up to capture `i * captures / n` (`--until-ts`; under a time bound,
`TIDELAKE_SOAK_SECONDS`, the share of the time gone if that is more). Each tick is one scheduled run, drawn at
random (seeded): a run in this process, a `backfill run` subprocess that gets SIGKILLed (its whole process
group) at a random moment of its life, or such a subprocess together with a run in this process (two runs of
the job at once); and, independently, a network fault for the tick's length: none, latency, connections reset
mid-read or mid-upload, or a window of refused connections. After every tick, whatever its end: every commit
in the tables' logs is whole and carries our tag, and every table equals the simulator's state at the ts its
log records; a run that exited 0 leaves all of them at its capture. At the end one plain run: rows lost must
be 0.

The warehouse is a local folder: two runs at once are safe only on storage whose Delta log store can
put-if-absent (docs/operations.md "One writer per table"; plain S3 cannot), and the S3 network faults
during the Delta commit itself are drilled in test_network_s3.py.

`TIDELAKE_SOAK_RUNS` sets the number of ticks (default 200; the drill tier), `TIDELAKE_SOAK_SEED` the
seed, `TIDELAKE_SOAK_SECONDS` a time after which no tick starts (a loaded machine). The figures (runs,
faults by kind, retries, exits by code, rows lost) are printed at the end.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import pytest

from backfill.cli import main
from tests.expected import table_difference, warehouse_differences
from tests.faults.conftest import APP_ID
from tests.faults.harness import (
    REPO,
    Store,
    assert_no_secret,
    command,
    delta_tables,
    environment,
    gone_for_a_while,
    open_store,
    resets,
    whole_tagged_commits,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.drill]

SOAK_RUNS = int(os.environ.get("TIDELAKE_SOAK_RUNS", "200"))
SOAK_SEED = int(os.environ.get("TIDELAKE_SOAK_SEED", "52"))
# A wall-clock bound too (seconds; unset: none): no tick starts after it, the final run and figures follow
SOAK_SECONDS = float(os.environ.get("TIDELAKE_SOAK_SECONDS", "inf"))
KILLED_SHARE, TWO_AT_ONCE_SHARE = 0.10, 0.06  # of the ticks; the rest are plain runs in this process
FAULTS = {  # kind -> weight
    "none": 4,
    "latency": 1.5,
    "resets mid-read": 1.5,
    "resets mid-upload": 1.5,
    "refused window": 1.5,
}
EXIT_KILLED = "killed"
SUBPROCESS_SECONDS = 60.0  # a subprocess run's life before the soak has timed one (JVM start included)


def recorded_ts(table: Path) -> int | None:
    """The transaction version (the resolved ts) of our app id in the table's newest commit that has one."""
    found: tuple[int, int] | None = None
    for commit in (table / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if action.get("txn", {}).get("appId") == APP_ID and (
                found is None or int(commit.stem) > found[0]
            ):
                found = (int(commit.stem), int(action["txn"]["version"]))
    return None if found is None else found[1]


def tables_at_their_ts(spark, warehouse: Path, sim: Path, scan_at: dict[int, str]) -> tuple[list[str], int]:
    """Problems of the tables, each compared with the simulator's state at the ts its log records (a
    capture's resolved ts), and the expected rows they lack."""
    from tidbsim import load_expected

    problems, missing = [], 0
    expected: dict[str, dict] = {}
    for table in delta_tables(warehouse):
        label, ts = f"{table.parent.name}.{table.name}", recorded_ts(table)
        if ts not in scan_at:
            problems.append(f"{label}: records ts {ts}, which is no capture's resolved ts")
            continue
        state = expected.setdefault(scan_at[ts], load_expected(sim, scan_at[ts]))
        want = state.get((table.parent.name, table.name))
        if want is None:
            problems.append(f"{label}: at {ts} the upstream has no such table")
            continue
        problem, lacking = table_difference(spark, str(table), want)
        missing += lacking
        if problem:
            problems.append(f"{label} at {ts}: {problem}")
    return problems, missing


class Subprocess:
    """A `backfill run` of the soak's job as a process group of its own (driver, JVM, Python workers)."""

    def __init__(self, config: Path, until_ts: int, stderr: Path) -> None:
        self.stderr = stderr
        self.started = time.monotonic()
        with open(stderr, "w") as err:
            self.proc = subprocess.Popen(
                command("backfill", "run", "--config", str(config), "--until-ts", str(until_ts), "--quiet"),
                env=environment(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip

    def kill_after(self, seconds: float) -> int | str:
        """SIGKILL the group after `seconds` unless it ended before: EXIT_KILLED, or its exit code."""
        try:
            return self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return EXIT_KILLED

    def finish(self) -> int:
        return self.proc.wait(timeout=900)

    def err(self) -> str:
        text = self.stderr.read_text()
        assert_no_secret(text)
        return text


def s3a_retry_counters(spark, store: Store) -> Counter[str]:
    """This JVM's S3A counters of retried and throttled calls for the store's bucket (a subprocess's own
    JVM counts its retries apart: they are not seen here)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(f"s3a://{store.proxy.name}/")
    counters = path.getFileSystem(spark._jsc.hadoopConfiguration()).getIOStatistics().counters()  # type: ignore[attr-defined]
    return Counter(
        {str(k): int(counters.get(k)) for k in counters.keySet().toArray() if _counts_a_retry(str(k))}
    )


def _counts_a_retry(name: str) -> bool:
    return "retry" in name or "throttl" in name  # not `op_exists.failures`: probes of absent paths


@pytest.mark.drill
@pytest.mark.timeout(0)  # bounded by its run count, not by the suite's per-test limit
def test_soak_scheduled_runs_with_random_kills_faults_and_overlaps(
    spark, local_s3, toxiproxy, tmp_path_factory, tmp_path: Path, monkeypatch, capsys
) -> None:
    from tidbsim import SimulationConfig, load_index, simulate

    captures = max(2, min(25, SOAK_RUNS // 8))
    sim = tmp_path_factory.mktemp("soak") / "sim"
    simulate(
        SimulationConfig(out=sim, seed=SOAK_SEED, tables=3, rows=20, txns=12 * captures, scans=captures, ddls_per_scan=0)
    )  # fmt: skip
    index = load_index(sim)
    scan_at = {int(s["resolved_ts"]): str(s["scan_id"]) for s in index}
    warehouse = tmp_path / "wh"
    store = next(open_store(spark, local_s3, toxiproxy, sim, tmp_path, monkeypatch, warehouse=warehouse))
    proxy, endpoint = store.proxy, f"127.0.0.1:{store.proxy.port}"
    rng = random.Random(SOAK_SEED)
    faults: dict[str, Callable[[], AbstractContextManager[None]]] = {
        "none": nullcontext,
        "latency": lambda: proxy.toxic("latency", latency=30, jitter=30),
        "resets mid-read": lambda: resets(proxy, "downstream", toxicity=0.2),
        "resets mid-upload": lambda: resets(proxy, "upstream", toxicity=0.2),
        "refused window": lambda: gone_for_a_while(
            proxy, after=rng.uniform(1, 20), lasting=rng.uniform(1, 6)
        ),
    }
    injected: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    exits: Counter[str] = Counter()
    lifetimes: list[float] = []  # of subprocess runs that ended by themselves
    in_process_times: list[float] = []
    retries_before = s3a_retry_counters(spark, store)
    started = time.monotonic()

    def life() -> float:
        """A subprocess run's expected life: measured, else guessed from the runs in this process."""
        if lifetimes:
            return sum(lifetimes) / len(lifetimes)
        if in_process_times:
            return SUBPROCESS_SECONDS + 2 * sum(in_process_times) / len(in_process_times)
        return SUBPROCESS_SECONDS

    def in_process(until_ts: int) -> tuple[int, str]:
        began = time.monotonic()
        code = main(["run", "--config", str(store.config), "--until-ts", str(until_ts), "--quiet"])
        in_process_times.append(time.monotonic() - began)
        err = capsys.readouterr().err
        assert_no_secret(err)
        return code, err

    def judged(tick: int, how: str, code: int | str, err: str) -> None:
        exits[f"{how} {code}"] += 1
        assert code in (0, 2, 3, EXIT_KILLED), f"tick {tick} ({how}) ended {code}:\n{err[-3000:]}"
        if code == 2:
            assert endpoint in err, f"tick {tick} ({how}): exit 2 without naming the endpoint:\n{err[-3000:]}"
        if code == 3:
            assert "another run" in err, err[-3000:]

    ticks = 0
    for tick in range(SOAK_RUNS):
        if time.monotonic() - started > SOAK_SECONDS:
            break
        ticks += 1
        # The history grows with the ticks, or with the time under a time bound (else a bounded soak on a
        # loaded machine would read the first captures only).
        grown = max(tick / SOAK_RUNS, (time.monotonic() - started) / SOAK_SECONDS)
        scan = index[min(len(index) - 1, int(grown * len(index)))]
        until_ts = int(scan["resolved_ts"])
        fault = rng.choices(sorted(FAULTS), weights=[FAULTS[k] for k in sorted(FAULTS)])[0]
        draw = rng.random()
        kind = (
            "killed"
            if draw < KILLED_SHARE
            else "two at once"
            if draw < KILLED_SHARE + TWO_AT_ONCE_SHARE
            else "run"
        )
        injected[fault] += 1
        kinds[kind] += 1
        tick_started = time.monotonic()
        with faults[fault]():
            if kind == "run":
                code, err = in_process(until_ts)
                judged(tick, "run", code, err)
            elif kind == "killed":
                run = Subprocess(store.config, until_ts, tmp_path / "killed.err")
                ended = run.kill_after(rng.uniform(0.2, 1.1) * life())
                if ended != EXIT_KILLED:
                    lifetimes.append(time.monotonic() - run.started)
                judged(tick, "killed", ended, run.err())
            else:
                other = Subprocess(store.config, until_ts, tmp_path / "other.err")
                time.sleep(rng.uniform(0.3, 0.9) * life())  # this run's own work overlaps the other's
                code, err = in_process(until_ts)
                judged(tick, "two at once: this", code, err)
                judged(tick, "two at once: other", other.finish(), other.err())
                lifetimes.append(time.monotonic() - other.started)
        problems = whole_tagged_commits(warehouse, APP_ID)
        assert problems == [], f"tick {tick} ({kind}, {fault}): {problems}"
        if kind == "run" and code == 0:  # every table at the capture
            problems = warehouse_differences(spark, warehouse, sim, str(scan["scan_id"]))
        else:
            problems, _ = tables_at_their_ts(spark, warehouse, sim, scan_at)
        assert problems == [], f"tick {tick} ({kind}, {fault}): {problems}"
        with capsys.disabled():
            print(
                f"soak tick {tick}: {kind}, {fault}, until capture {scan['scan_id']}: "
                f"{time.monotonic() - tick_started:.0f} s; so far: runs {dict(kinds)}, faults {dict(injected)}, "
                f"exits {dict(exits)}, S3A retries {dict(s3a_retry_counters(spark, store) - retries_before)}",
                flush=True,
            )

    assert main(["run", "--config", str(store.config), "--quiet"]) == 0
    capsys.readouterr()
    final = warehouse_differences(spark, warehouse, sim, str(index[-1]["scan_id"]))
    _, lost = tables_at_their_ts(spark, warehouse, sim, scan_at)
    retries = s3a_retry_counters(spark, store) - retries_before
    with capsys.disabled():
        print(
            f"\nsoak: {ticks} of {SOAK_RUNS} runs (seed {SOAK_SEED}) over {len(index)} captures in "
            f"{(time.monotonic() - started) / 60:.1f} min; runs by kind {dict(kinds)}; faults by kind "
            f"{dict(injected)}; S3A retries in this process {dict(retries)}; exits {dict(exits)}; "
            f"rows lost {lost}; differences after the last run {final}",
            flush=True,
        )
    assert final == []
    assert lost == 0
