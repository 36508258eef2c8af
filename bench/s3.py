"""Object-store benchmark: `python bench/s3.py --events 5000000` (on local[2]).

The from-empty workload of bench/backfill.py (reused from --data), run by `backfill run` twice per round,
alternating: captures and warehouse on local disk, then captures and warehouse in buckets of a local S3
API server (S3Proxy on 127.0.0.1, the captures uploaded through the S3 API beforehand, not timed). The best
of --rounds counts for each (the machines are noisy); prints seconds, events/s, the stages of each and the
ratio s3/local. The S3 side pays what a real bucket makes a job pay: listing, small reads of manifests and
schema files, Delta log round trips, multipart uploads of data files.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would shadow the package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from tidelake.config import ObjectStoreConfig


def generate(data: Path, events: int, seed: int) -> int:
    """bench/backfill.py's workload (loaded by path: its module name is the package's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_backfill", Path(__file__).with_name("backfill.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.generate(data, events, seed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path(".tidelake/bench/backfill"))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)

    began = time.perf_counter()
    events = generate(args.data, args.events, args.seed)
    print(f"workload: {events:,} events (generated or reused in {time.perf_counter() - began:.0f}s)")

    from backfill.run import run_backfill
    from backfill.simulate import load_index
    from tidelake import fs
    from tidelake.config import SparkConfig
    from tidelake.objectstore import configure
    from tidelake.s3local import LocalS3Server
    from tidelake.spark import build_session

    spark = build_session(
        "tidelake-bench-s3", SparkConfig(master="local[2]", shuffle_partitions=8, driver_memory="6g")
    )
    spark.range(1000).selectExpr("sum(id)").collect()
    work = Path(tempfile.mkdtemp(prefix="tidelake-bench-s3-"))
    scans = args.data / "sim" / "scans"
    expected = load_index(args.data / "sim")[-1]["resolved_ts"]
    with LocalS3Server(work / "s3") as server:
        store = server.object_store()
        configure(spark, store)
        bucket = server.make_bucket("bench")
        t = time.perf_counter()
        fs.upload(spark, str(scans), f"{bucket}/scans")
        print(f"upload of the captures through the S3 API: {time.perf_counter() - t:.1f}s (not timed)")
        best: dict[str, float] = {}
        for round_ in range(1, args.rounds + 1):
            for where, source, warehouse in (
                ("local", str(scans), str(work / f"local-{round_}")),
                ("s3", f"{bucket}/scans", f"{bucket}/wh-{round_}"),
            ):
                config = _config(work / f"{where}-{round_}.toml", source, warehouse, store)
                t = time.perf_counter()
                result = run_backfill(spark, config)
                took = time.perf_counter() - t
                assert result.resolved_ts == expected, (result.resolved_ts, expected)
                best[where] = min(best.get(where, float("inf")), took)
                stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.stage_seconds.items())
                print(
                    f"round {round_} {where:5}: {took:7.1f}s  {events / took:>10,.0f} events/s   ({stages})"
                )
    for where, took in best.items():
        print(f"{where:5}: {took:7.1f}s  {events / took:>10,.0f} events/s   best of {args.rounds}")
    print(f"ratio s3/local: {best['s3'] / best['local']:.2f}x")
    spark.stop()
    return 0


def _config(path: Path, source: str, warehouse: str, store: ObjectStoreConfig):
    from dataclasses import replace

    from tidelake.config import load_config

    path.write_text(
        f'[job]\nname = "bench"\n[source]\npath = "{source}"\n[target]\nwarehouse = "{warehouse}"\n'
    )
    return replace(load_config(path), object_store=store)


if __name__ == "__main__":
    sys.exit(main())
