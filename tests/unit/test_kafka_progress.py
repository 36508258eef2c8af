"""Where a Kafka run starts: offsets recorded in the tables' commits, killed runs, new partitions, data
lost to retention, watermarks and the global resolved ts."""

from __future__ import annotations

import pytest

from backfill.sources.kafka.broker import PartitionOffsets
from backfill.sources.kafka.progress import (
    RunRecord,
    TableRecord,
    check_offsets,
    completeness,
    next_offsets,
    run_start,
)
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

P0, P1, P2 = ("t", 0), ("t", 1), ("t", 2)
KEPT = {P0: PartitionOffsets(0, 100), P1: PartitionOffsets(0, 80)}


def record(run_from, run_next, *, resolved=500, tables=("db.a", "db.b"), checkpoint=100, marks=None):
    return RunRecord(run_from, run_next, marks or {P0: resolved, P1: resolved}, tables, checkpoint, resolved)


def test_metadata_round_trip():
    r = record({P0: 1, P1: 2}, {P0: 10, P1: 20}, marks={P0: 7, P1: 9})
    doc = r.to_metadata()
    assert doc["kafka"]["next_offsets"] == {"t": {"0": 10, "1": 20}}
    assert RunRecord.from_metadata(doc) == r
    assert RunRecord.from_metadata({"scans": []}) is None


def test_where_earlier_reads_ended_bounds_the_changes_after_them():
    """From the offset a run's read ended on, a change at or below the watermark it recorded is a re-send;
    the furthest read gives the bound; records without read ends (older versions) give none."""
    first = RunRecord({P0: 0}, {P0: 40}, {P0: 500, P1: 450}, ("db.a",), 100, 450, read_ends={P0: 60, P1: 50})
    later = RunRecord({P0: 40}, {P0: 90}, {P0: 900}, ("db.b",), 450, 800, read_ends={P0: 95})
    assert RunRecord.from_metadata(first.to_metadata()) == first
    start = run_start([TableRecord("db.a", 450, first), TableRecord("db.b", 800, later)], KEPT)
    assert start.sent == {P0: (95, 900), P1: (50, 450)}
    assert run_start([TableRecord("db.a", 500, record({P0: 0}, {P0: 40}))], KEPT).sent == {}


def test_the_resends_skipped_so_far_come_from_the_furthest_read():
    """The job's count of skipped re-sends per partition is the one recorded with the furthest read end,
    where the next run's new re-sends start counting."""
    first = RunRecord(
        {P0: 0}, {P0: 40}, {P0: 500, P1: 450}, ("db.a",), 100, 450, read_ends={P0: 60, P1: 50},
        resent_skipped={P0: 3, P1: 2},
    )  # fmt: skip
    later = RunRecord(
        {P0: 40}, {P0: 90}, {P0: 900}, ("db.b",), 450, 800, read_ends={P0: 95}, resent_skipped={P0: 7}
    )
    assert RunRecord.from_metadata(later.to_metadata()) == later
    start = run_start([TableRecord("db.a", 450, first), TableRecord("db.b", 800, later)], KEPT)
    assert start.skipped == {P0: 7, P1: 2}


def test_a_first_run_starts_at_the_earliest_offsets_kept():
    kept = {P0: PartitionOffsets(5, 100), P1: PartitionOffsets(0, 80)}
    start = run_start([], kept)
    assert start.offsets == {P0: 5, P1: 0} and start.watermarks == {} and start.checkpoint_ts == 0


def test_complete_runs_continue_at_their_next_offsets():
    r = record({P0: 0, P1: 0}, {P0: 40, P1: 30})
    start = run_start([TableRecord("db.a", 500, r), TableRecord("db.b", 500, r)], KEPT)
    assert start.offsets == {P0: 40, P1: 30}
    assert start.watermarks == {P0: 500, P1: 500} and start.checkpoint_ts == 500


