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

`match_stream` replays a stream event by event. `match_stream_arrays` gives the same result faster: a
lock (start_ts, key) whose events are a common story (a prewrite and its commit or rollback, a commit
the scan already delivered, a lone prewrite: `_common_locks`) is matched with numpy, and only the other
locks and the keyless events go through the loop. Locks are independent of each other; what they share
(INITIALIZED, the resolved ts) the loop still sees whole. Any error sends the whole stream through the
loop, which names the first.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

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
    """One row of a capture's events file (docs/architecture.md "The kv-scan input")."""

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
    """Matches as (commit event, prewrite event) index pairs; a COMMITTED event is its own prewrite.
    `emitted_at` holds, per match, the event being read when it was made (a cached commit: INITIALIZED)."""

    matches: list[tuple[int, int]] = field(default_factory=list)
    emitted_at: list[int] = field(default_factory=list)
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

    def emit(i: int, p: int, at: int) -> None:
        """Record commit event i with its prewrite p (read at event `at`), unless stale; check the op and
        the value."""
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
        result.emitted_at.append(at)

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
                emit(i, p, i)
            elif not initialized:
                cached_commits.append(i)
            else:
                raise error(i, "commit without a prewrite after INITIALIZED")
        elif kind == _COMMITTED:
            emit(i, i, i)
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
                    emit(c, p, i)
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
    found = match_stream_arrays(stream_arrays(events), region_id, checkpoint_ts, where)
    found.outcome.matches = list(zip(found.commits.tolist(), found.prewrites.tolist(), strict=True))
    changes = []
    for i, p in found.outcome.matches:
        commit, prewrite = events[i], events[p]
        op = prewrite.op_type or ""
        value = (prewrite.value or b"") if op == "PUT" else b""
        changes.append(
            RowChange(
                commit.key or b"", op, value, commit.start_ts or 0, commit.commit_ts or 0, prewrite.old_value
            )
        )
    return changes, found.outcome


def stream_arrays(events: Sequence[StreamEvent]) -> StreamArrays:
    """Event objects as `StreamArrays`, each distinct key coded by its first appearance."""

    def ints(values: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.array([v or 0 for v in values], dtype=np.int64),
            np.array([v is None for v in values], dtype=bool),
        )

    start, start_null = ints([e.start_ts for e in events])
    commit, commit_null = ints([e.commit_ts for e in events])
    resolved, resolved_null = ints([e.resolved_ts for e in events])
    key_codes: dict[bytes, int] = {}
    keys = [-1 if e.key is None else key_codes.setdefault(e.key, len(key_codes)) for e in events]
    return StreamArrays(
        type=np.array([code(e.type, EVENT_TYPES) for e in events], dtype=np.int64),
        start_ts=start,
        start_ts_null=start_null,
        commit_ts=commit,
        commit_ts_null=commit_null,
        op_type=np.array([code(e.op_type, ROW_OPS) for e in events], dtype=np.int64),
        key=np.array(keys, dtype=np.int64),
        has_value=np.array([bool(e.value) for e in events], dtype=bool),
        generation=np.array([e.generation or 0 for e in events], dtype=np.int64),
        resolved_ts=resolved,
        resolved_ts_null=resolved_null,
        describe=lambda i: (events[i].seq, events[i].type, events[i].op_type, events[i].key),
    )


