"""Key-range parallelism (seed 003): one hot table with many regions is decoded by more than one task."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.codec import record_key
from backfill.run import run_backfill
from backfill.sources.kvscan.keyranges import key_range_splits
from tests.captures import Capture, users_table
from tidelake.config import load_config

pytestmark = pytest.mark.spark


def test_splits_follow_region_boundaries_and_balance_events() -> None:
    regions = [(b"a", 10), (b"b", 10), (b"c", 10), (b"d", 10), (b"e", 0), (b"", 0)]
    assert key_range_splits(regions, 2) == [b"c"]
    assert key_range_splits(regions, 4) == [b"b", b"c", b"d"]
    assert key_range_splits([(b"a", 100), (b"b", 1)], 4) == [b"b"]
    assert key_range_splits(regions, 1) == []


@pytest.mark.parametrize(
    "rows_per_task", [50, None, "eager"], ids=["hot", "few-rows-one-task", "in-match-and-collapse"]
)
def test_hot_table_is_decoded_by_more_than_one_task(
    spark, tmp_path: Path, monkeypatch, rows_per_task: int | str | None
) -> None:
    """With 50 rows a task, the 240 rows spread over the key ranges; by default (100k rows a task) they are
    decoded by one task, which saves a Python round trip per key range. Decoded in the match+collapse task
    (`eager_decode`, a big table's way), they are decoded by every key range's task that holds some.
    (Tables this small are decoded on the driver by default: here they are not.)"""
    from backfill.sources import decode_tasks
    from backfill.sources.kvscan import eager_decode, small_tables

    monkeypatch.setattr(small_tables, "DRIVER_DECODE_ROWS", 0)
    if rows_per_task == "eager":
        monkeypatch.setattr(eager_decode, "EAGER_DECODE_EVENTS", 0)
        monkeypatch.setattr(eager_decode, "EAGER_DECODE_SHARE", 0)
    elif rows_per_task is not None:
        monkeypatch.setattr(decode_tasks, "DECODE_ROWS_PER_TASK", rows_per_task)
    hot, cold = users_table(100, "hot"), users_table(200, "cold")
    bounds = [record_key(100, h) for h in range(0, 240, 30)]
    regions = [(1, b"", bounds[1])]
    regions += [(i + 2, bounds[i + 1], bounds[i + 2]) for i in range(len(bounds) - 2)]
    regions.append((99, bounds[-1], b""))
    cap = Capture(tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=9000, regions=regions,
                  tables=[("app", hot), ("app", cold)])  # fmt: skip
    for handle in range(240):
        region = next(
            r
            for r, s, e in regions
            if s <= record_key(100, handle) and (not e or record_key(100, handle) < e)
        )
        cap.put(region, hot, handle, {2: f"h{handle}", 3: handle}, 200 + handle, 201 + handle)
    cap.put(99, cold, 1, {2: "c", 3: 1}, 150, 151)
    cap.init_and_resolve(8000).write()
    conf = tmp_path / "job.toml"
    conf.write_text(f'[source]\npath = "{tmp_path / "scans"}"\n[target]\nwarehouse = "{tmp_path / "wh"}"\n')

    result = run_backfill(spark, load_config(conf))

    by_name = {t.table: t for t in result.tables}
    assert by_name["app.hot"].upserted == 240
    if rows_per_task is None:
        assert by_name["app.hot"].decode_tasks == 1, "240 changes are decoded by one task"
    else:
        assert by_name["app.hot"].decode_tasks > 1, "the hot table must spread over several tasks"
    assert by_name["app.cold"].decode_tasks == 1
    assert spark.read.format("delta").load(str(tmp_path / "wh" / "app" / "hot")).count() == 240


def test_a_regions_keyless_events_reach_every_key_range_it_spans(spark) -> None:
    from pyspark.sql import functions as F

    from backfill.sources.kvscan import keyranges as ch
    from backfill.sources.kvscan.format import EVENTS_DDL

    low, mid, high = record_key(100, 1), record_key(100, 50), record_key(100, 90)
    rows = [
        (1, 0, "INITIALIZED", None, None, None, None, None, None, 0, None),
        (1, 1, "PREWRITE", 5, None, "PUT", low, b"v", None, 0, None),
        (1, 2, "PREWRITE", 6, None, "PUT", high, b"w", None, 0, None),
        (1, 3, "RESOLVED", None, None, None, None, None, None, 0, 4),
        (2, 0, "INITIALIZED", None, None, None, None, None, None, 0, None),  # region 2 lies above mid
    ]
    events = spark.createDataFrame(rows, EVENTS_DDL).select(
        "*", F.lit("s1").alias("scan_id"), F.lit(0).cast("bigint").alias("scan_checkpoint_ts")
    )
    ranges = ch.KeyRanges((mid,), tuple(ch.partition_tags(spark, 2)))
    spans = {("s1", 1): (b"", b""), ("s1", 2): (mid, b"")}
    placed = ch.by_key_range(events, ranges, spans).select(
        "region_id", "type", "key", F.spark_partition_id().alias("range")
    )
    seen = sorted((r["region_id"], r["type"], r["key"] is not None and bytes(r["key"]) == high, r["range"])
                  for r in placed.collect())  # fmt: skip
    assert seen == [
        (1, "INITIALIZED", False, 0), (1, "INITIALIZED", False, 1),
        (1, "PREWRITE", False, 0), (1, "PREWRITE", True, 1),
        (1, "RESOLVED", False, 0), (1, "RESOLVED", False, 1),
        (2, "INITIALIZED", False, 1),
    ]  # fmt: skip


def test_big_inputs_get_more_key_ranges_than_shuffle_partitions(spark, tmp_path: Path, monkeypatch) -> None:
    from backfill.sources.kvscan import source as pipeline
    from backfill.sources.kvscan.captures import list_scans
    from tidbsim import SimulationConfig, simulate

    simulate(SimulationConfig(out=tmp_path / "sim", seed=3, tables=2, rows=20, txns=40, scans=2))
    scans = list_scans(spark, str(tmp_path / "sim" / "scans"))
    counts = pipeline.survey_regions(spark, scans).event_counts
    monkeypatch.setattr(pipeline, "EVENTS_PER_RANGE", 100)
    shuffled = pipeline.events_by_key_range(spark, scans, counts)
    assert shuffled.rdd.getNumPartitions() == -(-sum(counts.values()) // 100) > 2