def test_a_run_killed_between_tables_is_read_again_from_its_start():
    old = record({P0: 0, P1: 0}, {P0: 40, P1: 30}, resolved=500)
    new = record({P0: 40, P1: 30}, {P0: 90, P1: 70}, resolved=900, checkpoint=500)
    # table a committed the new run; table b still holds the old run's commit
    start = run_start([TableRecord("db.a", 900, new), TableRecord("db.b", 500, old)], KEPT)
    assert start.offsets == {P0: 40, P1: 30} and start.checkpoint_ts == 500
    # table b's MERGE of the new run happened but not its final commit at the run's resolved ts
    start = run_start([TableRecord("db.a", 900, new), TableRecord("db.b", 700, new)], KEPT)
    assert start.offsets == {P0: 40, P1: 30}


def test_a_table_of_the_last_run_without_a_delta_table_sends_the_run_back():
    r = record({P0: 3, P1: 4}, {P0: 40, P1: 30}, tables=("db.a", "db.new"))
    start = run_start([TableRecord("db.a", 500, r)], KEPT)
    assert start.offsets == {P0: 3, P1: 4} and start.checkpoint_ts == 100


def test_a_partition_added_since_the_last_run_starts_at_zero():
    r = record({P0: 0, P1: 0}, {P0: 40, P1: 30})
    kept = {**KEPT, P2: PartitionOffsets(0, 12)}
    start = run_start([TableRecord("db.a", 500, r), TableRecord("db.b", 500, r)], kept)
    assert start.offsets == {P0: 40, P1: 30, P2: 0}
    marks, done = completeness(kept, start.watermarks, {})
    assert done.resolved_ts == 0 and done.holding == P2  # the new partition has no resolved event yet


def test_offsets_deleted_by_retention_fail_naming_partition_and_offsets():
    kept = {P0: PartitionOffsets(50, 100), P1: PartitionOffsets(0, 80)}
    with pytest.raises(InputError, match=r"'t' partition 0: offsets 40\.\.49 are needed but already deleted"):
        check_offsets({P0: 40, P1: 30}, kept)
    with pytest.raises(
        InputError, match="partition 1: the job read up to offset 90 but the partition ends at 80"
    ):
        check_offsets({P0: 60, P1: 90}, kept)
    check_offsets({P0: 50, P1: 80}, kept)


def test_the_global_resolved_ts_is_the_lowest_partition_watermark():
    marks, done = completeness([P0, P1, P2], {P0: 300, P1: 300, P2: 300}, {P0: 700, P1: 650})
    assert marks == {P0: 700, P1: 650, P2: 300}
    assert done.resolved_ts == 300 and done.holding == P2


def test_the_next_run_reads_again_from_the_first_message_above_the_resolved_ts():
    assert next_offsets({P0: 100, P1: 80}, {P0: 61}) == {P0: 61, P1: 80}


def test_topics_by_name_or_pattern():
    from backfill.sources.kafka.broker import matching_topics
    from backfill.sources.kafka.settings import KafkaSourceConfig

    topics = ["cdc-a", "cdc-b", "other", "__consumer_offsets", "cdc-a-retry"]
    by_name = KafkaSourceConfig(bootstrap_servers="b:9092", topic="cdc-a")
    assert matching_topics(topics, by_name) == ["cdc-a"]
    assert matching_topics(["x"], by_name) == []
    pattern = KafkaSourceConfig(bootstrap_servers="b:9092", topic_pattern="cdc-[a-z]")
    assert matching_topics(topics, pattern) == ["cdc-a", "cdc-b"]  # the whole name must match


def test_a_table_whose_last_commit_was_lost_sends_the_run_back():
    """A table of the run exists but holds no commit of it (created, killed before its MERGE)."""
    r = record({P0: 3, P1: 4}, {P0: 40, P1: 30})
    start = run_start([TableRecord("db.a", 500, r), TableRecord("db.b", None, None)], KEPT)
    assert start.offsets == {P0: 3, P1: 4} and start.checkpoint_ts == 100
    old = record({P0: 0, P1: 0}, {P0: 3, P1: 4}, resolved=100, checkpoint=0)
    start = run_start([TableRecord("db.a", 500, r), TableRecord("db.b", 100, old)], KEPT)
    assert start.offsets == {P0: 3, P1: 4}