@dataclass(frozen=True)
class StreamArrays:
    """One region stream in seq order as numpy arrays (codes as in `StreamColumns`); a nullable column
    comes with its null mask. `key` holds non-negative codes, -1 for a missing key."""

    type: np.ndarray
    start_ts: np.ndarray
    start_ts_null: np.ndarray
    commit_ts: np.ndarray
    commit_ts_null: np.ndarray
    op_type: np.ndarray
    key: np.ndarray
    has_value: np.ndarray
    generation: np.ndarray
    resolved_ts: np.ndarray
    resolved_ts_null: np.ndarray
    describe: Callable[[int], tuple[int, str | None, str | None, bytes | None]]

    def columns(self, rows: np.ndarray) -> StreamColumns:
        """The events at `rows` (positions, ascending) as the loop's columns."""
        return StreamColumns(
            type=self.type[rows].tolist(),
            start_ts=_nullable(self.start_ts, self.start_ts_null, rows),
            commit_ts=_nullable(self.commit_ts, self.commit_ts_null, rows),
            op_type=self.op_type[rows].tolist(),
            key=_nullable(self.key, self.key < 0, rows),
            has_value=self.has_value[rows].tolist(),
            generation=self.generation[rows].tolist(),
            resolved_ts=_nullable(self.resolved_ts, self.resolved_ts_null, rows),
            describe=lambda i: self.describe(int(rows[i])),
        )


def _nullable(values: np.ndarray, null: np.ndarray, rows: np.ndarray) -> list[int | None]:
    out: list[int | None] = values[rows].tolist()
    for i in np.flatnonzero(null[rows]).tolist():
        out[i] = None
    return out


@dataclass(frozen=True)
class StreamMatches:
    """A stream's matches as event positions, in the order `match_stream` emits them, and the stream's
    state at its end."""

    commits: np.ndarray
    prewrites: np.ndarray
    outcome: MatchResult  # initialized, resolved ts, open locks, stale and dropped commits


@dataclass(frozen=True)
class _CommonLocks:
    commits: np.ndarray
    prewrites: np.ndarray
    emitted_at: np.ndarray  # the event the loop would be reading when it makes each match
    stale: int
    dropped: int
    open_locks: int
    rest: np.ndarray  # positions of the events the loop must replay


def match_stream_arrays(
    arrays: StreamArrays, region_id: int, checkpoint_ts: int, where: str = ""
) -> StreamMatches:
    """`match_stream`'s result for the stream, the common locks matched without the loop (see the module
    docstring); raises MatchError with the message `match_stream` gives."""
    common = _common_locks(arrays, checkpoint_ts)
    if common is not None:
        try:
            rest = match_stream(arrays.columns(common.rest), region_id, checkpoint_ts, where)
        except MatchError:
            pass  # the whole stream names the first error
        else:
            pairs = common.rest[_pairs(rest)]
            emitted = np.concatenate(
                [common.rest[np.asarray(rest.emitted_at, dtype=np.int64)], common.emitted_at]
            )
            commits = np.concatenate([pairs[:, 0], common.commits])
            prewrites = np.concatenate([pairs[:, 1], common.prewrites])
            order = np.lexsort((commits, emitted))  # cached commits leave at INITIALIZED in their order
            rest.open_locks += common.open_locks
            rest.stale_commits += common.stale
            rest.dropped_commits += common.dropped
            rest.matches, rest.emitted_at = [], []
            return StreamMatches(commits[order], prewrites[order], rest)
    outcome = match_stream(arrays.columns(np.arange(len(arrays.type))), region_id, checkpoint_ts, where)
    pairs = _pairs(outcome)
    outcome.matches, outcome.emitted_at = [], []
    return StreamMatches(pairs[:, 0], pairs[:, 1], outcome)


def _pairs(result: MatchResult) -> np.ndarray:
    """The loop's matches as an (n, 2) array of (commit, prewrite) positions."""
    return np.asarray(result.matches, dtype=np.int64).reshape(-1, 2)


