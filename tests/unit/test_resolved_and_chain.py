"""Resolved ts from regions to tables to captures, and the chain of captures a run takes."""

from __future__ import annotations

import pytest

from backfill.codec import record_key, table_span
from backfill.plan import choose_chain, scan_progress
from backfill.resolved import RegionProgress, span_progress
from backfill.scans import Region, ScanManifest
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
    progress = scan_progress(s, {1: 500, 2: 150}, {"db.a": [45], "db.b": [46]})
    assert progress.resolved_ts == 150
    assert progress.blocked_by is not None and progress.blocked_by.lagging_region == 2
    assert scan_progress(s, {1: 500, 2: 500}, {"db.a": [45]}).resolved_ts == 200  # capped by current_ts


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
