"""Per-table fixed cost: `python bench/many_tables.py --tables 200` (on local[2]).

Simulates `--tables` small tables (no DDL), loads the first capture window (not timed), then times one
`backfill run` of the next window (about `--changes` changes per table, MERGEd into existing tables) and
one `reconcile run` of every table against the simulator's expected state. Prints seconds in total and
per table, and the Spark jobs each took (the fixed cost per table is mostly jobs and Delta log reads).
Targets: 200 small tables under 2 minutes in one backfill run, and in one reconcile run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Run as a script, this file's folder comes first on sys.path and its name would shadow the package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from tidbsim import SimulationConfig, load_index, simulate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.config import TidelakeConfig

ROWS = 200  # rows seeded per table in the first window


def generate(data: Path, tables: int, changes: int, seed: int) -> Path:
    """The simulated workload (reused when the same one is already there): two capture windows."""
    marker = data / f".tables-{tables}-{changes}-{seed}"
    if not marker.exists():
        shutil.rmtree(data, ignore_errors=True)
        # A random transaction touches ~3 rows of ~1.5 tables (engine.estimate_txns_for_events).
        txns = max(1, tables * changes // 4)
        simulate(
            SimulationConfig(
                out=data / "sim", seed=seed, tables=tables, rows=ROWS, txns=txns, scans=2, ddls_per_scan=0,
                open_lock_txns=0,
            )
        )  # fmt: skip
        marker.write_text("ok")
    return data / "sim"


def _job_count(spark: SparkSession) -> int:
    """Jobs submitted so far: the scheduler's next job id (py4j; the status store keeps only the newest
    `spark.ui.retainedJobs`, 1,000, so its count stops growing in a 200-table run)."""
    return int(spark._jsc.sc().dagScheduler().nextJobId())


def config_for(work: Path, sim: Path) -> TidelakeConfig:
    from tidelake.config import load_config

    work.mkdir(parents=True, exist_ok=True)
    conf = work / "bench.toml"
    conf.write_text(
        f'[job]\nname = "bench"\n[source]\npath = "{sim / "scans"}"\n[target]\nwarehouse = "{work / "wh"}"\n'
        f'[reconcile]\ntables = ["*.*"]\n[reconcile.upstream]\nkind = "files"\nformat = "expected"\n'
        f'path = "{sim / "expected"}"\n'
    )
    return load_config(conf)


def timed(spark: SparkSession, what: Any) -> tuple[float, int, Any]:
    jobs, t = _job_count(spark), time.perf_counter()
    result = what()
    return time.perf_counter() - t, _job_count(spark) - jobs, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--changes", type=int, default=100, help="changes per table in the timed window")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path(".tidelake/bench/many_tables"))
    parser.add_argument("--skip-reconcile", action="store_true")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    sim = generate(args.data / f"{args.tables}", args.tables, args.changes, args.seed)
    print(f"workload: {args.tables} tables (generated or reused in {time.perf_counter() - began:.0f}s)")

    from backfill.demo import _reconcile
    from backfill.run import run_backfill
    from tidelake.config import SparkConfig
    from tidelake.spark import build_session

    spark = build_session("tidelake-bench", SparkConfig(master="local[2]", shuffle_partitions=4))
    spark.range(1000).selectExpr("sum(id)").collect()  # JVM warm, outside the timings
    work = args.data / f"{args.tables}" / "run"
    shutil.rmtree(work, ignore_errors=True)
    config = config_for(work, sim)
    first_end = load_index(sim)[0]["resolved_ts"]

    took, jobs, first = timed(spark, lambda: run_backfill(spark, config, until_ts=first_end))
    print(
        f"first load:  {took:6.1f}s  {took / args.tables:6.3f}s/table  {jobs / args.tables:5.1f} jobs/table"
    )
    took, jobs, result = timed(spark, lambda: run_backfill(spark, config))
    changes = sum(t.upserted + t.deleted for t in result.tables)
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.stage_seconds.items())
    print(
        f"backfill:    {took:6.1f}s  {took / args.tables:6.3f}s/table  {jobs / args.tables:5.1f} jobs/table  "
        f"{changes} changes ({stages})"
    )
    if not args.skip_reconcile:
        took, jobs, checked = timed(spark, lambda: _reconcile(spark, config))
        print(
            f"reconcile:   {took:6.1f}s  {took / args.tables:6.3f}s/table  {jobs / args.tables:5.1f} jobs/table  "
            f"exit {checked.exit_code}"
        )
    print(f"target: {args.tables} tables in one run under {120 * args.tables / 200:.0f}s each")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
