"""Benchmark the workload simulator: ``python bench/simulate.py --events 5000000``.

Generates about ``--events`` events (transactions are sized from a measured events-per-transaction mix),
then prints wall time, events per second and the process's peak RSS. The output goes to a temporary
folder that is removed afterwards unless ``--out`` is given.

``--hot`` generates the workload ``bench/backfill.py`` reads instead: 4 tables of ``events / 200`` seeded
rows each, 70% of the single-table transactions in the first (a hot table), 3 scans. Target there: under
3 GB peak RSS at 10M events.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this folder comes first on sys.path, and bench/backfill.py would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from tidbsim import SimulationConfig, simulate  # noqa: E402
from tidbsim.engine import estimate_txns_for_events  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tables", type=int, default=8)
    p.add_argument("--rows", type=int, default=5_000, help="rows seeded per table")
    p.add_argument("--scans", type=int, default=0, help="default: one per ~250k events")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--hot", action="store_true", help="bench/backfill.py's hot-table workload")
    args = p.parse_args(argv)
    hot: dict[str, Any] = {}
    if args.hot:  # bench/backfill.py's `_workload`
        args.tables, args.rows, args.scans = 4, max(50, args.events // 200), 3
        hot = {"ddls_per_scan": 0, "hot_table_share": 0.7, "events": args.events}
    scans = args.scans or max(2, args.events // 250_000)
    txns = estimate_txns_for_events(args.events, tables=args.tables, rows=args.rows)
    out = args.out or Path(tempfile.mkdtemp(prefix="tidelake-bench-")) / "sim"
    began = time.perf_counter()
    try:
        result = simulate(
            SimulationConfig(
                out=out, seed=args.seed, tables=args.tables, rows=args.rows, txns=txns, scans=scans, **hot
            )
        )
    finally:
        if args.out is None:
            shutil.rmtree(out.parent, ignore_errors=True)
    elapsed = time.perf_counter() - began
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"simulate: {result.events:,} events ({txns:,} txns, {scans} scans, {args.tables} tables x "
        f"{args.rows:,} seeded rows) in {elapsed:.1f}s = {result.events / elapsed:,.0f} events/s; "
        f"peak RSS {rss_mb:,.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
