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
- A change's old value (the row before it) comes from its prewrite, or from the COMMITTED event.
- RESOLVED after INITIALIZED sets the region's resolved ts; it never goes back, and no commit at or below
  it may follow.
Commits at or below the stream's checkpoint are stale and dropped. Unmatched prewrites (open locks) are
discarded at the end: the next capture's incremental scan re-emits the locks that still exist.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
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
_PREWRITE, _COMMIT, _ROLLBACK, _COMMITTED, _INITIALIZED, _RESOLVED = range(len(EVENT_TYPES))
_PUT, _DELETE = range(len(ROW_OPS))


def code(value: str | None, choices: Sequence[str]) -> int:
    """Index of `value` in `choices`, -1 if absent."""
    return choices.index(value) if value in choices else -1


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
    old_value: bytes | None = None
    generation: int = 0
    resolved_ts: int | None = None


@dataclass(frozen=True, slots=True)
class RowChange:
    """A committed change of one key: what the rest of the pipeline consumes. `old_value` is the row before
    it (TiKV sends it with the prewrite, or with a COMMITTED event): empty when there was none, None when the
    capture has no old values."""

    key: bytes
    op: str
    value: bytes
    start_ts: int
    commit_ts: int
    old_value: bytes | None = None


class MatchError(InputError):
    """The stream breaks TiKV's guarantees: names the region, key and timestamps."""


@dataclass(frozen=True)
class StreamColumns:
    """One region stream in seq order, column by column: what the matcher reads.

    Types and ops are small integer codes and `key` any hashable stand-in per event (bytes, or a
    dictionary code: only equality matters), so the loop compares ints; `has_value` says whether the
    event's value is non-empty. Values never enter the loop: a match names the event rows to take them
    from. `describe` recovers the original fields of one event for an error message.
    """

    type: Sequence[int]  # index into EVENT_TYPES, -1 for anything else
    start_ts: Sequence[int | None]
    commit_ts: Sequence[int | None]
    op_type: Sequence[int]  # index into ROW_OPS, -1 for anything else
    key: Sequence[Hashable]
    has_value: Sequence[bool]
    generation: Sequence[int]
    resolved_ts: Sequence[int | None]
    describe: Callable[
        [int], tuple[int, str | None, str | None, bytes | None]
    ]  # (seq, type, op, key) of event i


@dataclass
class MatchResult:
    """Matches as (commit event, prewrite event) index pairs; a COMMITTED event is its own prewrite."""

    matches: list[tuple[int, int]] = field(default_factory=list)
    initialized: bool = False
    resolved_ts: int | None = None
    open_locks: int = 0
    stale_commits: int = 0
    dropped_commits: int = 0


