"""Which captures a run reads and how far it can go: per-capture resolved ts and the chain of captures.

Pure logic over manifests, region progress and table spans; no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from backfill.codec import table_span
from backfill.resolved import RegionProgress, SpanProgress, global_resolved_ts, span_progress
from backfill.scans import ScanManifest
from tidelake.errors import InputError


@dataclass(frozen=True)
class TableProgress:
    label: str
    resolved_ts: int
    holes: tuple[tuple[bytes, bytes], ...] = ()
    lagging_region: int | None = None


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
    table_ids: Mapping[str, Sequence[int]],
) -> ScanProgress:
    """Resolved ts of a capture: min over its tables (each: min over the regions covering its spans)."""
    progress = [
        RegionProgress(r.region_id, r.start_key, r.end_key, regions.get(r.region_id)) for r in scan.regions
    ]
    tables = []
    for label, physical_ids in sorted(table_ids.items()):
        spans: list[SpanProgress] = [
            span_progress(*table_span(pid), progress, scan.checkpoint_ts) for pid in physical_ids
        ]
        worst = (
            min(spans, key=lambda s: (s.complete, s.resolved_ts)) if spans else SpanProgress(scan.current_ts)
        )
        holes = tuple(h for s in spans for h in s.holes)
        ts = min((s.resolved_ts for s in spans), default=scan.current_ts)
        tables.append(TableProgress(label, ts, holes, worst.lagging_region))
    resolved = global_resolved_ts([t.resolved_ts for t in tables], scan.current_ts)
    return ScanProgress(scan, max(resolved, scan.checkpoint_ts), tuple(tables))


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
