"""The drill's tools: run a CLI as a real subprocess, kill it (SIGKILL, its whole process group) at a
named `tidelake.faults` point it provably reached, and judge what it left in the Delta tables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SIGNAL_WAIT_SECONDS = 900.0  # a loaded 2-core machine takes minutes to start a JVM and plan


@dataclass(frozen=True)
class Finished:
    """A subprocess that ran to its end."""

    code: int
    stdout: str
    stderr: str


def environment(**extra: str) -> dict[str, str]:
    """The test's environment for a subprocess: this worktree's code, the drill's secret, no armed point."""
    from tests.faults.conftest import SECRET, SECRET_ENV

    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDELAKE_FAULT_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env | {SECRET_ENV: SECRET} | extra


def assert_no_secret(*outputs: str) -> None:
    """The drill's secret shows in none of `outputs` (logs, JSON, reports, error messages)."""
    from tests.faults.conftest import SECRET

    for output in outputs:
        assert SECRET not in output, (
            f"the secret leaked: ...{output[max(0, output.find(SECRET) - 200) :][:400]}"
        )


def command(tool: str, *args: str) -> list[str]:
    return [sys.executable, "-m", tool, *args]


def run(tool: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Finished:
    """Run `python -m <tool> <args>` to its end."""
    done = subprocess.run(
        command(tool, *args), env=env or environment(), cwd=REPO, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    assert_no_secret(done.stdout, done.stderr)
    return Finished(done.returncode, done.stdout, done.stderr)


def kill_at(point: str, tool: str, *args: str, workdir: Path) -> str:
    """Start `python -m <tool> <args>` with `point` armed, wait until it reports reaching it, SIGKILL its
    process group (driver, JVM, Python workers at once) and return what it wrote to stderr.

    Fails if the process ends without reaching the point."""
    signal_file = workdir / f"signal-{point}"
    signal_file.unlink(missing_ok=True)
    stderr_file = workdir / f"stderr-{point}"
    env = environment(TIDELAKE_FAULT_POINT=point, TIDELAKE_FAULT_SIGNAL=str(signal_file))
    with open(stderr_file, "w") as err:
        proc = subprocess.Popen(
            command(tool, *args), env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + SIGNAL_WAIT_SECONDS
        try:
            while not (signal_file.exists() and signal_file.read_text().strip()):
                if proc.poll() is not None:
                    raise AssertionError(
                        f"{point}: never reached; the run ended with {proc.returncode}:\n"
                        + stderr_file.read_text()[-3000:]
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(f"{point}: not reached within {SIGNAL_WAIT_SECONDS:.0f} s")
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"{point}: ended with {proc.returncode}, not by the kill"
    err = stderr_file.read_text()
    assert_no_secret(err)
    return err


def delta_tables(warehouse: Path) -> list[Path]:
    """Every Delta table folder `<warehouse>/<db>/<table>`."""
    if not warehouse.is_dir():
        return []
    return sorted(
        t for db in warehouse.iterdir() if db.is_dir() for t in db.iterdir() if (t / "_delta_log").is_dir()
    )


def untagged_commits(warehouse: Path, app_id: str) -> list[str]:
    """Commits in the tables' logs that do not carry our tag: a `txn` action of `app_id` (or its `:repair`
    id), or commitInfo userMetadata naming the step. Empty: every commit is ours and accounted for."""
    found = []
    for table in delta_tables(warehouse):
        for commit in sorted((table / "_delta_log").glob("*.json")):
            actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
            txns = [a["txn"]["appId"] for a in actions if "txn" in a]
            info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
            if any(t == app_id or t.startswith(app_id + ":") for t in txns):
                continue
            metadata = info.get("userMetadata")
            if metadata and "step" in json.loads(metadata):
                continue
            found.append(f"{table.parent.name}.{table.name} {commit.name}: {info.get('operation')}")
    return found


def table_rows(spark, warehouse: Path, drop: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Every table's rows (all columns but `drop`), sorted, by `db.table`."""
    return {
        f"{t.parent.name}.{t.name}": sorted(
            repr(tuple(r)) for r in spark.read.format("delta").load(str(t)).drop(*drop).collect()
        )
        for t in delta_tables(warehouse)
    }


def report_outcome(capsys, code: int, stderr: str) -> None:
    """Print how a faulted run ended (past pytest's capture), for the drill's table of cases."""
    last = (stderr.strip().splitlines() or [""])[-1][:300]
    with capsys.disabled():
        print(f"\nfault outcome: exit {code}: {last if code else 'finished'}")
