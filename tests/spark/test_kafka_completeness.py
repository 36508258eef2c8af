"""The Kafka source tells a change TiCDC sent again after a restart (at or below a resolved ts its partition
carried before it) from a new one, also where one topic partition is read by several tasks: a resolved
event read by an earlier task of the partition counts, as one read before the event by its own task does
(`decode_events` marks each event with its task's range)."""

from __future__ import annotations

import pytest

from backfill.sources.kafka.source import _survey, decode_events, resent_changes
from backfill.sources.ticdc.open_protocol import RESOLVED, frame, records_table
from tidbsim.ticdc_open import key_json

pytestmark = pytest.mark.spark

ROW_VALUE = b'{"u":{"id":{"t":8,"h":true,"f":11,"v":1}}}'
DDL_VALUE = b'{"q":"ALTER TABLE t ADD COLUMN c INT","t":5}'


def _message(offset: int, ts: int, kind: str) -> tuple[str, int, int, bytes, bytes]:
    if kind == "resolved":
        return (
            "cdc",
            0,
            offset,
            frame([key_json(ts, "", "", type_=RESOLVED)], version=True),
            frame([b""], version=False),
        )
    return (
        "cdc",
        0,
        offset,
        frame([key_json(ts, "db", "t")], version=True),
        frame([ROW_VALUE], version=False),
    )


def _events(spark, ranges: list[list[tuple[int, str]]]):
    """One Spark partition (one task's offset range) per list of (ts, kind), offsets counting on."""
    frames, offset = [], 0
    for messages in ranges:
        table = records_table([_message(offset + i, ts, kind) for i, (ts, kind) in enumerate(messages)])
        frames.append(spark.createDataFrame(table.to_pandas()).coalesce(1))
        offset += len(messages)
    records = frames[0]
    for more in frames[1:]:
        records = records.union(more)
    assert records.rdd.getNumPartitions() == len(ranges)
    return decode_events(records, "none")


def _resent(spark, ranges, sent=None) -> tuple[list[int], dict]:
    """The offsets of the events taken for re-sends, and the survey's count per partition."""
    events = _events(spark, ranges)
    plan = _survey(events, sent or {})
    flagged = events.filter(resent_changes(sent or {}, plan.split_watermarks)).select("offset").collect()
    return sorted(r["offset"] for r in flagged), plan.resent


@pytest.mark.parametrize(
    ("ranges", "offset"),
    [
        ([[(100, "row"), (200, "resolved"), (180, "row")]], 2),  # one task
        ([[(100, "row"), (200, "resolved"), (250, "row")], [(150, "row"), (300, "row")]], 3),
        ([[(200, "resolved")], [(260, "resolved")], [(300, "row"), (250, "row")]], 3),
        ([[(200, "resolved"), (150, "resolved"), (180, "row")]], 2),  # a lower resolved event is ignored
        ([[(200, "resolved"), (200, "row"), (201, "row")]], 1),  # at the resolved ts: sent before it
    ],
    ids=["in its own range", "in an earlier range", "two ranges back", "resolved regression", "equal ts"],
)
def test_a_change_after_a_resolved_ts_at_or_above_it_is_a_resend(spark, ranges, offset) -> None:
    assert _resent(spark, ranges) == ([offset], {("cdc", 0): (1, 1)})


def test_changes_above_every_earlier_resolved_ts_pass(spark) -> None:
    ranges = [[(100, "row"), (200, "resolved")], [(201, "row"), (300, "resolved")], [(301, "row")]]
    assert _resent(spark, ranges) == ([], {})
    events = _events(spark, ranges)
    assert _survey(events, {}).split_watermarks == {("cdc", 0, 0): 200, ("cdc", 0, 2): 300}


def test_a_resolved_ts_an_earlier_run_read_counts_from_where_its_read_ended(spark) -> None:
    ranges = [[(100, "row"), (150, "row")]]
    assert _resent(spark, ranges, sent={("cdc", 0): (2, 120)}) == ([], {})  # both before its read's end
    # offset 0 was read before: not a re-send of what that run saw
    assert _resent(spark, ranges, sent={("cdc", 0): (1, 160)}) == ([1], {("cdc", 0): (1, 1)})
    assert _resent(spark, ranges, sent={("cdc", 0): (0, 150)}) == ([0, 1], {("cdc", 0): (2, 2)})


def test_resends_an_earlier_run_read_are_skipped_but_counted_once_for_the_job(spark) -> None:
    """The job's total (`Start.skipped`) grows only by re-sends beyond every earlier run's read."""
    ranges = [[(100, "row"), (200, "resolved"), (150, "row"), (160, "row")]]
    assert _resent(spark, ranges, sent={("cdc", 0): (3, 120)}) == ([2, 3], {("cdc", 0): (2, 1)})


def test_a_resent_ddl_is_skipped_and_a_broadcast_one_listed_once(spark) -> None:
    ddl = frame([key_json(150, "db", "t", type_=2)], version=True), frame([DDL_VALUE], version=False)
    partitions = [
        [("cdc", 0, 0, *ddl), _message(1, 200, "resolved"), ("cdc", 0, 2, *ddl)],  # sent again after it
        [("cdc", 1, 0, *ddl)],  # the same DDL in another partition (a task reads one partition)
    ]
    frames = [spark.createDataFrame(records_table(m).to_pandas()).coalesce(1) for m in partitions]
    plan = _survey(decode_events(frames[0].union(frames[1]), "none"), {})
    assert [(d["partition"], d["offset"]) for d in plan.ddls] == [(0, 0)]
    assert plan.resent == {("cdc", 0): (1, 1)}
