"""The matcher, case by case, with TiCDC's semantics (tiflow cdc/kv/matcher_test.go names in brackets)."""

from __future__ import annotations

import pytest

from backfill.sources.kvscan.matcher import MatchError, MatchResult, RowChange, StreamEvent, match_events

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
