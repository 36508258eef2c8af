"""Pair TiKV CDC events of one region stream into committed row changes, with TiCDC's semantics.

Per region stream (reference/tidb-kv-formats.md §1.4, tiflow `cdc/kv/matcher.go`):

- PREWRITE is kept per (start_ts, key) until its COMMIT; a prewrite with an empty value (a "fake" prewrite
  from a lock rewrite or heartbeat) never clobbers a stored one, and pipelined DML keeps the newest
  generation.
- COMMIT takes the value of its prewrite. Before INITIALIZED a commit can arrive ahead of the prewrite
  the incremental scan will deliver, so it is cached and matched at INITIALIZED; a cached commit that still
  has no prewrite (or only a fake one) was already delivered by the scan as COMMITTED and is dropped. After INITIALIZED a commit
  without a prewrite is a data error.
- ROLLBACK drops the prewrite (deferred until INITIALIZED when it arrives before).
- COMMITTED (incremental scan, 1PC) is self-contained.
- RESOLVED after INITIALIZED sets the region's resolved ts; it never goes back, and no commit at or below
  it may follow.
Commits at or below the stream's checkpoint are stale and dropped. Unmatched prewrites (open locks) are
discarded at the end: the next capture's incremental scan re-emits the locks that still exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tidelake.errors import InputError

PREWRITE = "PREWRITE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
COMMITTED = "COMMITTED"
INITIALIZED = "INITIALIZED"
RESOLVED = "RESOLVED"
EVENT_TYPES = (PREWRITE, COMMIT, ROLLBACK, COMMITTED, INITIALIZED, RESOLVED)
ROW_OPS = ("PUT", "DELETE")


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One row of a capture's events file (DESIGN.md input contract)."""

    seq: int
    type: str
    start_ts: int | None = None
    commit_ts: int | None = None
    op_type: str | None = None
    key: bytes | None = None
    value: bytes | None = None
    generation: int = 0
    resolved_ts: int | None = None


@dataclass(frozen=True, slots=True)
class RowChange:
    """A committed change of one key: what the rest of the pipeline consumes."""

    key: bytes
    op: str
    value: bytes
    start_ts: int
    commit_ts: int


class MatchError(InputError):
    """The stream breaks TiKV's guarantees: names the region, key and timestamps."""


