"""Resolved ts from regions to tables to captures, and the chain of captures a run takes."""

from __future__ import annotations

import pytest

from backfill.codec import record_key, table_span
from backfill.sources.kvscan.chain import choose_chain, scan_progress
from backfill.sources.kvscan.format import Region, ScanManifest
from backfill.sources.kvscan.resolved import RegionProgress, span_progress
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

START, END = table_span(45)
MID = record_key(45, 100)


def test_span_resolved_ts_is_the_minimum_over_covering_regions() -> None:
    regions = [
        RegionProgress(1, b"", MID, 30),
        RegionProgress(2, MID, b"", 20),
        RegionProgress(3, b"u", b"", 1),
    ]
    progress = span_progress(START, END, regions, floor=10)
    assert progress.resolved_ts == 20 and progress.complete and progress.lagging_region == 2


def test_a_hole_stops_the_span_at_its_floor_and_is_named() -> None:
    regions = [RegionProgress(1, b"", MID, 30), RegionProgress(2, MID + b"\x01", b"", 40)]
    progress = span_progress(START, END, regions, floor=10)
    assert progress.resolved_ts == 10
    assert progress.holes == ((MID, MID + b"\x01"),)
    assert span_progress(START, END, [], floor=7).holes == ((START, END),)


def test_an_uninitialized_region_holds_the_span_at_the_floor() -> None:
    regions = [RegionProgress(1, b"", MID, None), RegionProgress(2, MID, b"", 40)]
    assert span_progress(START, END, regions, floor=10).resolved_ts == 10


def scan(scan_id: str, checkpoint: int, current: int, regions=((1, b"", b""),)) -> ScanManifest:
    return ScanManifest(scan_id, f"/x/{scan_id}", checkpoint, current, tuple(Region(*r) for r in regions))


def test_capture_resolved_ts_is_min_over_tables_capped_by_current_ts() -> None:
    s = scan("s", 100, 200, ((1, b"", MID), (2, MID, b"")))
    progress = scan_progress(s, {1: 500, 2: 150}, {"db.a": {45: None}, "db.b": {46: None}})
    assert progress.resolved_ts == 150
    assert progress.blocked_by is not None and progress.blocked_by.lagging_region == 2
    assert scan_progress(s, {1: 500, 2: 500}, {"db.a": {45: None}}).resolved_ts == 200  # capped by current_ts


def test_chain_takes_each_capture_past_the_last_and_reports_a_gap() -> None:
    s1, s2, s3 = scan("s1", 100, 200), scan("s2", 180, 300), scan("s3", 290, 400)
    resolved = {"s1": 190, "s2": 295, "s3": 390}
    chain = choose_chain(100, [s1, s2, s3], lambda s: resolved[s.scan_id])
    assert [(link.scan.scan_id, link.lo, link.hi) for link in chain] == [
        ("s1", 100, 190),
        ("s2", 190, 295),
        ("s3", 295, 390),
    ]
    # from 190 on, s1 adds nothing
    assert [link.scan.scan_id for link in choose_chain(190, [s1, s2, s3], lambda s: resolved[s.scan_id])] == [
        "s2",
        "s3",
    ]
    # s3 alone cannot be reached from 190: a gap
    with pytest.raises(InputError, match="checkpoint ts 190 is older than every available capture"):
        choose_chain(190, [s3], lambda s: resolved[s.scan_id])
    # a capture that cannot advance the checkpoint yields no chain (nothing new), no error
    assert choose_chain(390, [s1, s2, s3], lambda s: resolved[s.scan_id]) == []


OLD, NEW = 45, 47  # a TRUNCATE TABLE at ts 150 retires table id 45 and gives the table id 47


def _regions_for(*spans: tuple[int, int, int | None]) -> tuple[tuple, dict[int, int | None]]:
    """A capture whose region i covers exactly table id `pid` and resolved at `ts`."""
    regions = tuple((region, *table_span(pid)) for region, pid, _ in spans)
    return regions, {region: ts for region, _, ts in spans}


def test_a_retired_id_lagging_below_its_retirement_holds_the_table_only_below_it() -> None:
    regions, resolved = _regions_for((1, OLD, 120), (2, NEW, 300))
    s = scan("s", 100, 400, regions)
    # Before: the old id's lag held the table at 120 forever (the next capture starts above it: a gap).
    progress = scan_progress(s, resolved, {"db.t": {OLD: 150, NEW: None}})
    assert progress.resolved_ts == 300
    # The new id lags below the truncate: the table is below 150, where the old id still counts.
    regions, resolved = _regions_for((1, OLD, 120), (2, NEW, 140))
    progress = scan_progress(scan("s", 100, 400, regions), resolved, {"db.t": {OLD: 150, NEW: None}})
    assert progress.resolved_ts == 120
    slow = progress.blocked_by
    assert slow is not None and (slow.lagging_region, slow.lagging_id, slow.lagging_id_retired_at) == (
        1,
        OLD,
        150,
    )
    assert "region 1 (table id 45, retired at ts 150)" in slow.describe()


def test_a_dropped_table_stops_holding_back_the_global_resolved_ts() -> None:
    regions, resolved = _regions_for((1, OLD, 110), (2, 46, 390))
    s = scan("s", 100, 400, regions)
    progress = scan_progress(s, resolved, {"db.dropped": {OLD: 130}, "db.other": {46: None}})
    assert progress.resolved_ts == 390
    # ... but not before it is dropped: had it been dropped at 500 (past this capture) it would hold at 110.
    assert scan_progress(s, resolved, {"db.dropped": {OLD: None}, "db.other": {46: None}}).resolved_ts == 110


def test_retired_ids_are_lowered_in_turn_until_stable() -> None:
    # Two partitions truncated at different ts: lowering below the later one makes the earlier one count.
    regions, resolved = _regions_for((1, 50, 90), (2, 51, 200), (3, NEW, 250))
    s = scan("s", 10, 400, regions)
    assert scan_progress(s, resolved, {"db.p": {50: 250, 51: 300, NEW: None}}).resolved_ts == 90
    assert scan_progress(s, resolved, {"db.p": {50: 100, 51: 300, NEW: None}}).resolved_ts == 200
    assert scan_progress(s, resolved, {"db.p": {50: 100, 51: 220, NEW: None}}).resolved_ts == 250
