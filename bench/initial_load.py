"""Initial-load benchmark: `python bench/initial_load.py --rows 2000000` (on local[2]).

Writes a Dumpling CSV export (kept in --data so a second run reuses it): one table `shop.orders` (a
BIGINT key, INT, DECIMAL, VARCHAR, DATETIME, DOUBLE, some NULLs, strings with quotes and backslashes)
of --rows rows in files of --file-rows rows, as `dumpling --filetype csv` writes them (header, `"`
delimiter, backslash escapes, `\\N`). Then, in one Spark session (JVM start excluded), alternating for
--rounds rounds (the best of each counts):

  ours   the initial load of `[source.initial]` (`backfill/initial/load.py`): schema file, every data file
         parsed and typed in a Spark task, one Delta commit at the TSO
  floor  Spark's own CSV reader over the same files (every column a string, header, `\\N` null, `\\`
         escape) written as Parquet

and prints rows/s side by side. Target: within 1.5x of the floor (issue 53).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

TSO = 450_000_000_000_000_000
CREATE = (
    "CREATE TABLE `orders` (\n  `id` bigint NOT NULL,\n  `customer` int DEFAULT NULL,\n"
    "  `amount` decimal(12,2) DEFAULT NULL,\n  `status` varchar(16) DEFAULT NULL,\n"
    "  `note` varchar(64) DEFAULT NULL,\n  `created` datetime DEFAULT NULL,\n  `score` double DEFAULT NULL,\n"
    "  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
)
STATUSES = ("new", "paid", "shipped", "done", 'say "hi"', "back\\slash")


def generate(data: Path, rows: int, file_rows: int, seed: int) -> None:
    """The export under `data` (skipped when its metadata file says it holds `rows` rows already)."""
    marker = data / "rows"
    if marker.exists() and marker.read_text() == str(rows):
        return
    data.mkdir(parents=True, exist_ok=True)
    for old in data.glob("shop.orders.*.csv"):
        old.unlink()
    (data / "metadata").write_text(
        f"Started dump at: 2026-01-01 00:00:00\nSHOW MASTER STATUS:\n\tLog: tidb-binlog\n\tPos: {TSO}\n"
        "\tGTID:\n\nFinished dump at: 2026-01-01 00:00:01\n"
    )
    (data / "shop-schema-create.sql").write_text("CREATE DATABASE `shop`;\n")
    (data / "shop.orders-schema.sql").write_text(f"/*!40101 SET NAMES binary*/;\n{CREATE};\n")
    rng = random.Random(seed)
    escaped = [b'"' + s.encode().replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"' for s in STATUSES]
    header = b'"id","customer","amount","status","note","created","score"\r\n'
    for index, start in enumerate(range(0, rows, file_rows)):
        lines = [header]
        for i in range(start, min(rows, start + file_rows)):
            r = rng.random()
            note = b"\\N" if r < 0.1 else b'"note %d for order %d"' % (int(r * 1000), i)
            lines.append(
                b'%d,%d,%d.%02d,%s,%s,"2026-%02d-%02d %02d:%02d:%02d",%r\r\n'
                % (i, rng.randrange(100_000), rng.randrange(100_000), i % 100, escaped[i % len(escaped)], note,
                   1 + i % 12, 1 + i % 28, i % 24, i % 60, (i * 7) % 60, r)
            )  # fmt: skip
        (data / f"shop.orders.{index:09d}.csv").write_bytes(b"".join(lines))
    marker.write_text(str(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--file-rows", type=int, default=250_000)
    parser.add_argument("--rounds", type=int, default=3)  # round 1 runs in a cold JVM (JIT warm-up)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path(".tidelake/bench/initial"))
    args = parser.parse_args(argv)

    started = time.perf_counter()
    generate(args.data, args.rows, args.file_rows, args.seed)
    print(f"data ready in {time.perf_counter() - started:.1f}s: {args.data}", flush=True)

    from backfill.clock import StageClock
    from backfill.initial.load import load_initial
    from backfill.sources.storage.settings import StorageSourceConfig
    from tidelake.config import (
        InitialLoadConfig,
        JobConfig,
        SourceConfig,
        SparkConfig,
        TargetConfig,
        TidelakeConfig,
    )
    from tidelake.spark import build_session

    spark = build_session(
        "bench-initial", SparkConfig(master="local[2]", shuffle_partitions=8, driver_memory="4g")
    )
    spark.sparkContext.setLogLevel("ERROR")
    export = str(args.data.resolve())
    files = sorted(str(p) for p in args.data.resolve().glob("shop.orders.*.csv"))
    best: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(best.get(name, seconds), seconds)

    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as work:
            config = TidelakeConfig(
                source=SourceConfig(
                    str(Path(work) / "sink"),
                    "ticdc-storage",
                    settings=StorageSourceConfig(protocol="csv"),
                    initial=InitialLoadConfig(dumpling=export),
                ),
                target=TargetConfig(str(Path(work) / "wh")),
                job=JobConfig("bench"),
            )
            t = time.perf_counter()
            loaded = load_initial(spark, config, StageClock())
            seconds = time.perf_counter() - t
            assert loaded is not None and loaded.loaded == (("shop.orders", args.rows),), loaded
            print(f"  initial load: {seconds:.1f}s", flush=True)
            keep("ours", seconds)
            t = time.perf_counter()
            spark.read.csv(files, header=True, escape="\\", nullValue="\\N", lineSep="\r\n").write.parquet(
                str(Path(work) / "floor")
            )
            seconds = time.perf_counter() - t
            print(f"  floor (Spark CSV read, write Parquet): {seconds:.1f}s", flush=True)
            keep("floor", seconds)
    ours, floor = args.rows / best["ours"], args.rows / best["floor"]
    print(f"\n{args.rows:,} rows, best of {args.rounds} rounds")
    print(
        f"  initial load: {ours:,.0f} rows/s; floor {floor:,.0f} rows/s; "
        f"{best['ours'] / best['floor']:.2f}x the floor's time"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
