"""The matcher, case by case, with TiCDC's semantics (tiflow cdc/kv/matcher_test.go names in brackets)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backfill.sources.kvscan.matcher import (
    EVENT_TYPES,
    ROW_OPS,
    MatchError,
    MatchResult,
    RowChange,
    StreamColumns,
    StreamEvent,
    _common_locks,
    code,
    match_events,
    match_stream,
    stream_arrays,
)

pytestmark = pytest.mark.unit

K1, K2 = b"t\x80\x00\x00\x00\x00\x00\x00\x2d_r\x80\x00\x00\x00\x00\x00\x00\x01", b"t-k2"


class Stream:
    """Builds a region stream with increasing seq numbers."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    def add(self, type_: str, **fields: object) -> Stream:
        self.events.append(StreamEvent(len(self.events), type_, **fields))  # type: ignore[arg-type]
        return self

    def prewrite(
        self, start: int, key: bytes = K1, value: bytes = b"v", op: str = "PUT", gen: int = 0
    ) -> Stream:
        return self.add("PREWRITE", start_ts=start, key=key, value=value, op_type=op, generation=gen)

    def commit(self, start: int, commit: int, key: bytes = K1) -> Stream:
        return self.add("COMMIT", start_ts=start, commit_ts=commit, key=key, op_type="PUT")

    def committed(
        self, start: int, commit: int, key: bytes = K1, value: bytes = b"c", op: str = "PUT"
    ) -> Stream:
        return self.add("COMMITTED", start_ts=start, commit_ts=commit, key=key, value=value, op_type=op)

    def rollback(self, start: int, key: bytes = K1) -> Stream:
        return self.add("ROLLBACK", start_ts=start, key=key)

    def init(self) -> Stream:
        return self.add("INITIALIZED")

    def resolved(self, ts: int) -> Stream:
        return self.add("RESOLVED", resolved_ts=ts)


def run(stream: Stream, checkpoint: int = 0) -> tuple[list[RowChange], MatchResult]:
    return match_events(stream.events, 7, checkpoint)


def test_prewrite_then_commit_pairs_values() -> None:  # [TestMatchRow]
    out, m = run(Stream().init().prewrite(10, value=b"row").commit(10, 11).resolved(11))
    assert out == [RowChange(K1, "PUT", b"row", 10, 11)]
    assert m.resolved_ts == 11 and m.open_locks == 0


def test_delete_prewrite_gives_delete_with_empty_value() -> None:
    out, _ = run(Stream().init().prewrite(10, value=b"", op="DELETE").commit(10, 11))
    assert out == [RowChange(K1, "DELETE", b"", 10, 11)]


def test_fake_prewrite_does_not_clobber_the_real_one() -> None:  # [TestMatchFakePrewrite]
    out, _ = run(Stream().init().prewrite(10, value=b"real").prewrite(10, value=b"").commit(10, 11))
    assert out[0].value == b"real"


def test_pipelined_dml_keeps_the_newest_generation() -> None:  # [TestMatchPipelinedDMLs]
    stream = Stream().init().prewrite(10, value=b"g2", gen=2).prewrite(10, value=b"g1", gen=1).commit(10, 11)
    assert run(stream)[0][0].value == b"g2"
    stream = Stream().init().prewrite(10, value=b"g1", gen=1).prewrite(10, value=b"g3", gen=3).commit(10, 11)
    assert run(stream)[0][0].value == b"g3"


def test_commit_before_prewrite_is_matched_at_initialized() -> None:  # [TestMatchMatchCachedRow]
    # The realtime commit overtakes the incremental scan, which delivers the lock afterwards.
    out, _ = run(Stream().commit(10, 11).prewrite(10, value=b"late").init())
    assert out == [RowChange(K1, "PUT", b"late", 10, 11)]


def test_commit_before_initialized_waits_for_a_non_fake_prewrite() -> None:  # [TestMatchRowUninitialized]
    out, _ = run(Stream().prewrite(10, value=b"").commit(10, 11).prewrite(10, value=b"real").init())
    assert out == [RowChange(K1, "PUT", b"real", 10, 11)]


def test_cached_commit_without_prewrite_is_dropped_as_delivered_by_the_scan() -> None:
    out, m = run(Stream().committed(10, 11, value=b"scan").commit(10, 11).init())
    assert out == [RowChange(K1, "PUT", b"scan", 10, 11)]
    assert m.dropped_commits == 1


def test_cached_commit_with_only_a_fake_prewrite_is_left_to_the_scan() -> None:
    # A new region's stream: a lock rewrite (no value) and the commit arrive before the scan, which then
    # delivers the committed version itself. The commit must not become a PUT without a row.
    stream = Stream().prewrite(10, value=b"").commit(10, 11).committed(10, 11, value=b"scan").init()
    out, m = run(stream)
    assert out == [RowChange(K1, "PUT", b"scan", 10, 11)]
    assert m.dropped_commits == 1 and m.open_locks == 0


