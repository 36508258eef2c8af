"""Matching a region stream split over key ranges: each piece gets the region's keyless events, and the
pieces together give what the whole stream gives."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from backfill.sources.kvscan.format import EVENT_COLUMNS
from backfill.sources.kvscan.keyranges import KeyRanges, match_key_range

pytestmark = pytest.mark.unit

A, B = b"t\x80\x00\x00\x00\x00\x00\x00\x2d_r\x01", b"t\x80\x00\x00\x00\x00\x00\x00\x2d_r\x09"
SPLIT = b"t\x80\x00\x00\x00\x00\x00\x00\x2d_r\x05"


def event(seq: int, type_: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(EVENT_COLUMNS)
    row.update(region_id=3, seq=seq, type=type_, generation=0, scan_id="s1", scan_checkpoint_ts=10)
    row.update(fields)
    return row


STREAM = [
    event(0, "COMMIT", start_ts=5, commit_ts=12, key=A, op_type="PUT"),  # before INITIALIZED: cached
    event(1, "COMMITTED", start_ts=5, commit_ts=12, key=A, op_type="PUT", value=b"a0"),
    event(2, "COMMITTED", start_ts=3, commit_ts=9, key=B, op_type="PUT", value=b"stale"),
    event(3, "PREWRITE", start_ts=5, key=A, op_type="PUT", value=b"a0"),
    event(4, "INITIALIZED"),
    event(5, "PREWRITE", start_ts=20, key=A, op_type="PUT", value=b"a1"),
    event(6, "PREWRITE", start_ts=21, key=B, op_type="DELETE", value=b""),
    event(7, "RESOLVED", resolved_ts=19),
    event(8, "COMMIT", start_ts=21, commit_ts=23, key=B, op_type="DELETE"),
    event(9, "COMMIT", start_ts=20, commit_ts=22, key=A, op_type="PUT"),
    event(10, "PREWRITE", start_ts=30, key=B, op_type="PUT", value=b"open lock"),
    event(11, "RESOLVED", resolved_ts=25),
]
SCHEMA = pa.schema(
    [(c, t) for c, t in zip(EVENT_COLUMNS, ("int64", "int64", "string", "int64", "int64", "string",
                                            "binary", "binary", "binary", "int64", "int64"), strict=True)]
    + [("scan_id", pa.string()), ("scan_checkpoint_ts", pa.int64())]
)  # fmt: skip


def matched(events: list[dict[str, Any]]) -> tuple[list[tuple], list[tuple]]:
    out = match_key_range(pa.Table.from_pylist(events, schema=SCHEMA)).to_pylist()
    changes = sorted((r["key"], r["op"], r["value"], r["commit_ts"]) for r in out if r["kind"] == "change")
    regions = [(r["region_id"], r["resolved_ts"], r["initialized"]) for r in out if r["kind"] == "region"]
    assert not [r["message"] for r in out if r["kind"] == "error"]
    return changes, regions


def test_pieces_of_a_split_region_match_like_the_whole_stream() -> None:
    whole_changes, whole_regions = matched(STREAM)
    assert whole_changes == [
        (A, "PUT", b"a0", 12), (A, "PUT", b"a0", 12), (A, "PUT", b"a1", 22), (B, "DELETE", b"", 23),
    ]  # fmt: skip
    assert whole_regions == [(3, 25, True)]

    keyless = [e for e in STREAM if e["key"] is None]
    low = [e for e in STREAM if e["key"] is not None and e["key"] < SPLIT] + keyless
    high = [e for e in STREAM if e["key"] is not None and e["key"] >= SPLIT] + keyless
    (low_changes, low_regions), (high_changes, high_regions) = matched(low), matched(high)
    assert sorted(low_changes + high_changes) == whole_changes
    assert low_regions == high_regions == whole_regions


def test_several_streams_in_one_partition_are_matched_apart() -> None:
    other = [dict(e, region_id=4) for e in STREAM]
    changes, regions = matched(STREAM + other)
    assert len(changes) == 2 * len(matched(STREAM)[0])
    assert sorted(regions) == [(3, 25, True), (4, 25, True)]


def test_key_ranges_a_region_covers() -> None:
    ranges = KeyRanges((b"c", b"f"), (11, 12, 13))
    assert ranges.covering(b"", b"") == [0, 1, 2]
    assert ranges.covering(b"a", b"c") == [0], "the end key is exclusive"
    assert ranges.covering(b"c", b"d") == [1]
    assert ranges.covering(b"d", b"g") == [1, 2]
    assert ranges.covering(b"f", b"") == [2]
