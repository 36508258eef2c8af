"""The Kafka source's check that no change comes after a resolved ts at or above its own, where one topic
partition is read by several tasks: a resolved event read by an earlier task of the partition counts, as
one read before the event by its own task does (`decode_events` marks each event with its task's range)."""

from __future__ import annotations

import pytest

from backfill.sources.kafka.source import _check_no_change_below_resolved, _survey, decode_events
from backfill.sources.ticdc.open_protocol import RESOLVED, frame, records_table
from tidbsim.ticdc_open import key_json
from tidelake.errors import InputError

pytestmark = pytest.mark.spark

ROW_VALUE = b'{"u":{"id":{"t":8,"h":true,"f":11,"v":1}}}'


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


def _check(spark, ranges, sent=None) -> None:
    events = _events(spark, ranges)
    plan = _survey(events)
    _check_no_change_below_resolved(events, sent or {}, plan.split_watermarks, "open-protocol")


@pytest.mark.parametrize(
    ("ranges", "offset", "floor"),
    [
        ([[(100, "row"), (200, "resolved"), (180, "row")]], 2, 200),  # one task
        ([[(100, "row"), (200, "resolved"), (250, "row")], [(150, "row"), (300, "row")]], 3, 200),
        ([[(200, "resolved")], [(260, "resolved")], [(300, "row"), (250, "row")]], 3, 260),
    ],
    ids=["in its own range", "in an earlier range", "two ranges back"],
)
def test_a_change_after_a_resolved_ts_above_it_is_named(spark, ranges, offset, floor) -> None:
    with pytest.raises(
        InputError, match=rf"offset {offset}: a row event .* comes after the partition's resolved ts {floor};"
    ):
        _check(spark, ranges)


def test_changes_above_every_earlier_resolved_ts_pass(spark) -> None:
    ranges = [[(100, "row"), (200, "resolved")], [(201, "row"), (300, "resolved")], [(301, "row")]]
    _check(spark, ranges)
    events = _events(spark, ranges)
    assert _survey(events).split_watermarks == {("cdc", 0, 0): 200, ("cdc", 0, 2): 300}


def test_a_resolved_ts_an_earlier_run_read_counts_from_where_its_read_ended(spark) -> None:
    ranges = [[(100, "row"), (150, "row")]]
    _check(spark, ranges, sent={("cdc", 0): (2, 120)})  # both before the earlier read's end
    with pytest.raises(InputError, match="offset 1: a row event .* resolved ts 160;"):
        _check(spark, ranges, sent={("cdc", 0): (1, 160)})  # offset 0 was read before: not checked
    with pytest.raises(InputError, match="offset 0: a row event"):
        _check(spark, ranges, sent={("cdc", 0): (0, 150)})