@dataclass
class RegionMatcher:
    """The matcher state of one region stream; feed events in stream (seq) order."""

    region_id: int
    checkpoint_ts: int
    where: str = ""
    initialized: bool = False
    resolved_ts: int | None = None
    _unmatched: dict[tuple[int, bytes], StreamEvent] = field(default_factory=dict)
    _cached_commits: list[StreamEvent] = field(default_factory=list)
    _cached_rollbacks: list[StreamEvent] = field(default_factory=list)
    stale_commits: int = 0
    dropped_commits: int = 0

    def feed(self, event: StreamEvent) -> Iterator[RowChange]:
        kind = event.type
        if kind == PREWRITE:
            self._put_prewrite(event)
        elif kind == COMMIT:
            prewrite = self._match(event, self.initialized)
            if prewrite is not None:
                yield from self._emit(event, prewrite)
            elif not self.initialized:
                self._cached_commits.append(event)
            else:
                raise self._error(event, "commit without a prewrite after INITIALIZED")
        elif kind == COMMITTED:
            self._check_above_resolved(event)
            yield from self._emit(event, event)
        elif kind == ROLLBACK:
            if self.initialized:
                self._unmatched.pop(self._slot(event), None)
            else:
                self._cached_rollbacks.append(event)
        elif kind == INITIALIZED:
            yield from self._initialize()
        elif kind == RESOLVED:
            self._resolve(event)
        else:
            raise self._error(event, f"unknown event type {kind!r} (valid: {', '.join(EVENT_TYPES)})")

    def feed_all(self, events: Iterable[StreamEvent]) -> Iterator[RowChange]:
        for event in events:
            yield from self.feed(event)

    @property
    def open_locks(self) -> int:
        return len(self._unmatched)

    def _slot(self, event: StreamEvent) -> tuple[int, bytes]:
        if event.start_ts is None or event.key is None:
            raise self._error(event, f"{event.type} event without start_ts or key")
        return (event.start_ts, event.key)

    def _put_prewrite(self, event: StreamEvent) -> None:
        slot = self._slot(event)
        old = self._unmatched.get(slot)
        if old is not None:
            if not event.value:
                return  # a fake prewrite must not clobber the real one
            if event.generation < old.generation:
                return  # pipelined DML: keep the newest flush generation
        self._unmatched[slot] = event

    def _match(self, commit: StreamEvent, initialized: bool) -> StreamEvent | None:
        """The prewrite this commit completes (taken out of the unmatched set), or None."""
        slot = self._slot(commit)
        prewrite = self._unmatched.get(slot)
        if prewrite is None:
            return None
        if not initialized and (not prewrite.value or prewrite.generation > 0):
            return None  # the scan may still deliver the real (or a newer) prewrite
        del self._unmatched[slot]
        return prewrite

    def _emit(self, event: StreamEvent, prewrite: StreamEvent) -> Iterator[RowChange]:
        """The change a COMMIT (with its prewrite) or a COMMITTED (its own prewrite) stands for."""
        commit_ts = event.commit_ts
        if commit_ts is None:
            raise self._error(event, f"{event.type} event without commit_ts")
        if commit_ts <= self.checkpoint_ts:
            self.stale_commits += 1
            return
        if event.type == COMMIT:
            self._check_above_resolved(event)
        op = prewrite.op_type
        if op not in ROW_OPS:
            raise self._error(event, f"op_type {op!r} is neither PUT nor DELETE")
        value = prewrite.value or b""
        if op == "PUT" and not value:
            raise self._error(event, "PUT with an empty value (its prewrite carried no row)")
        yield RowChange(event.key or b"", op, value if op == "PUT" else b"", event.start_ts or 0, commit_ts)

    def _initialize(self) -> Iterator[RowChange]:
        self.initialized = True
        cached, self._cached_commits = self._cached_commits, []
        for commit in cached:
            prewrite = self._match(commit, True)
            if prewrite is not None and (prewrite.value or prewrite.op_type == "DELETE"):
                yield from self._emit(commit, prewrite)
            else:
                # No prewrite, or only a fake one (a lock rewrite seen before the scan reached the key): the
                # commit happened before the snapshot, so the scan delivered it as COMMITTED, with its value.
                self.dropped_commits += 1
        for rollback in self._cached_rollbacks:
            self._unmatched.pop(self._slot(rollback), None)
        self._cached_rollbacks = []

    def _resolve(self, event: StreamEvent) -> None:
        if not self.initialized:
            return  # TiKV sends none before INITIALIZED; TiCDC ignores them
        ts = event.resolved_ts
        if ts is None:
            raise self._error(event, "RESOLVED event without resolved_ts")
        if self.resolved_ts is not None and ts < self.resolved_ts:
            raise self._error(event, f"resolved ts goes back from {self.resolved_ts} to {ts}")
        self.resolved_ts = ts

    def _check_above_resolved(self, event: StreamEvent) -> None:
        if (
            self.resolved_ts is not None
            and event.commit_ts is not None
            and event.commit_ts <= self.resolved_ts
        ):
            raise self._error(
                event, f"commit_ts {event.commit_ts} arrives after the region resolved ts {self.resolved_ts}"
            )

    def _error(self, event: StreamEvent, what: str) -> MatchError:
        key = event.key.hex() if event.key else "-"
        place = f"{self.where}: " if self.where else ""
        return MatchError(
            f"{place}region {self.region_id}, seq {event.seq}, key {key}, start_ts {event.start_ts}, "
            f"commit_ts {event.commit_ts}: {what}"
        )
