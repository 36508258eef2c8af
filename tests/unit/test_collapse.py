"""Collapsing one key range's changes to the last change per row, in Arrow (no Spark)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from backfill.codec import record_key
from backfill.sources.kvscan.range_collapse import BAD_ROWS, CollapsePlan, collapse_changes, record_key_parts

pytestmark = pytest.mark.unit

ORDERS, ITEMS, OTHER = 100, 200, 300  # ORDERS has a second partition 101 from ts 50 on
PLAN = CollapsePlan(
    table_of_physical={100: 0, 101: 0, 200: 1},
    known_ids=frozenset({100, 101, 200, 300}),
    live={100: [(0, None)], 101: [(50, None)], 200: [(0, 80)]},
    table_floor={0: 10, 1: 10},
    resolved_ts=1000,
    segment_bounds={0: [500], 1: []},
    windows={"s1": (0, 2000), "s0": (0, 15)},
)


def changes(*rows: tuple[bytes | None, str | None, int | None, bytes | None]) -> pa.Table:
    """(key, op, commit_ts, value) rows, all in capture s1, region 1."""
    return pa.table(
        {
            "scan_id": ["s1"] * len(rows),
            "region_id": pa.array([1] * len(rows), pa.int64()),
            "key": pa.array([r[0] for r in rows], pa.binary()),
            "op": pa.array([r[1] for r in rows], pa.string()),
            "value": pa.array([r[3] for r in rows], pa.binary()),
            "commit_ts": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def out(table: pa.Table) -> list[tuple[int, int, str, int, bytes]]:
    return sorted(
        zip(
            *(table.column(c).to_pylist() for c in ("table_idx", "segment", "op", "commit_ts", "key")),
            strict=True,
        )
    )


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_record_key_parts_match_the_codec(table_id: int, handle: int) -> None:
    key = record_key(table_id, handle)
    parts = record_key_parts(pa.array([key, b"m\x00meta", None, key[:11]], pa.binary()))
    assert parts.is_record.tolist() == [True, False, False, False]
    assert parts.physical_id.tolist()[0] == table_id
    assert parts.handle.to_pylist()[0] == key[11:]


def test_the_last_change_per_key_wins_and_a_tie_goes_to_the_put() -> None:
    a, b = record_key(ORDERS, 1), record_key(ORDERS, 2)
    moved_from, moved_to = record_key(ORDERS, 3), record_key(101, 3)
    result = collapse_changes(
        changes(
            (a, "PUT", 20, b"v1"), (a, "PUT", 30, b"v2"), (a, "DELETE", 25, b""),
            (b, "PUT", 20, b"v1"), (b, "DELETE", 40, b""),
            (moved_to, "PUT", 60, b"moved"), (moved_from, "DELETE", 60, b""),
        ),
        PLAN,
    )  # fmt: skip
    assert out(result) == [(0, 0, "DELETE", 40, b), (0, 0, "PUT", 30, a), (0, 0, "PUT", 60, moved_to)]
    values = dict(zip(result.column("key").to_pylist(), result.column("value").to_pylist(), strict=True))
    assert values[a] == b"v2" and values[moved_to] == b"moved"


def test_window_floor_resolved_ts_liveness_and_untracked_tables() -> None:
    key = record_key(ORDERS, 1)
    result = collapse_changes(
        changes(
            (key, "PUT", 10, b"at the checkpoint: applied before"),
            (key, "PUT", 1001, b"above the resolved ts: next run"),
            (record_key(101, 1), "PUT", 40, b"partition 101 not yet added at ts 40"),
            (record_key(ITEMS, 1), "PUT", 81, b"table dropped at ts 80"),
            (record_key(OTHER, 1), "PUT", 20, b"known table, not tracked"),
            (record_key(ITEMS, 2), "PUT", 79, b"kept"),
        ),
        PLAN,
    )
    assert out(result) == [(1, 0, "PUT", 79, record_key(ITEMS, 2))]


def test_rows_get_the_segment_of_their_schema_version() -> None:
    result = collapse_changes(
        changes((record_key(ORDERS, 1), "PUT", 500, b"x"), (record_key(ORDERS, 2), "PUT", 501, b"y")), PLAN
    )
    assert [(r[1], r[3]) for r in out(result)] == [(0, 500), (1, 501)]


@pytest.mark.parametrize(
    "row",
    [
        (b"m\x00not a record", "PUT", 20, b"x"),
        (record_key(999, 1), "DELETE", 20, b""),
        (record_key(ORDERS, 1), "PUT", 20, b""),
        (record_key(ORDERS, 1), "LOCK", 20, b""),
        (record_key(ORDERS, 1), None, 20, b"x"),
        (record_key(ORDERS, 1), "PUT", None, b"x"),
        (None, "PUT", 20, b"x"),
    ],
    ids=["not-a-record", "unknown-table", "put-without-value", "bad-op", "no-op", "no-commit-ts", "no-key"],
)
def test_a_contract_breaking_row_comes_out_as_bad(row) -> None:
    good = (record_key(ORDERS, 5), "PUT", 20, b"ok")
    result = collapse_changes(changes(good, row, row), PLAN)
    table_idx = result.column("table_idx").to_pylist()
    assert sorted(table_idx) == [BAD_ROWS, 0], "one bad row is enough to name the place"
    (bad,) = [r for r in result.to_pylist() if r["table_idx"] == BAD_ROWS]
    assert (bad["key"], bad["op"], bad["commit_ts"], bad["scan_id"], bad["region_id"]) == (*row[:3], "s1", 1)


def test_each_capture_contributes_only_its_window() -> None:
    rows = changes(
        (record_key(ORDERS, 1), "PUT", 14, b"s0, inside (0, 15]"),
        (record_key(ORDERS, 2), "PUT", 20, b"s0, after its window: another capture's"),
        (b"m\x00not a record", "PUT", 20, b"a bad row outside the window is not this run's"),
    )
    rows = rows.set_column(0, "scan_id", pa.array(["s0"] * 3))
    assert out(collapse_changes(rows, PLAN)) == [(0, 0, "PUT", 14, record_key(ORDERS, 1))]


def test_each_kept_change_carries_its_own_old_value_and_its_rows_first() -> None:
    a, b = record_key(ORDERS, 1), record_key(ORDERS, 2)
    rows = changes(
        (b, "PUT", 30, b"b2"),
        (a, "PUT", 20, b"a1"),
        (b, "PUT", 25, b"b1"),
        (a, "DELETE", 40, b""),
        (a, "PUT", 35, b"a2"),
        (b, "PUT", 33, b"b3"),
    ).append_column("old_value", pa.array([b"b@25", b"a@0", b"b@0", b"a@35", b"a@20", b"b@30"], pa.binary()))
    got = {
        (r["key"], r["op"], r["commit_ts"], r["value"], r["old_value"], r["first_old_value"])
        for r in collapse_changes(rows, PLAN).to_pylist()
    }
    assert got == {(a, "DELETE", 40, b"", b"a@35", b"a@0"), (b, "PUT", 33, b"b3", b"b@30", b"b@0")}


def test_rows_outside_among_are_not_changes() -> None:
    a, b = record_key(ORDERS, 1), record_key(ORDERS, 2)
    # The last two rows are not changes (a key range's region rows): no op, no commit ts. Left out by
    # `among`, they neither win over a change nor count as contract-breaking rows.
    rows = changes(
        (a, "PUT", 20, b"a"), (b, "PUT", 21, b"b"), (a, "PUT", 90, b"later"), (None, None, None, None)
    )
    got = collapse_changes(rows, PLAN, among=np.array([True, True, False, False]))
    assert out(got) == [(0, 0, "PUT", 20, a), (0, 0, "PUT", 21, b)]
    assert BAD_ROWS in collapse_changes(rows, PLAN).column("table_idx").to_pylist()