def match_stream(cols: StreamColumns, region_id: int, checkpoint_ts: int, where: str = "") -> MatchResult:
    """Run one region stream through TiCDC's matcher (see the module docstring); raises MatchError."""
    types, starts, commits, keys = cols.type, cols.start_ts, cols.commit_ts, cols.key
    has_value, ops, generations = cols.has_value, cols.op_type, cols.generation
    result = MatchResult()
    unmatched: dict[tuple[int | None, Hashable], int] = {}  # (start_ts, key) -> prewrite event index
    cached_commits: list[int] = []
    cached_rollbacks: list[int] = []
    initialized = False
    resolved: int | None = None

    def error(i: int, what: str) -> MatchError:
        seq, _, _, key = cols.describe(i)
        place = f"{where}: " if where else ""
        return MatchError(
            f"{place}region {region_id}, seq {seq}, key {key.hex() if key else '-'}, "
            f"start_ts {starts[i]}, commit_ts {commits[i]}: {what}"
        )

    def emit(i: int, p: int) -> None:
        """Record commit event i with its prewrite p, unless stale; check the op and the value."""
        commit_ts = commits[i]
        if commit_ts is None:
            raise error(i, f"{cols.describe(i)[1]} event without commit_ts")
        start_ts = starts[i]
        if start_ts is not None and commit_ts <= start_ts:
            raise error(i, f"commit_ts {commit_ts} is not after its start_ts {start_ts}")
        if commit_ts <= checkpoint_ts:
            result.stale_commits += 1
            return
        if resolved is not None and commit_ts <= resolved:
            raise error(i, f"commit_ts {commit_ts} arrives after the region resolved ts {resolved}")
        op = ops[p]
        if op < 0:
            raise error(i, f"op_type {cols.describe(p)[2]!r} is neither PUT nor DELETE")
        if op == _PUT and not has_value[p]:
            raise error(i, "PUT with an empty value (its prewrite carried no row)")
        result.matches.append((i, p))

    def slot(i: int) -> tuple[int | None, Hashable]:
        if starts[i] is None or keys[i] is None:
            raise error(i, f"{cols.describe(i)[1]} event without start_ts or key")
        return (starts[i], keys[i])

    def take(i: int, accept_any: bool) -> int | None:
        """The prewrite commit i completes, taken out of the unmatched set, or None."""
        s = slot(i)
        p = unmatched.get(s)
        if p is None:
            return None
        if not accept_any and (not has_value[p] or generations[p] > 0):
            return None  # the scan may still deliver the real (or a newer) prewrite
        del unmatched[s]
        return p

    for i in range(len(types)):
        kind = types[i]
        if kind == _PREWRITE:
            s = slot(i)
            old = unmatched.get(s)
            if old is not None and (not has_value[i] or generations[i] < generations[old]):
                continue  # a fake prewrite never clobbers; pipelined DML keeps the newest generation
            unmatched[s] = i
        elif kind == _COMMIT:
            p = take(i, initialized)
            if p is not None:
                emit(i, p)
            elif not initialized:
                cached_commits.append(i)
            else:
                raise error(i, "commit without a prewrite after INITIALIZED")
        elif kind == _COMMITTED:
            emit(i, i)
        elif kind == _ROLLBACK:
            if initialized:
                unmatched.pop(slot(i), None)
            else:
                cached_rollbacks.append(i)
        elif kind == _INITIALIZED:
            initialized = True
            for c in cached_commits:
                p = take(c, True)
                if p is not None and (has_value[p] or ops[p] == _DELETE):
                    emit(c, p)
                else:
                    # No prewrite, or only a fake one (a lock rewrite seen before the scan reached the key):
                    # the commit predates the snapshot, so the scan delivered it as COMMITTED, with its value.
                    result.dropped_commits += 1
            for r in cached_rollbacks:
                unmatched.pop(slot(r), None)
            cached_commits, cached_rollbacks = [], []
        elif kind == _RESOLVED:
            if not initialized:
                continue  # TiKV sends none before INITIALIZED; TiCDC ignores them
            ts = cols.resolved_ts[i]
            if ts is None:
                raise error(i, "RESOLVED event without resolved_ts")
            if resolved is not None and ts < resolved:
                raise error(i, f"resolved ts goes back from {resolved} to {ts}")
            resolved = ts
        else:
            raise error(i, f"unknown event type {cols.describe(i)[1]!r} (valid: {', '.join(EVENT_TYPES)})")
    result.initialized, result.resolved_ts, result.open_locks = initialized, resolved, len(unmatched)
    return result


def match_events(
    events: Sequence[StreamEvent], region_id: int, checkpoint_ts: int, where: str = ""
) -> tuple[list[RowChange], MatchResult]:
    """The matcher over event objects (tests, small streams): the changes and the stream's outcome."""
    cols = StreamColumns(
        type=[code(e.type, EVENT_TYPES) for e in events],
        start_ts=[e.start_ts for e in events],
        commit_ts=[e.commit_ts for e in events],
        op_type=[code(e.op_type, ROW_OPS) for e in events],
        key=[e.key for e in events],
        has_value=[bool(e.value) for e in events],
        generation=[e.generation or 0 for e in events],
        resolved_ts=[e.resolved_ts for e in events],
        describe=lambda i: (events[i].seq, events[i].type, events[i].op_type, events[i].key),
    )
    result = match_stream(cols, region_id, checkpoint_ts, where)
    changes = []
    for i, p in result.matches:
        commit, prewrite = events[i], events[p]
        op = prewrite.op_type or ""
        value = (prewrite.value or b"") if op == "PUT" else b""
        changes.append(
            RowChange(
                commit.key or b"", op, value, commit.start_ts or 0, commit.commit_ts or 0, prewrite.old_value
            )
        )
    return changes, result
