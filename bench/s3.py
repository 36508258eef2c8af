"""Object-store benchmark: `python bench/s3.py --source kv-scan --events 5000000` (on local[2]).

A from-empty workload — bench/backfill.py's kv-scan captures (`--source kv-scan`, --events) or
bench/storage.py's TiCDC storage-sink CSV folder (`--source ticdc-storage`, --events changes) — reused
from --data, run by `backfill run` twice per round, alternating: input and warehouse on local disk, then
input and warehouse in buckets of a local S3 API server (S3Proxy on 127.0.0.1, the input uploaded through
the S3 API beforehand, not timed). The best of --rounds counts for each (the machines are noisy); prints
seconds, rows/s, the stages of each and the ratio s3/local. The S3 side pays what a real bucket makes a
job pay: listing, small reads of manifests and schema files, Delta log round trips, uploads of data files.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path and its name would shadow the package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from tidelake.config import ObjectStoreConfig


def _bench_module(name: str) -> Any:
    """A benchmark beside this file, loaded by path (bench/backfill.py's module name is the package's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(source: str, data: Path, events: int, seed: int) -> tuple[Path, int, str]:
    """The local input folder, its row count and the config's extra `[source]` lines for `source`."""
    if source == "kv-scan":
        made = int(_bench_module("backfill").generate(data, events, seed))
        return data / "sim" / "scans", made, ""
    storage = _bench_module("storage")
    storage.generate(data, events, 200_000, seed)
    made = sum(int(events * share) for _, share in storage.TABLES)
    return data / "csv", made, 'kind = "ticdc-storage"\n[source.storage]\nprotocol = "csv"\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("kv-scan", "ticdc-storage"), default="kv-scan")
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=None, help="default: .tidelake/bench/<its bench>")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)

    began = time.perf_counter()
    data = args.data or Path(".tidelake/bench") / ("backfill" if args.source == "kv-scan" else "storage")
    local_input, rows, source_lines = generate(args.source, data, args.events, args.seed)
    print(f"workload: {rows:,} rows (generated or reused in {time.perf_counter() - began:.0f}s)")

    from backfill.run import run_backfill
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
    best: dict[str, float] = {}
    reached: dict[str, int] = {}  # both sides must reach the same resolved ts
    with LocalS3Server(work / "s3") as server:
        store = server.object_store()
        configure(spark, store)
        bucket = server.make_bucket("bench")
        t = time.perf_counter()
        fs.upload(spark, str(local_input), f"{bucket}/input")
        print(f"upload of the input through the S3 API: {time.perf_counter() - t:.1f}s (not timed)")
        for round_ in range(1, args.rounds + 1):
            for where, source, warehouse in (
                ("local", str(local_input.resolve()), str(work / f"local-{round_}")),
                ("s3", f"{bucket}/input", f"{bucket}/wh-{round_}"),
            ):
                config = _config(work / f"{where}-{round_}.toml", source, source_lines, warehouse, store)
                t = time.perf_counter()
                result = run_backfill(spark, config)
                took = time.perf_counter() - t
                reached.setdefault("ts", result.resolved_ts)
                assert result.resolved_ts == reached["ts"], (where, result.resolved_ts, reached)
                best[where] = min(best.get(where, float("inf")), took)
                stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.stage_seconds.items())
                print(f"round {round_} {where:5}: {took:7.1f}s  {rows / took:>10,.0f} rows/s   ({stages})")
    for where in ("local", "s3"):
        print(f"{where:5}: {best[where]:7.1f}s  {rows / best[where]:>10,.0f} rows/s   best of {args.rounds}")
    print(f"ratio s3/local: {best['s3'] / best['local']:.2f}x")
    spark.stop()
    return 0


def _config(path: Path, source: str, source_lines: str, warehouse: str, store: ObjectStoreConfig) -> Any:
    from dataclasses import replace

    from tidelake.config import load_config

    path.write_text(
        f'[job]\nname = "bench"\n[target]\nwarehouse = "{warehouse}"\n[source]\npath = "{source}"\n{source_lines}'
    )
    return replace(load_config(path), object_store=store)


if __name__ == "__main__":
    sys.exit(main())
