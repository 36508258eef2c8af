"""One capture (scan): a TiKV CDC EventFeed subscription per region, recorded to files.

Per region, like TiKV's ``Delegate`` + ``Initializer`` (reference §1.2-§1.5): the observer registers first
(from then on realtime writes are forwarded), the incremental-scan snapshot is taken a little later, and
its output (per key: the lock as PREWRITE, then committed versions newer than the checkpoint, newest first,
keys ascending, not bounded by current_ts) is interleaved with the realtime stream until INITIALIZED.
After that the region reports RESOLVED ts = min(PD ts, oldest lock in the region), only ever increasing.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from backfill.codec import table_span
from backfill.sources.kvscan.format import EventWriter
from tidbsim.regions import Region
from tidbsim.store import PhysTable, Store

PREWRITE, COMMIT, ROLLBACK, COMMITTED, INITIALIZED, RESOLVED = (
    "PREWRITE",
    "COMMIT",
    "ROLLBACK",
    "COMMITTED",
    "INITIALIZED",
    "RESOLVED",
)
PUT, DELETE = "PUT", "DELETE"

# (type, start_ts, commit_ts, op_type, key, value, old_value, generation)
Row = tuple[str, int, int | None, str | None, bytes, bytes, bytes | None, int]


@dataclass
class Stream:
    """One region's EventFeed stream within this capture."""

    region: Region
    register_tick: int
    snapshot_tick: int
    speed: int
    resolved_every: int
    registered: bool = False
    scan: Iterator[Row] | None = None
    initialized: bool = False
    seq: int = 0
    last_resolved: int = 0
    next_resolved_tick: int = 0
    resolved_cap: int | None = None  # a lagging region on a retired id: never resolves past this
    stale_write: tuple[bytes, bytes, int] | None = None  # (key, value, retirement ts) of a write after it