def test_commit_without_prewrite_after_initialized_is_a_data_error() -> None:
    with pytest.raises(
        MatchError,
        match=r"region 7, seq 1, key 74800000000000002d5f728000000000000001, start_ts 10, commit_ts 11: "
        r"commit without a prewrite",
    ):
        run(Stream().init().commit(10, 11))


def test_rollback_drops_the_prewrite() -> None:  # [TestMatchMatchCachedRollbackRow]
    with pytest.raises(MatchError):
        run(Stream().init().prewrite(10).rollback(10).commit(10, 11))
    # before INITIALIZED the rollback is applied after the cached commits
    out, m = run(Stream().prewrite(10).rollback(10).init())
    assert out == [] and m.open_locks == 0


def test_committed_is_self_contained_and_1pc_needs_no_prewrite() -> None:
    out, _ = run(Stream().committed(9, 12, value=b"scan").init().committed(20, 21, value=b"1pc"))
    assert [c.value for c in out] == [b"scan", b"1pc"]


def test_stale_commits_at_or_below_the_checkpoint_are_dropped() -> None:
    out, m = run(
        Stream().committed(1, 5).init().prewrite(6).commit(6, 9).prewrite(10).commit(10, 11), checkpoint=9
    )
    assert [c.commit_ts for c in out] == [11]
    assert m.stale_commits == 2


def test_open_locks_stay_unmatched() -> None:
    out, m = run(Stream().prewrite(10).init().prewrite(12, key=K2).resolved(9))
    assert out == [] and m.open_locks == 2


def test_resolved_before_initialized_is_ignored_and_after_it_never_goes_back() -> None:
    _, m = run(Stream().resolved(50).init().resolved(10).resolved(12))
    assert m.resolved_ts == 12
    with pytest.raises(MatchError, match="resolved ts goes back from 12 to 11"):
        run(Stream().init().resolved(12).resolved(11))


def test_a_commit_at_or_below_the_resolved_ts_breaks_the_guarantee() -> None:
    with pytest.raises(MatchError, match="arrives after the region resolved ts 20"):
        run(Stream().init().resolved(20).prewrite(10).commit(10, 15))


def test_put_whose_prewrite_had_no_value_is_an_error() -> None:
    with pytest.raises(MatchError, match="PUT with an empty value"):
        run(Stream().init().prewrite(10, value=b"").commit(10, 11))


def test_unknown_event_type_names_the_valid_ones() -> None:
    with pytest.raises(MatchError, match="unknown event type 'LOCK'"):
        run(Stream().add("LOCK"))


def test_a_commit_ts_not_after_its_start_ts_is_a_data_error() -> None:
    """Found by issue 17's fuzz: such an event used to be applied as if valid, with an impossible ts."""
    with pytest.raises(MatchError, match=r"region 7, .*commit_ts 15 is not after its start_ts 20"):
        run(Stream().init().committed(20, 15))


# The common-case locks are matched with numpy (`match_stream_arrays`): on any stream it must give what the
# event-by-event loop gives, matches in the same order, or the same error.

_STORIES = (  # the events of one lock, in stream order: mostly the common case, some of every other
    *[("PREWRITE", "COMMIT")] * 12, ("PREWRITE", "ROLLBACK"), ("PREWRITE",), ("COMMIT",),
    ("COMMIT", "PREWRITE"), ("PREWRITE", "PREWRITE", "COMMIT"), ("PREWRITE", "COMMIT", "COMMIT"),
    ("ROLLBACK", "PREWRITE"), ("COMMITTED",), ("LOCK",),
)  # fmt: skip