def _common_locks(a: StreamArrays, checkpoint_ts: int) -> _CommonLocks | None:
    """Match the locks whose events tell a common story, as the loop would (I: the first INITIALIZED):

    - PREWRITE, COMMIT: matched when the commit is read, if after I or the prewrite has a value and no
      generation above 0; else at I, if there is one and the prewrite has a value or is a DELETE;
    - COMMIT, PREWRITE, both before I: matched at I, if the prewrite has a value or is a DELETE;
    - COMMIT alone before I: dropped at I (the scan delivered it);
    - PREWRITE, ROLLBACK with the rollback after I, or before it when there is one: nothing;
    - PREWRITE alone: an open lock.

    None when one of their commits breaks a rule `emit` checks (or a lock event lacks its start_ts or
    key), so that the loop reports it. The other locks' events, and the keyless ones, are `rest`.
    """
    kinds = a.type
    n = len(kinds)
    slotted = np.flatnonzero((kinds == _PREWRITE) | (kinds == _COMMIT) | (kinds == _ROLLBACK))
    if a.start_ts_null[slotted].any() or (a.key[slotted] < 0).any():
        return None
    initialized = np.flatnonzero(kinds == _INITIALIZED)
    first_init = int(initialized[0]) if len(initialized) else n
    has_init = first_init < n
    rows = slotted[np.lexsort((slotted, a.key[slotted], a.start_ts[slotted]))]  # by lock, then seq
    start, key = a.start_ts[rows], a.key[rows]
    head = np.ones(len(rows), dtype=bool)
    head[1:] = (start[1:] != start[:-1]) | (key[1:] != key[:-1])
    heads = np.flatnonzero(head)
    size = np.diff(np.append(heads, len(rows)))
    x = rows[heads]  # a lock's first event
    y = rows[np.minimum(heads + 1, max(len(rows) - 1, 0))]  # its second, where size == 2
    kx, ky = kinds[x], kinds[y]
    two = size == 2
    early = y < first_init  # the second event comes before INITIALIZED
    prewrite_commit = two & (kx == _PREWRITE) & (ky == _COMMIT)
    at_once = prewrite_commit & (~early | (a.has_value[x] & (a.generation[x] <= 0)))  # matched when read

    def row_or_delete(p: np.ndarray) -> np.ndarray:
        return a.has_value[p] | (a.op_type[p] == _DELETE)

    # The commits cached before INITIALIZED and matched there:
    cached_prewrite_commit = prewrite_commit & ~at_once & has_init & row_or_delete(x)
    cached_commit_prewrite = two & (kx == _COMMIT) & (ky == _PREWRITE) & early & has_init & row_or_delete(y)
    rolled_back = two & (kx == _PREWRITE) & (ky == _ROLLBACK) & (~early | has_init)
    lone = (size == 1) & (kx == _PREWRITE)
    dropped = (size == 1) & (kx == _COMMIT) & (x < first_init) & has_init
    matched = at_once | cached_prewrite_commit | cached_commit_prewrite
    common = matched | rolled_back | lone | dropped
    rest = np.ones(n, dtype=bool)
    rest[rows[np.repeat(common, size)]] = False
    c = np.where(cached_commit_prewrite, x, y)[matched]
    p = np.where(cached_commit_prewrite, y, x)[matched]
    emitted_at = np.where(at_once, y, first_init)[matched]
    # emit()'s checks, in its order: a stale commit skips the later ones.
    if a.commit_ts_null[c].any():
        return None
    commit_ts = a.commit_ts[c]
    if (commit_ts <= a.start_ts[c]).any():
        return None
    fresh = commit_ts > checkpoint_ts
    resolved_at = np.flatnonzero((kinds == _RESOLVED) & ~a.resolved_ts_null)
    resolved_at = resolved_at[resolved_at > first_init]  # the loop ignores RESOLVED before INITIALIZED
    if len(resolved_at):
        latest = np.searchsorted(resolved_at, emitted_at) - 1  # the last RESOLVED read before the match
        resolved = a.resolved_ts[resolved_at[np.maximum(latest, 0)]]
        if (fresh & (latest >= 0) & (commit_ts <= resolved)).any():
            return None
    op = a.op_type[p]
    if (fresh & ((op < 0) | ((op == _PUT) & ~a.has_value[p]))).any():
        return None
    return _CommonLocks(
        c[fresh],
        p[fresh],
        emitted_at[fresh],
        int((~fresh).sum()),
        int(dropped.sum()),
        int(lone.sum()),
        np.flatnonzero(rest),
    )
