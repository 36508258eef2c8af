"""Which captures a run reads and how far it can go: per-capture resolved ts and the chain of captures.

Pure logic over manifests, region progress and table spans; no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from backfill.codec import table_span
from backfill.sources.kvscan.format import ScanManifest
from backfill.sources.kvscan.resolved import RegionProgress, SpanProgress, global_resolved_ts, span_progress
from tidelake.errors import InputError


@dataclass(frozen=True)
class TableProgress:
    label: str
    resolved_ts: int
    holes: tuple[tuple[bytes, bytes], ...] = ()
    lagging_region: int | None = None
    lagging_id: int | None = None  # the physical id whose span holds the table back
    lagging_id_retired_at: int | None = None  # that id's retirement ts, if a DDL retired it

    def describe(self) -> str:
        """What holds the table back, for people: the region, and the physical id behind it."""
        if self.holes:
            start, end = self.holes[0]
            return f"{self.label}: no region covers keys [{start.hex()}, {end.hex() or '+inf'})"
        what = f"{self.label}, region {self.lagging_region}"
        if self.lagging_id is not None:
            what += f" (table id {self.lagging_id}"
            if self.lagging_id_retired_at is not None:
                what += f", retired at ts {self.lagging_id_retired_at}"
            what += ")"
        return what


@dataclass(frozen=True)
class ScanProgress:
    """How far one capture establishes the truth: its global resolved ts and what holds it back."""

    scan: ScanManifest
    resolved_ts: int
    tables: tuple[TableProgress, ...]

    @property
    def blocked_by(self) -> TableProgress | None:
        slowest = min(self.tables, key=lambda t: t.resolved_ts, default=None)
        return slowest if slowest is not None and slowest.resolved_ts < self.scan.current_ts else None


def scan_progress(
    scan: ScanManifest,
    regions: Mapping[int, int | None],
    table_ids: Mapping[str, Mapping[int, int | None]],
) -> ScanProgress:
    """Resolved ts of a capture: min over its tables (`table_ids`: label -> {physical id: the ts a DDL
    retired it at, or None}), each from the regions covering its spans (`table_resolved_ts`)."""
    progress = [
        RegionProgress(r.region_id, r.start_key, r.end_key, regions.get(r.region_id)) for r in scan.regions
    ]
    tables = []
    for label, physical_ids in sorted(table_ids.items()):
        spans = {pid: span_progress(*table_span(pid), progress, scan.checkpoint_ts) for pid in physical_ids}
        tables.append(table_resolved_ts(label, spans, physical_ids, scan.current_ts))
    resolved = global_resolved_ts([t.resolved_ts for t in tables], scan.current_ts)
    return ScanProgress(scan, max(resolved, scan.checkpoint_ts), tuple(tables))


def table_resolved_ts(
    label: str, spans: Mapping[int, SpanProgress], retired_at: Mapping[int, int | None], ceiling: int
) -> TableProgress:
    """The table's resolved ts: the minimum over the spans of its physical ids, where an id that a DDL
    retired (truncate, drop, partition DDLs) counts only below its retirement ts R.

    TiCDC removes a retired id's span at the DDL barrier: whatever that id still receives at or above R is
    dropped, and its rows below R vanish with the DDL, so the state at any ts >= R does not depend on it.
    A lagging region of a retired id therefore holds the table back only while the table is below R.
    """
    live = {pid: s for pid, s in spans.items() if retired_at.get(pid) is None}
    retired = {pid: s for pid, s in spans.items() if retired_at.get(pid) is not None}
    holding = min(live, key=lambda pid: (spans[pid].complete, spans[pid].resolved_ts), default=None)
    ts = min((spans[pid].resolved_ts for pid in live), default=ceiling)
    changed = True
    while changed:  # lowering ts may bring more retired ids below their retirement: repeat until stable
        changed = False
        for pid, span in retired.items():
            if span.resolved_ts < ts and ts < (retired_at[pid] or 0):
                ts, holding, changed = span.resolved_ts, pid, True
    if holding is None:
        return TableProgress(label, ts)
    span = spans[holding]
    holes = span.holes if span.resolved_ts <= ts else ()
    return TableProgress(label, ts, holes, span.lagging_region, holding, retired_at.get(holding))


@dataclass(frozen=True)
class ChainLink:
    """A capture in the chain and the part of it the run takes: commits in (lo, hi]."""

    scan: ScanManifest
    lo: int
    hi: int


def choose_chain(
    checkpoint_ts: int, scans: Sequence[ScanManifest], resolved: Callable[[ScanManifest], int]
) -> list[ChainLink]:
    """The captures that carry the run from `checkpoint_ts` as far as possible, each past the last.

    A capture counts only if its checkpoint is at or below what the chain has reached; one that starts
    later leaves a gap, which is an error when nothing else bridges it.
    """
    reached = checkpoint_ts
    chain: list[ChainLink] = []
    remaining = [s for s in scans if s.current_ts > checkpoint_ts]
    while True:
        usable = [s for s in remaining if s.checkpoint_ts <= reached and resolved(s) > reached]
        if not usable:
            break
        best = max(usable, key=lambda s: (resolved(s), s.current_ts, s.scan_id))
        chain.append(ChainLink(best, reached, resolved(best)))
        reached = resolved(best)
        remaining.remove(best)
    if not chain and scans:
        later = [s for s in scans if s.checkpoint_ts > checkpoint_ts]
        if later and not any(s.checkpoint_ts <= checkpoint_ts < s.current_ts for s in scans):
            first = min(later, key=lambda s: s.checkpoint_ts)
            raise InputError(
                f"checkpoint ts {checkpoint_ts} is older than every available capture: the earliest that goes "
                f"past it, {first.uri}, starts at checkpoint ts {first.checkpoint_ts}; changes in between are "
                "missing (capture again from the checkpoint)"
            )
    return chain
