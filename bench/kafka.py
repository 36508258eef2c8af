"""Kafka source benchmark: `python bench/kafka.py --events 5000000` (on local[2]).

Simulates a workload (4 tables, kept in --data so a second run reuses it), publishes it as a TiCDC
changefeed's open-protocol (or --protocol canal-json) messages to a 6-partition topic (a broker from
`.cache/kafka` is started when --bootstrap is not given), then in one Spark session (JVM start excluded):

  floor  Spark's Kafka batch read of the topic's offsets, written as Parquet (key, value, position)
  ours   `backfill run` from an empty warehouse: read, decode, resolve, collapse, MERGE into Delta

and prints row events/s of each and the ratio (--jobs N: the slowest Spark jobs too). Targets: >= 200k
events/s, within 3x of the floor. The broker's log stays in --data with the published topic, so a rerun
skips publishing (an 11-minute step at 5M events before the batch encoders; about a minute, by
182,626-event runs, with the columnar change log, bench/NOTES.md "Kafka publisher"; a simulation written
before it takes about 1.7x that).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.servers

from bench.spark_jobs import job_id_next, print_slowest_jobs  # noqa: E402
from tidbsim import SimulationConfig, load_index, simulate  # noqa: E402
from tidbsim.kafka import Changefeed, publish_changefeed  # noqa: E402

ROW_EVENTS_PER_TXN = 4.5  # measured mix of the simulator's random transactions (rows per txn)


def generate(data: Path, events: int, seed: int) -> Path:
    out = data / f"sim-{events}-{seed}"
    if not (out / ".done").exists():
        shutil.rmtree(out, ignore_errors=True)
        rows = max(50, events // 400)
        txns = max(1, round((events - 4 * rows) / ROW_EVENTS_PER_TXN))
        simulate(
            SimulationConfig(
                out=out,
                seed=seed,
                tables=4,
                rows=rows,
                txns=txns,
                scans=2,
                ddl_kinds=(),
                ticdc_changelog=True,
            )
        )
        (out / ".done").write_text("")
    return out


def job_config(work: Path, sim: Path, bootstrap: str, topic: str, protocol: str) -> Path:
    """The bench's job: the topic into a warehouse in `work`, typed by the simulation's first scan's schema."""
    schema = sim / "scans" / load_index(sim)[0]["scan_id"] / "schema"
    conf = work / "job.toml"
    conf.write_text(
        f'[job]\nname = "bench"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\nbootstrap_servers = "{bootstrap}"\n'
        f'topic = "{topic}"\nprotocol = "{protocol}"\nschema = "{schema}"\n[target]\nwarehouse = "{work / "wh"}"\n'
    )
    return conf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=5_000_000, help="row events, about")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--protocol", default="open-protocol", choices=("open-protocol", "canal-json"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path(".tidelake/bench/kafka"))
    parser.add_argument("--jobs", type=int, default=0, help="print the N slowest Spark jobs of the run")
    parser.add_argument("--bootstrap", help="host:port of a broker (default: start one from .cache/kafka)")
    parser.add_argument(
        "--publish-processes",
        type=int,
        default=1,
        help="processes publishing the topic, each its share of the partitions (2 paid only on free cores)",
    )
    parser.add_argument(
        "--driver-memory", default="4g", help="the session's spark.driver.memory (local mode)"
    )
    args = parser.parse_args(argv)

    from backfill.run import run_backfill
    from tidelake.config import SparkConfig, load_config
    from tidelake.spark import build_session

    args.data.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    sim = generate(args.data, args.events, args.seed)
    print(f"simulated in {time.perf_counter() - started:.1f}s", flush=True)

    work = Path(tempfile.mkdtemp(prefix="tidelake-bench-kafka-"))
    broker = None
    if args.bootstrap is None:  # the broker's log stays in --data: a rerun reads the topic published before
        from tests.servers import KafkaBroker

        broker = KafkaBroker(args.data / "broker")
        broker.base.mkdir(exist_ok=True)
        broker.start()
    bootstrap = args.bootstrap or broker.bootstrap
    try:
        marker = args.data / f"{sim.name}-{args.protocol}-{args.partitions}p.published"
        if broker is not None and marker.exists():
            topic, count = marker.read_text().split()
            rows = [int(count)]
            print(f"reusing topic {topic} ({rows[0]:,} row events)")
        else:
            topic = f"bench-{args.protocol}-{int(time.time())}"
            feed = Changefeed(
                topic=topic, partitions=args.partitions, max_batch_size=64, restarts=1, protocol=args.protocol
            )
            started = time.perf_counter()
            sent, published = publish_changefeed(sim, feed, bootstrap, processes=args.publish_processes)
            rows = [published]
            elapsed = time.perf_counter() - started
            print(
                f"published {sum(sent.values()):,} messages, {rows[0]:,} row events in {elapsed:.1f}s "
                f"({rows[0] / elapsed:,.0f} row events/s, {args.publish_processes} processes)"
            )
            if broker is not None:
                marker.write_text(f"{topic} {rows[0]}")

        spark = build_session(
            "tidelake-bench-kafka",
            SparkConfig(
                master="local[2]", shuffle_partitions=4, ui=bool(args.jobs), driver_memory=args.driver_memory
            ),
        )
        spark.range(1000).selectExpr("sum(id)").collect()  # JVM and Python workers warm
        started = time.perf_counter()
        (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
            .select("key", "value", "partition", "offset")
            .write.mode("overwrite")
            .parquet(str(work / "floor"))
        )
        floor = time.perf_counter() - started

        conf = job_config(work, sim, bootstrap, topic, args.protocol)
        first_job = job_id_next(spark)
        started = time.perf_counter()
        result = run_backfill(spark, load_config(conf))
        ours = time.perf_counter() - started
        if args.jobs:
            print_slowest_jobs(spark, args.jobs, since=first_job)
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    n = rows[0]
    print(f"floor  {floor:7.2f}s  {n / floor:12,.0f} row events/s  (Kafka batch read -> Parquet)")
    print(f"ours   {ours:7.2f}s  {n / ours:12,.0f} row events/s  (backfill run -> Delta)")
    print(f"ours / floor: {ours / floor:.2f}x; stages: {result.to_dict()['stage_seconds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
