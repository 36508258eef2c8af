"""Peak memory of `backfill run` on the inputs that strain it (issue 17 §4): `python bench/memory.py`.

Two workloads, each simulated once (reused between runs of the bench), each back-filled from empty by a
real `backfill run` subprocess with the demo config's Spark settings (`driver_memory = "2g"`, local[*]):

- `big-txn`: one transaction of `--txn-rows` rows (2M by default) in one capture;
- `hot-region`: about `--events` events (5M) in one window, 80% of them on one table that never splits,
  so one region carries them.

The process tree is sampled every 0.2 s from /proc: peak RSS of the Python driver, the JVM (driver and
executors: local mode runs them in one JVM), the Python workers together, and of everything at once.
The run must exit 0 and leave the simulator's expected rows. Prints one line per workload.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would shadow the package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from tidbsim import SimulationConfig, load_index, simulate
from tidbsim.engine import estimate_txns_for_events

REPO = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")


def workloads(txn_rows: int, events: int) -> dict[str, SimulationConfig]:
    """The simulations, keyed by name (each under `<data>/<name>`, filled in by `generate`)."""
    quiet = {"ddls_per_scan": 0, "open_lock_txns": 0, "v1_row_fraction": 0.0}
    return {
        "big-txn": SimulationConfig(
            out=Path("big-txn"), seed=1, tables=1, rows=txn_rows, seed_rows_per_txn=txn_rows, txns=20,
            scans=2, region_split_keys=txn_rows * 4, **quiet,
        ),
        "hot-region": SimulationConfig(
            out=Path("hot-region"), seed=2, tables=4, rows=200, events=events, scans=3,
            txns=estimate_txns_for_events(events, tables=4, rows=200),
            hot_table_share=0.8, region_split_keys=events * 4, **quiet,
        ),
    }  # fmt: skip


def generate(data: Path, name: str, config: SimulationConfig) -> Path:
    out = data / name
    marker = out / f".done-{config.rows}-{config.events}"
    if not marker.exists():
        shutil.rmtree(out, ignore_errors=True)
        started = time.perf_counter()
        simulate(dataclasses.replace(config, out=out / "sim"))
        print(f"{name}: simulated in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        marker.write_text("ok")
    return out / "sim"


@dataclass
class Peaks:
    """Peak RSS (bytes) per kind of process in the tree, and of the whole tree at one moment."""

    driver: int = 0
    jvm: int = 0
    workers: int = 0
    total: int = 0
    samples: int = 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _kind(pid: int, root: int) -> str:
    if pid == root:
        return "driver"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ")
    except OSError:
        return "other"
    return "jvm" if b"java" in cmd.split(b" ")[0] else "workers"


def watch(root: int, peaks: Peaks, stop: threading.Event) -> None:
    while not stop.is_set():
        tree, todo = [], [root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo += _children(pid)
        by_kind = {"driver": 0, "jvm": 0, "workers": 0, "other": 0}
        for pid in tree:
            kind = _kind(pid, root)  # not cached: spark-class execs java in its own pid
            by_kind[kind] += _rss(pid)
        peaks.driver = max(peaks.driver, by_kind["driver"])
        peaks.jvm = max(peaks.jvm, by_kind["jvm"])
        peaks.workers = max(peaks.workers, by_kind["workers"])
        peaks.total = max(peaks.total, sum(by_kind.values()))
        peaks.samples += 1
        time.sleep(0.2)


def run(sim: Path, work: Path) -> tuple[int, float, Peaks, int]:
    """`backfill run` from empty under the sampler, then `reconcile run` against the expected state:
    the backfill's exit status, seconds and peaks, and the reconcile's exit status (0: equal)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    demo = (REPO / "conf" / "demo.toml").read_text()
    spark_lines = demo[demo.index("[spark]") : demo.index("[reconcile]")]
    conf = work / "job.toml"
    conf.write_text(
        f'[job]\nname = "memory"\n[source]\npath = "{sim / "scans"}"\n'
        f'[target]\nwarehouse = "{work / "wh"}"\nregister = false\n{spark_lines}'
        f'[reconcile.upstream]\nkind = "files"\nformat = "expected"\npath = "{sim / "expected"}"\n'
    )
    peaks, stop = Peaks(), threading.Event()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "backfill", "run", "--config", str(conf), "--json", "--quiet"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watcher = threading.Thread(target=watch, args=(proc.pid, peaks, stop), daemon=True)
    watcher.start()
    _, err = proc.communicate()
    stop.set()
    watcher.join()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        print(err[-3000:], file=sys.stderr)
        return proc.returncode, seconds, peaks, -1
    check = subprocess.run(
        [sys.executable, "-m", "reconcile", "run", "--config", str(conf), "--quiet"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if check.returncode != 0:
        print(check.stdout[-3000:], check.stderr[-3000:], file=sys.stderr)
    return proc.returncode, seconds, peaks, check.returncode


def _parquet_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in folder.rglob("*.parquet"))


def _rows_expected(sim: Path) -> int:
    return _parquet_rows(sim / "expected" / load_index(sim)[-1]["scan_id"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--txn-rows", type=int, default=2_000_000)
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--only", choices=["big-txn", "hot-region"])
    parser.add_argument("--data", type=Path, default=REPO / ".tidelake" / "bench-memory")
    args = parser.parse_args(argv)
    mib = 1 << 20
    failed = 0
    for name, config in workloads(args.txn_rows, args.events).items():
        if args.only and name != args.only:
            continue
        sim = generate(args.data, name, config)
        events = _parquet_rows(sim / "scans")
        code, seconds, peaks, reconciled = run(sim, args.data / f"{name}-run")
        failed += code != 0 or reconciled != 0
        print(
            f"{name}: {events:,} events, exit {code} in {seconds:.0f} s; peak RSS: driver "
            f"{peaks.driver / mib:,.0f} MiB, JVM {peaks.jvm / mib:,.0f} MiB, Python workers "
            f"{peaks.workers / mib:,.0f} MiB, all at once {peaks.total / mib:,.0f} MiB "
            f"({peaks.samples} samples); reconcile with the expected state: "
            f"{'equal' if reconciled == 0 else f'exit {reconciled}'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