@st.composite
def _streams(draw: st.DrawFn) -> list[StreamEvent]:
    """Locks told as stories, interleaved with INITIALIZED and RESOLVED, with now and then a bad field."""
    events: list[tuple[str, int | None, int | None, bytes | None, int | None]] = []
    for start in range(1, draw(st.integers(0, 8)) + 1):
        key = draw(st.sampled_from([K1, K2, None] if draw(st.integers(0, 20)) == 0 else [K1, K2]))
        commit = start + draw(st.integers(1, 6) if draw(st.integers(0, 20)) else st.integers(-1, 0))
        commit = commit if draw(st.integers(0, 30)) else None
        events += [(type_, start, commit, key, None) for type_ in draw(st.sampled_from(_STORIES))]
    events += [("INITIALIZED", None, None, None, None)] * draw(st.sampled_from([0, 1, 1, 1, 2]))
    events += [("RESOLVED", None, None, None, ts) for ts in draw(st.lists(st.integers(0, 6), max_size=3))]
    order = draw(st.permutations(range(len(events))))
    # A lock's own events keep their story's order: sort each lock's positions back into place.
    lock_of = [(e[1], e[3]) if e[1] is not None else (None, i) for i, e in enumerate(events)]
    slots: dict[object, list[int]] = {}
    for i in range(len(events)):
        slots.setdefault(lock_of[i], []).append(i)
    position = {}
    for members in slots.values():
        for i, at in zip(members, sorted(order[m] for m in members), strict=True):
            position[i] = at
    placed = sorted(range(len(events)), key=position.__getitem__)
    n = len(events)
    ops = draw(st.lists(st.sampled_from(["PUT"] * 12 + ["DELETE"] * 4 + ["LOCK"]), min_size=n, max_size=n))
    values = draw(st.lists(st.sampled_from([b"v"] * 8 + [b""]), min_size=n, max_size=n))
    return [
        StreamEvent(seq, type_, start, commit, ops[i], key, values[i], None, (0, 0, 1, -1)[i % 4], resolved)
        for seq, i in enumerate(placed)
        for type_, start, commit, key, resolved in [events[i]]
    ]


def _loop(events: list[StreamEvent], checkpoint: int) -> MatchResult | str:
    cols = StreamColumns(
        type=[code(e.type, EVENT_TYPES) for e in events],
        start_ts=[e.start_ts for e in events],
        commit_ts=[e.commit_ts for e in events],
        op_type=[code(e.op_type, ROW_OPS) for e in events],
        key=[e.key for e in events],
        has_value=[bool(e.value) for e in events],
        generation=[e.generation for e in events],
        resolved_ts=[e.resolved_ts for e in events],
        describe=lambda i: (events[i].seq, events[i].type, events[i].op_type, events[i].key),
    )
    try:
        result = match_stream(cols, 7, checkpoint)
    except MatchError as exc:
        return str(exc)
    result.emitted_at = []  # match_events leaves it out
    return result


@settings(max_examples=600, deadline=None)
@given(_streams(), st.integers(0, 8))
def test_common_locks_match_as_the_loop_does(events: list[StreamEvent], checkpoint: int) -> None:
    expected = _loop(events, checkpoint)
    try:
        found: MatchResult | str = match_events(events, 7, checkpoint)[1]
    except MatchError as exc:
        found = str(exc)
    assert found == expected


def test_common_locks_skip_the_loop() -> None:
    """Common locks (here a prewrite and its commit or rollback, a lone prewrite) never reach the loop: only
    the keyless events and the other locks do."""
    stream = (
        Stream().prewrite(5).init().prewrite(10, key=K2).resolved(9).commit(5, 11).commit(10, 12, key=K2)
        .prewrite(13).rollback(13).prewrite(14, key=K2).commit(15, 16)  # the last: a commit without prewrite
    )  # fmt: skip
    common = _common_locks(stream_arrays(stream.events), 0)
    found = common and (
        common.rest.tolist(),
        common.commits.tolist(),
        common.prewrites.tolist(),
        common.open_locks,
    )
    # The loop gets INITIALIZED, RESOLVED and the commit without its prewrite; K2's prewrite at 14 stays open.
    assert found == ([1, 3, 9], [4, 5], [0, 2], 1)
    # A common lock that breaks a rule leaves the whole stream to the loop, which names the error.
    broken = Stream().init().prewrite(10, value=b"").commit(10, 11)
    assert _common_locks(stream_arrays(broken.events), 0) is None


def test_cached_commits_leave_at_initialized_in_their_order_whichever_path_matches_them() -> None:
    stream = (
        Stream().commit(10, 11).commit(20, 21, key=K2).prewrite(10, value=b"a")  # K1's lock: common
        .prewrite(20, key=K2, value=b"").prewrite(20, key=K2, value=b"b")  # K2's: two prewrites, the loop's
        .init()
    )  # fmt: skip
    out, _ = run(stream)
    assert [(c.key, c.value) for c in out] == [(K1, b"a"), (K2, b"b")]
    common = _common_locks(stream_arrays(stream.events), 0)
    assert (common and common.rest.tolist()) == [1, 3, 4, 5]


def test_a_commit_taken_before_initialized_leaves_before_the_cached_ones() -> None:
    """A prewrite with a row and no generation above 0 is taken by its commit at once, even before
    INITIALIZED; a commit that came before its prewrite waits for INITIALIZED."""
    stream = (
        Stream().commit(10, 11, key=K2).prewrite(20, value=b"a", gen=-1).commit(20, 21)
        .prewrite(10, key=K2, value=b"b").init()
    )  # fmt: skip
    out, _ = run(stream)
    assert [c.value for c in out] == [b"a", b"b"]
