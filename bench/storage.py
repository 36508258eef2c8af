"""Storage-sink source benchmark: `python bench/storage.py --changes 5000000` (on local[2]).

Writes one TiCDC storage-sink folder per protocol (CSV and canal-json with the TiDB extension; kept in
--data so a second run reuses them): four tables, a hot one (`shop.orders`) with ~70% of the changes,
inserts, updates and deletes over a key space, in files of --file-rows rows across day folders, as
TiCDC lays them out. The same changes also go to Parquet, typed. Then, in one Spark session (JVM start
excluded), for each protocol, alternating for --rounds rounds (the best of each counts):

  ours   backfill run from empty: plan, decode, collapse by key, one commit per table
  floor  a plain Spark read of the same files written back as Parquet: Spark's own CSV reader (every
         column a string) or JSON reader (the canal-json message schema, given, so no inference pass),
         the sink's data files only, written to Parquet

and prints rows/s side by side. Targets: >= 250k rows/s and within 3x of the floor. A stricter line is
printed too: a `noop` read of the changes already typed in Parquet (reading and nothing else).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

from backfill.sources.ticdc.schema_file import (
    TableDefinition,
    columns_from_sql,
    definition_json,
    schema_file_name,
)

ORDERS = (
    ("id", "BIGINT", {"precision": "20", "is_pk": "true", "nullable": "false"}),
    ("customer", "INT", {"precision": "11"}),
    ("amount", "DECIMAL", {"precision": "12", "scale": "2"}),
    ("status", "VARCHAR", {"precision": "16"}),
    ("note", "VARCHAR", {"precision": "64"}),
    ("created", "DATETIME", {}),
    ("flag", "TINYINT", {"precision": "4"}),
)
TABLES = (("orders", 0.7), ("customers", 0.1), ("items", 0.1), ("events", 0.1))
START_TS = 450_000_000_000_000_000
VERSION = START_TS - 1000


def generate(data: Path, changes: int, file_rows: int, seed: int) -> None:
    """The sink folders (`csv/`, `canal-json/`) and the Parquet copy (`parquet/`), unless already there."""
    marker = data / f".changes-{changes}-{file_rows}-{seed}"
    if marker.exists():
        return
    shutil.rmtree(data, ignore_errors=True)
    rng = random.Random(seed)
    cols = columns_from_sql(ORDERS)
    names = [c.name for c in cols]
    for table, share in TABLES:
        count = int(changes * share)
        keys = max(1000, count // 4)
        definition = TableDefinition(table, "shop", 1, VERSION, "", 0, cols, len(cols))
        for protocol in ("csv", "canal-json"):
            meta = data / protocol / "shop" / table / "meta"
            meta.mkdir(parents=True)
            (meta / schema_file_name(definition)).write_text(definition_json(definition))
        live: set[int] = set()
        ts = START_TS
        for number, start in enumerate(range(0, count, file_rows), 1):
            day = f"2024-05-{1 + (number - 1) // 4:02d}"
            csv_lines, json_lines, typed = [], [], {n: [] for n in (*names, "op", "ts")}
            for _ in range(start, min(count, start + file_rows)):
                ts += rng.randint(1, 3)
                key = rng.randrange(keys)
                op = "D" if key in live and rng.random() < 0.1 else ("U" if key in live else "I")
                live.discard(key) if op == "D" else live.add(key)
                row = (key, rng.randrange(100_000), f"{rng.randrange(1_000_000)}.{rng.randrange(100):02d}",
                       rng.choice(("new", "paid", "shipped")), f"note {rng.randrange(10**9)}",
                       f"2024-05-0{rng.randrange(1, 10)} 12:{rng.randrange(60):02d}:00", rng.randrange(2))  # fmt: skip
                csv_lines.append(
                    f'"{op}","{table}","shop",{ts},{row[0]},{row[1]},"{row[2]}","{row[3]}","{row[4]}","{row[5]}",{row[6]}\r\n'
                )
                kind = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}[op]
                json_lines.append(json.dumps({
                    "id": 0, "database": "shop", "table": table, "pkNames": ["id"], "isDdl": False, "type": kind,
                    "es": ts >> 18, "ts": 0, "sql": "", "sqlType": {n: 12 for n in names},
                    "mysqlType": {n: "varchar" for n in names},
                    "data": [{n: str(v) for n, v in zip(names, row, strict=True)}], "old": None,
                    "_tidb": {"commitTs": ts},
                }, separators=(",", ":")) + "\r\n")  # fmt: skip
                for n, v in zip(names, row, strict=True):
                    typed[n].append(v)
                typed["op"].append(op)
                typed["ts"].append(ts)
            for protocol, lines, ext in (("csv", csv_lines, "csv"), ("canal-json", json_lines, "json")):
                folder = data / protocol / "shop" / table / str(VERSION) / day
                (folder / "meta").mkdir(parents=True, exist_ok=True)
                name = f"CDC{number:06d}.{ext}"
                (folder / name).write_text("".join(lines))
                (folder / "meta" / "CDC.index").write_text(name + "\n")
            out = data / "parquet" / table
            out.mkdir(parents=True, exist_ok=True)
            typed["amount"] = [float(a) for a in typed["amount"]]
            pq.write_table(pa.table(typed), out / f"part-{number:06d}.parquet")
        for protocol in ("csv", "canal-json"):
            (data / protocol / "metadata").write_text(json.dumps({"checkpoint-ts": ts + 1}))
    marker.touch()


def plain_read(spark: SparkSession, folder: Path, protocol: str) -> DataFrame:
    """Spark's own reader over the sink's data files (not its schema files or indexes)."""
    files = str(folder.resolve()) + "/shop/*/*/*/CDC*." + ("csv" if protocol == "csv" else "json")
    if protocol == "csv":
        return spark.read.csv(files, lineSep="\r\n")
    strings = ", ".join(f"`{name}`: STRING" for name, _, _ in ORDERS)
    numbers = ", ".join(f"`{name}`: INT" for name, _, _ in ORDERS)
    message = (
        "id BIGINT, database STRING, table STRING, pkNames ARRAY<STRING>, isDdl BOOLEAN, type STRING, "
        f"es BIGINT, ts BIGINT, sql STRING, sqlType STRUCT<{numbers}>, mysqlType STRUCT<{strings}>, "
        f"data ARRAY<STRUCT<{strings}>>, old ARRAY<STRUCT<{strings}>>, _tidb STRUCT<commitTs: BIGINT>"
    )
    return spark.read.schema(message).json(files, lineSep="\r\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=5_000_000)
    parser.add_argument("--file-rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)  # round 1 runs in a cold JVM (JIT warm-up)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path(".tidelake/bench/storage"))
    args = parser.parse_args(argv)

    started = time.perf_counter()
    generate(args.data, args.changes, args.file_rows, args.seed)
    print(f"data ready in {time.perf_counter() - started:.1f}s: {args.data}", flush=True)

    from backfill.run import run_backfill
    from backfill.sources.storage.settings import StorageSourceConfig
    from tidelake.config import JobConfig, SourceConfig, SparkConfig, TargetConfig, TidelakeConfig
    from tidelake.spark import build_session

    spark = build_session(
        "bench-storage", SparkConfig(master="local[2]", shuffle_partitions=8, driver_memory="4g")
    )
    spark.sparkContext.setLogLevel("ERROR")
    changes = sum(int(args.changes * share) for _, share in TABLES)
    best: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(best.get(name, seconds), seconds)

    for _ in range(args.rounds):
        for protocol in ("csv", "canal-json"):
            with tempfile.TemporaryDirectory() as work:
                config = TidelakeConfig(
                    source=SourceConfig(
                        str((args.data / protocol).resolve()),
                        "ticdc-storage",
                        settings=StorageSourceConfig(protocol=protocol),
                    ),
                    target=TargetConfig(str(Path(work) / "wh")),
                    job=JobConfig("bench"),
                )
                t = time.perf_counter()
                result = run_backfill(spark, config)
                seconds = time.perf_counter() - t
                print(f"  {protocol}: {seconds:.1f}s, stages {result.stage_seconds}", flush=True)
                keep(protocol, seconds)
                t = time.perf_counter()
                plain_read(spark, args.data / protocol, protocol).write.parquet(str(Path(work) / "floor"))
                seconds = time.perf_counter() - t
                print(f"  {protocol} floor (read, write Parquet): {seconds:.1f}s", flush=True)
                keep(f"{protocol} floor", seconds)
        t = time.perf_counter()
        spark.read.parquet(str((args.data / "parquet").resolve()) + "/*").write.format("noop").mode(
            "overwrite"
        ).save()
        keep("typed read", time.perf_counter() - t)
    print(f"\n{changes:,} changes, best of {args.rounds} rounds")
    print(f"  typed Parquet read only: {changes / best['typed read']:,.0f} rows/s")
    for protocol in ("csv", "canal-json"):
        rate, floor = changes / best[protocol], changes / best[f"{protocol} floor"]
        print(
            f"  {protocol:10}: {rate:,.0f} rows/s; floor {floor:,.0f} rows/s; "
            f"{best[protocol] / best[f'{protocol} floor']:.1f}x the floor's time, "
            f"{best[protocol] / best['typed read']:.1f}x the typed read's"
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
