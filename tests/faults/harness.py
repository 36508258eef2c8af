"""The drill's tools: run a CLI as a real subprocess, kill it (SIGKILL, its whole process group) at a
named `tidelake.faults` point it provably reached, and judge what it left in the Delta tables."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.toxiproxy import Proxy

REPO = Path(__file__).resolve().parents[2]
S3_SECRET_ENV = "TIDELAKE_FAULTS_S3_SECRET"
_BUCKETS = itertools.count()
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


def versions(warehouse: Path) -> dict[str, int]:
    """Every table's newest version in its log, by `db.table` (a rerun that finds nothing to do adds none)."""
    return {
        f"{t.parent.name}.{t.name}": max(int(c.stem) for c in (t / "_delta_log").glob("*.json"))
        for t in delta_tables(warehouse)
    }


def whole_tagged_commits(warehouse: Path, app_id: str) -> list[str]:
    """Problems with the tables' logs: a commit file that does not parse (half written) or lacks our tag."""
    problems = untagged_commits(warehouse, app_id)
    for table in delta_tables(warehouse):
        for commit in sorted((table / "_delta_log").glob("*.json")):
            try:
                actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
            except ValueError:
                problems.append(f"{commit}: not whole JSON")
                continue
            if not any("commitInfo" in a for a in actions):
                problems.append(f"{commit}: no commitInfo")
    return problems


@contextmanager
def resets(proxy: Proxy, stream: str, toxicity: float, after_ms: int = 0) -> Iterator[None]:
    """A share `toxicity` of the proxy's connections reset (TCP RST) `after_ms` into them, on `stream`
    (downstream: mid-read, the server's answers; upstream: mid-upload, our requests)."""
    proxy.server.call(
        "POST", f"/proxies/{proxy.name}/toxics",
        {"name": "resets", "type": "reset_peer", "stream": stream, "toxicity": toxicity,
         "attributes": {"timeout": after_ms}},
    )  # fmt: skip
    try:
        yield
    finally:
        proxy.remove("resets")


@contextmanager
def gone_for_a_while(proxy: Proxy, after: float, lasting: float) -> Iterator[None]:
    """The proxy's server unreachable (every connection closed, new ones refused) from `after` seconds
    into the block for `lasting` seconds; reachable again when the block ends in any case."""
    timers = [threading.Timer(after, proxy.disable), threading.Timer(after + lasting, proxy.enable)]
    for timer in timers:
        timer.start()
    try:
        yield
    finally:
        for timer in timers:
            timer.cancel()
        proxy.enable()


@dataclass
class Store:
    """A bucket of captures behind `proxy`, the job's config reading them, and its warehouse (`warehouse`
    as the config names it; `local`: the folder its Delta logs can be read from: S3Proxy's filesystem
    backend keeps each object as a file)."""

    proxy: Proxy
    config: Path
    warehouse: str
    local: Path


def open_store(
    spark, local_s3, toxiproxy, sim: Path, folder: Path, monkeypatch, warehouse: Path | None = None
) -> Iterator[Store]:
    """A new bucket holding the captures of `sim` behind a new Toxiproxy proxy (`s3_job`). Deletes the
    proxy when resumed."""
    bucket = f"faults-{next(_BUCKETS)}"
    proxy = toxiproxy.proxy(bucket, local_s3.port)
    config, target, local = s3_job(spark, local_s3, sim, folder, monkeypatch, bucket, proxy.port, warehouse)
    yield Store(proxy, config, target, local)
    toxiproxy.call("DELETE", f"/proxies/{proxy.name}")


def s3_job(
    spark, local_s3, sim: Path, folder: Path, monkeypatch, bucket: str, port: int, warehouse: Path | None
) -> tuple[Path, str, Path]:
    """A new `bucket` holding the captures of `sim`, uploaded through the endpoint 127.0.0.1:`port` (a
    fault proxy) before any fault (its S3A file system, cached by bucket, is made then with the config's
    endpoint and settings), and the job config reading them. The warehouse is in the bucket too, unless
    a local `warehouse` is given. Returns the config, the warehouse it names, and the folder its Delta
    logs can be read from (S3Proxy's filesystem backend keeps each object as a file)."""
    from tests.faults.conftest import JOB, SPARK_LINES
    from tidelake import fs
    from tidelake.config import load_config
    from tidelake.objectstore import configure

    local_s3.make_bucket(bucket)
    monkeypatch.setenv(S3_SECRET_ENV, local_s3.credential)
    target = str(warehouse) if warehouse is not None else f"s3a://{bucket}/wh"
    config = folder / f"{bucket}.toml"
    config.write_text(
        f'[job]\nname = "{JOB}"\n[source]\npath = "s3a://{bucket}/scans"\n'
        f'[target]\nwarehouse = "{target}"\n{SPARK_LINES}'
        f'[object_store]\nendpoint = "http://127.0.0.1:{port}"\npath_style_access = true\n'
        f'access_key = "{local_s3.identity}"\nsecret_key = "${{{S3_SECRET_ENV}}}"\n'
        "connect_timeout = 2\nread_timeout = 5\nretries = 3\nretry_wait = 0.2\n"
        "throttle_retries = 4\nthrottle_wait = 0.2\n"
    )
    configure(spark, load_config(config).object_store)
    fs.upload(spark, str(sim / "scans"), f"s3a://{bucket}/scans")
    local = warehouse if warehouse is not None else local_s3.folder / "data" / bucket / "wh"
    return config, target, local
