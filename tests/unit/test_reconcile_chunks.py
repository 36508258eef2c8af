"""Chunk planning, the key-range predicate (checked against SQLite), and bisection."""

from __future__ import annotations

import random
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconcile.chunks import (
    KeyRange,
    effective_chunk_size,
    narrow,
    ranges_from_boundaries,
    split,
)
from reconcile.upstream.sqltext import lexicographic_predicate


def predicate(key_range: KeyRange, exprs: list[str], placeholder: str = "%s") -> tuple[str, list]:
    return lexicographic_predicate(key_range, exprs, placeholder)


pytestmark = pytest.mark.unit


def test_boundaries_make_ranges_that_cover_everything_once() -> None:
    ranges = ranges_from_boundaries([(10,), (20,)])
    assert ranges == [KeyRange(None, (10,)), KeyRange((10,), (20,)), KeyRange((20,), None)]
    for key in [(-5,), (9,), (10,), (19,), (20,), (10**9,)]:
        assert sum(r.contains(key) for r in ranges) == 1
    assert ranges_from_boundaries([]) == [KeyRange(None, None)]


def test_split_keeps_only_interior_points() -> None:
    r = KeyRange((10,), (20,))
    assert split(r, [(15,)]) == [KeyRange((10,), (15,)), KeyRange((15,), (20,))]
    assert split(r, [(10,), (25,), (5,)]) == [r]
    assert split(r, [(12,), (12,), (17,)]) == [
        KeyRange((10,), (12,)),
        KeyRange((12,), (17,)),
        KeyRange((17,), (20,)),
    ]


def test_chunk_size_grows_to_cap_the_number_of_chunks() -> None:
    assert effective_chunk_size(None, 1000, 10) == 1000
    assert effective_chunk_size(5000, 1000, 10) == 1000
    assert effective_chunk_size(1_000_000, 1000, 10) == 100_000


def test_predicate_sql_for_a_composite_key() -> None:
    sql, params = predicate(KeyRange((1, "b"), None), ["`a`", "`s`"])
    assert sql == "(`a` >= %s AND ((`a` > %s) OR (`a` = %s AND `s` >= %s)))"
    assert params == [1, 1, 1, "b"]
    assert predicate(KeyRange(), ["`a`"]) == ("TRUE", [])


keys = st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4))


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.none(), keys), st.one_of(st.none(), keys), st.integers(1, 3))
def test_predicate_selects_exactly_the_keys_the_range_contains(lower, upper, width) -> None:
    """The SQL both sides run agrees with the range's own definition (lexicographic, half-open)."""
    lower = lower[:width] if lower else None
    upper = upper[:width] if upper else None
    db = sqlite3.connect(":memory:")
    cols = ["a", "b", "c"][:width]
    db.execute(f"CREATE TABLE t ({', '.join(cols)})")
    everything = sorted(
        {k[:width] for k in [(x, y, z) for x in range(5) for y in range(5) for z in range(5)]}
    )
    db.executemany(f"INSERT INTO t VALUES ({', '.join('?' * width)})", everything)
    key_range = KeyRange(lower, upper)
    sql, params = predicate(key_range, cols, placeholder="?")
    got = sorted(db.execute(f"SELECT * FROM t WHERE {sql.replace('TRUE', '1')}", params).fetchall())
    assert got == [k for k in everything if key_range.contains(k)]


def _fake_sides(upstream_rows: dict[int, int], delta_rows: dict[int, int], parts: int = 2):
    """Both sides over dicts key -> value, with a count and a sum of values per range, like the real ones."""

    def sums(rows: dict[int, int], r: KeyRange) -> tuple[int, int]:
        inside = [v for k, v in rows.items() if r.contains((k,))]
        return len(inside), sum(inside)

    rounds = []

    def split(requests):
        rounds.append(len(requests))
        out = []
        for r, (count, _) in requests:
            keys = sorted(k for k in upstream_rows if r.contains((k,)))
            size = max(-(-count // parts), 1)
            starts = [(k,) for k in keys[size::size]]
            cut = ranges_from_boundaries(starts)
            cut = [
                KeyRange(r.lower if c.lower is None else c.lower, r.upper if c.upper is None else c.upper)
                for c in cut
            ]
            out.append([(c, sums(upstream_rows, c)) for c in cut] if keys else [])
        return out

    def delta_checksums(ranges):
        return [sums(delta_rows, r) for r in ranges]

    def differing(ranges):
        return [(r, sums(upstream_rows, r)) for r in ranges if sums(upstream_rows, r) != sums(delta_rows, r)]

    return split, delta_checksums, differing, rounds


def test_bisection_narrows_each_difference_to_a_small_range() -> None:
    upstream = {k: k * 7 for k in range(0, 10_000)}
    delta = dict(upstream)
    delta[1234] += 1  # changed
    del delta[7777]  # missing
    delta[20_000] = 1  # extra, beyond every upstream key
    split, delta_checksums, differing, rounds = _fake_sides(upstream, delta)
    chunks = ranges_from_boundaries([(k,) for k in range(1000, 10_000, 1000)])
    leaves = narrow(differing(chunks), split, delta_checksums, leaf_rows=50)
    assert all(sum(r.contains((k,)) for k in upstream) <= 50 for r in leaves)
    for key in (1234, 7777, 20_000):
        assert sum(r.contains((key,)) for r in leaves) == 1
    assert len(leaves) == 3
    assert len(rounds) <= 6  # one batch per round, not one query per range


def test_a_k_way_split_needs_fewer_rounds() -> None:
    upstream = {k: 1 for k in range(100_000)}
    delta = dict(upstream)
    delta[54_321] = 2
    split, delta_checksums, differing, rounds = _fake_sides(upstream, delta, parts=16)
    leaves = narrow(differing([KeyRange()]), split, delta_checksums, leaf_rows=100)
    assert len(leaves) == 1 and leaves[0].contains((54_321,))
    assert len(rounds) == 3  # 100k -> 6250 -> 391 -> 25 rows


def test_bisection_ends_on_a_range_it_cannot_split() -> None:
    upstream = dict.fromkeys(range(100), 1)
    delta = dict(upstream)
    delta[5] = 2
    _, delta_checksums, differing, _ = _fake_sides(upstream, delta)
    leaves = narrow(differing([KeyRange()]), lambda reqs: [[] for _ in reqs], delta_checksums, leaf_rows=10)
    assert leaves == [KeyRange()]


def test_bisection_of_random_differences_finds_them_all() -> None:
    rng = random.Random(3)
    upstream = {k: rng.randrange(10**6) for k in rng.sample(range(10**6), 5000)}
    delta = dict(upstream)
    changed = rng.sample(sorted(upstream), 40)
    for k in changed:
        delta[k] += 1
    split, delta_checksums, differing, _ = _fake_sides(upstream, delta, parts=4)
    chunks = ranges_from_boundaries([(k,) for k in sorted(upstream)[500::500]])
    leaves = narrow(differing(chunks), split, delta_checksums, leaf_rows=20)
    assert all(any(r.contains((k,)) for r in leaves) for k in changed)
    assert sum(sum(r.contains((k,)) for k in upstream) for r in leaves) <= 40 * 20
