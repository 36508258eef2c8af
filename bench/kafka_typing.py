"""The Kafka source's Python typing, in CPU seconds per table: `python bench/kafka_typing.py` after bench/kafka.py.

bench/kafka.py's published topic (same --data, --events, --seed, --protocol, --partitions) is planned once by
the source itself (Spark, the broker kept in --data) and its row events are kept beside it as Parquet; a rerun
starts from them. Then the first --task events of each table are typed in this process as one Spark task of
`typed_rows` types them (open protocol: `typed_open_task`, the supersede selection then `rows_to_arrow`;
canal-json: `typed_canal_rows` per batch), best of --repeat, and scaled to the table's events. CPU seconds:
on a shared machine they move far less than the wall seconds of a whole run (bench/NOTES.md, Kafka).
"""

from __future__ import annotations

import argparse
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from backfill.codec import DecodeStats, TableSchema  # noqa: E402
from backfill.sources.kafka.source import TYPED_BATCH_ROWS, typed_open_task  # noqa: E402
from backfill.sources.ticdc.canal_kafka import typed_canal_rows  # noqa: E402
from bench.kafka import generate, job_config  # noqa: E402


def plan_events(
    data: Path, sim: Path, protocol: str, partitions: int, events_file: Path, plan_file: Path
) -> None:
    """The source's plan of the published topic: its row events to `events_file`, the tables (schema and
    merge key) and the changefeed's time zone to `plan_file`."""
    from pyspark.sql import functions as F

    from backfill.run import qualified
    from backfill.sources import open_source
    from backfill.sources.base import CheckpointBook, StageClock
    from backfill.sources.ticdc.open_protocol import ROW
    from tests.servers import KafkaBroker
    from tidelake.config import SparkConfig, load_config
    from tidelake.spark import build_session

    marker = data / f"{sim.name}-{protocol}-{partitions}p.published"
    if not marker.exists():
        raise SystemExit(f"{marker}: missing: publish the topic with bench/kafka.py first (same arguments)")
    topic = marker.read_text().split()[0]
    broker = KafkaBroker(data / "broker")
    broker.start()
    work = Path(tempfile.mkdtemp(prefix="tidelake-bench-kafka-typing-"))
    try:
        spark = build_session(
            "tidelake-bench-kafka-typing", SparkConfig(master="local[2]", shuffle_partitions=4)
        )
        config = qualified(spark, load_config(job_config(work, sim, broker.bootstrap, topic, protocol)))
        source = open_source(config.source, config.target.tables, config.upstream)
        book = CheckpointBook(spark, config.target.warehouse, config.job.app_id)
        window: Any = source.plan(spark, book, StageClock(), None)
        tables = [
            (version.schema, tuple(window.identity(i).columns(version.schema)))
            for i, table in enumerate(window.tables)
            for version in table.versions
            if version.schema is not None
        ]
        window.events.filter(F.col("type") == ROW).write.mode("overwrite").parquet(str(events_file))
        plan_file.write_bytes(pickle.dumps({"time_zone": window.time_zone, "tables": tables}))
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def type_task(
    events: pa.Table, schema: TableSchema, keys: tuple[str, ...], protocol: str, time_zone: str
) -> int:
    """One task's typing of `events` (one table's); the rows it gives."""
    stats, rows = DecodeStats(), 0
    if protocol == "canal-json":
        events = events.select(["value", "topic", "partition", "offset"])
        for batch in events.to_batches(max_chunksize=TYPED_BATCH_ROWS):
            rows += typed_canal_rows(
                pa.Table.from_batches([batch]), schema, time_zone=time_zone, stats=stats
            ).num_rows
    else:
        rows = sum(t.num_rows for t in typed_open_task(events, schema, time_zone, keys, stats))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=5_000_000, help="as bench/kafka.py was run")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--protocol", default="open-protocol", choices=("open-protocol", "canal-json"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path(".tidelake/bench/kafka"))
    parser.add_argument("--task", type=int, default=100_000, help="events typed at once per table (a task)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    sim = generate(args.data, args.events, args.seed)
    stem = args.data / f"{sim.name}-{args.protocol}-{args.partitions}p"
    events_file, plan_file = Path(f"{stem}.events.parquet"), Path(f"{stem}.plan.pickle")
    if not plan_file.exists():
        plan_events(args.data, sim, args.protocol, args.partitions, events_file, plan_file)
    plan = pickle.loads(plan_file.read_bytes())
    events = pq.read_table(events_file)
    total = 0.0
    for schema, keys in plan["tables"]:
        mine = events.filter(
            pc.and_(
                pc.equal(events["schema"], schema.schema_name or ""), pc.equal(events["table"], schema.name)
            )
        )
        task = mine.slice(0, args.task)
        best, rows = float("inf"), 0
        for _ in range(args.repeat):
            started = time.process_time()
            rows = type_task(task, schema, keys, args.protocol, plan["time_zone"])
            best = min(best, time.process_time() - started)
        scaled = best * mine.num_rows / max(task.num_rows, 1)
        total += scaled
        print(
            f"{schema.name:>12}: {mine.num_rows:>9,} events; a task of {task.num_rows:,} -> {rows:,} rows in "
            f"{best:.2f} CPU s ({task.num_rows / best:,.0f} events/s); all its events ~{scaled:.1f} CPU s"
        )
    print(f"typing all {events.num_rows:,} row events ({args.protocol}): ~{total:.1f} CPU s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