class Capture:
    def __init__(
        self,
        scan_id: str,
        scan_dir: Path,
        *,
        checkpoint_ts: int,
        current_ts: int,
        regions: list[Region],
        store: Store,
        rng: random.Random,
        start_tick: int,
        row_group_size: int,
        rows_per_file: int,
        retired: Mapping[int, int] | None = None,
        lag_retired: bool = False,
    ) -> None:
        self.scan_id = scan_id
        self.checkpoint_ts = checkpoint_ts
        self.current_ts = current_ts
        self.regions = regions
        self.store = store
        self.start_tick = start_tick
        self.writer = EventWriter(
            scan_dir / "events", row_group_size=row_group_size, rows_per_file=rows_per_file
        )
        self._starts = [r.start for r in regions]
        self.streams: dict[int, Stream] = {}
        for r in regions:
            reg = start_tick + rng.randint(0, 3)
            keys = self._key_count(r)
            self.streams[r.id] = Stream(
                r,
                reg,
                reg + rng.randint(0, 2),
                speed=max(24, keys // 3 + 1),
                resolved_every=rng.randint(1, 3),
            )
        self.counts: dict[str, int] = {}
        self.retired = dict(retired or {})
        if lag_retired:
            self._lag_retired_regions()

    def _lag_retired_regions(self) -> None:
        """Regions that hold only ids retired in this window lag below the first retirement among them."""
        for s in self.streams.values():
            tables = [t for t, _, _ in self._tables(s.region)]
            if not tables or any(t.pid not in self.retired for t in tables):
                continue
            first = min(tables, key=lambda t: self.retired[t.pid])
            s.resolved_cap = self.retired[first.pid] - 1
            lo, hi = table_span(first.pid)
            for key in first.keys_in(max(lo, s.region.start), min(hi, s.region.end) if s.region.end else hi):
                v = first.latest(key)
                if v is not None and v.put:
                    s.stale_write = (key, v.value, self.retired[first.pid])
                    break

    # ------------------------------------------------------------ output

    def _emit(
        self,
        s: Stream,
        type_: str,
        start_ts: int | None,
        commit_ts: int | None,
        op: str | None,
        key: bytes | None,
        value: bytes | None,
        old: bytes | None,
        generation: int,
        resolved: int | None = None,
    ) -> None:
        self.writer.add(
            s.region.id, s.seq, type_, start_ts, commit_ts, op, key, value, old, generation, resolved
        )
        s.seq += 1
        self.counts[type_] = self.counts.get(type_, 0) + 1

    def stream_of(self, key: bytes) -> Stream:
        return self.streams[self.regions[bisect.bisect_right(self._starts, key) - 1].id]

    def realtime(self, key: bytes, row: Row) -> bool:
        """A write applied on the region holding ``key``; forwarded if the region is subscribed."""
        s = self.stream_of(key)
        if not s.registered:
            return False
        type_, start_ts, commit_ts, op, _key, value, old, gen = row
        if type_ in (COMMIT, COMMITTED) and not s.initialized and commit_ts is not None:
            self.counts["realtime_commit_before_initialized"] = (
                self.counts.get("realtime_commit_before_initialized", 0) + 1
            )
        self._emit(s, type_, start_ts, commit_ts, op, key, value, old, gen)
        return True

    # ------------------------------------------------------------ the incremental scan

    def _tables(self, r: Region) -> Iterator[tuple[PhysTable, bytes, bytes]]:
        for t in self.store.tables_between(0, None):
            lo, hi = table_span(t.pid)
            if r.overlaps(lo, hi):
                yield t, max(lo, r.start), (min(hi, r.end) if r.end else hi)

    def _key_count(self, r: Region) -> int:
        return sum(t.count_in(lo, hi) for t, lo, hi in self._tables(r))

    def _snapshot(self, r: Region) -> Iterator[Row]:
        """The region's incremental-scan output as of now (the snapshot), produced lazily."""
        snap_seq = self.store.seq
        checkpoint = self.checkpoint_ts
        parts = []
        for t, lo, hi in self._tables(r):
            keys = t.keys_in(lo, hi)
            locks = {k: lock for k, lock in t.locks.items() if lo <= k < hi}
            parts.append((t, keys, locks))

        def rows() -> Iterator[Row]:
            get = self.store.values.get
            for t, keys, locks in parts:
                for key in keys:
                    lock = locks.get(key)
                    if lock is not None:
                        op = PUT if lock.put else DELETE
                        value, old = get(lock.value_ref), get(lock.old_ref)
                        yield (PREWRITE, lock.start_ts, None, op, key, value, old, lock.generation)
                    for start_ts, commit_ts, put, value, old in t.committed(key, checkpoint, snap_seq):
                        yield (COMMITTED, start_ts, commit_ts, PUT if put else DELETE, key, value, old, 0)

        return rows()

    # ------------------------------------------------------------ time

    def tick(self, tick: int, min_ts: int, region_min_lock: dict[int, int]) -> None:
        """Advance every stream: register, take snapshots, emit a slice of scan output, INITIALIZED,
        and RESOLVED for initialized regions (``min_ts`` from PD, held back by the region's oldest lock)."""
        for s in self.streams.values():
            if not s.registered and tick >= s.register_tick:
                s.registered = True
            if s.registered and s.scan is None and not s.initialized and tick >= s.snapshot_tick:
                s.scan = self._snapshot(s.region)
            if s.scan is not None:
                for _ in range(s.speed):
                    row = next(s.scan, None)
                    if row is None:
                        s.scan = None
                        s.initialized = True
                        self._emit(s, INITIALIZED, None, None, None, None, None, None, 0)
                        s.next_resolved_tick = tick + 1
                        self._write_stale(s)
                        break
                    self._emit(s, row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])
            if s.initialized and tick >= s.next_resolved_tick:
                self.resolve(s, min_ts, region_min_lock)
                s.next_resolved_tick = tick + s.resolved_every

    def _write_stale(self, s: Stream) -> None:
        """A writer that missed the DDL commits on the retired id after its retirement ts."""
        if s.stale_write is None:
            return
        key, value, retired_ts = s.stale_write
        self._emit(s, PREWRITE, retired_ts + 1, None, PUT, key, value, None, 0)
        self._emit(s, COMMIT, retired_ts + 1, retired_ts + 2, PUT, key, b"", None, 0)
        self.counts["stale_writes_on_retired_ids"] = self.counts.get("stale_writes_on_retired_ids", 0) + 1

    def resolve(self, s: Stream, min_ts: int, region_min_lock: dict[int, int]) -> None:
        ts = min(min_ts, region_min_lock.get(s.region.id, min_ts))
        if s.resolved_cap is not None:
            ts = min(ts, s.resolved_cap)
        if ts > s.last_resolved:
            s.last_resolved = ts
            self._emit(s, RESOLVED, None, None, None, None, None, None, 0, ts)

    def all_caught_up(self) -> bool:
        return all(
            s.initialized and s.last_resolved >= min(self.current_ts, s.resolved_cap or self.current_ts)
            for s in self.streams.values()
        )

    def finish(self, min_ts: int, region_min_lock: dict[int, int]) -> int:
        """Last RESOLVED per initialized region, then close the events files; returns the event count."""
        for s in self.streams.values():
            if s.initialized:
                self.resolve(s, min_ts, region_min_lock)
        return self.writer.close()

    def resolved_ts(self, tables: Mapping[int, set[int]]) -> int:
        """docs/architecture.md "Words": per region the last RESOLVED after INITIALIZED (none: the
        checkpoint), per table the min over regions covering its spans, globally the min over tables, capped
        by current_ts.

        ``tables``: table -> its physical ids in the window. An id retired at R (``self.retired``) holds its
        table back only while the table is below R: TiCDC removes its span at the DDL barrier."""
        resolved = self.current_ts
        for pids in tables.values():
            span_ts = {pid: self._span_resolved(pid) for pid in pids}
            ts = min((t for pid, t in span_ts.items() if pid not in self.retired), default=self.current_ts)
            lowered = True
            while lowered:
                lowered = False
                for pid in pids & self.retired.keys():
                    if span_ts[pid] < ts < self.retired[pid]:
                        ts, lowered = span_ts[pid], True
            resolved = min(resolved, ts)
        return resolved

    def _span_resolved(self, pid: int) -> int:
        lo, hi = table_span(pid)
        ts = self.current_ts
        for s in self.streams.values():
            if s.region.overlaps(lo, hi):
                region_ts = s.last_resolved if s.initialized else 0
                ts = min(ts, max(self.checkpoint_ts, region_ts))
        return ts
