"""Resolved ts, from regions to tables to the whole run (docs/architecture.md "Words"; reference §1.5).

A table's resolved ts is the minimum over the regions covering its key span; a hole in the coverage stops
the table at its floor (nothing past the checkpoint is known to be complete) and is reported. The global
resolved ts is the minimum over tables, capped by the capture's current ts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RegionProgress:
    """How far one region's stream got: None if it never initialized or never resolved."""

    region_id: int
    start_key: bytes
    end_key: bytes  # b"" = unbounded
    resolved_ts: int | None


@dataclass(frozen=True)
class SpanProgress:
    resolved_ts: int
    holes: tuple[tuple[bytes, bytes], ...] = ()
    lagging_region: int | None = None  # the region that holds the span back

    @property
    def complete(self) -> bool:
        return not self.holes


# Raw TiDB keys start with 't' or 'm'; an empty end key (unbounded) sorts after all of them as this.
_KEY_MAX = b"\xff" * 32


def _end(key: bytes) -> bytes:
    return key or _KEY_MAX


def span_progress(start: bytes, end: bytes, regions: Iterable[RegionProgress], floor: int) -> SpanProgress:
    """Resolved ts of the raw key span [start, end) from the regions that overlap it."""
    end = _end(end)
    overlapping = sorted(
        (r for r in regions if r.start_key < end and start < _end(r.end_key)), key=lambda r: r.start_key
    )
    holes: list[tuple[bytes, bytes]] = []
    cursor = start
    for region in overlapping:
        if region.start_key > cursor:
            holes.append((cursor, region.start_key))
        cursor = max(cursor, _end(region.end_key))
    if cursor < end:
        holes.append((cursor, end))
    if holes:
        return SpanProgress(floor, tuple(holes))
    lagging = min(overlapping, key=lambda r: -1 if r.resolved_ts is None else r.resolved_ts)
    ts = floor if lagging.resolved_ts is None else max(floor, lagging.resolved_ts)
    return SpanProgress(ts, (), lagging.region_id)


def global_resolved_ts(table_resolved: Sequence[int], current_ts: int) -> int:
    """Minimum over the tables, never past the capture's current ts."""
    return min([current_ts, *table_resolved])
