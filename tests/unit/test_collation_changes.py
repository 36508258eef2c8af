"""Old values through kv-scan for clustered keys that hold collation sort keys: the matcher and the collapse
carry them, and decoding takes a DELETE's key columns and the window's before-image key from them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill.codec import CodecError, TableSchema, encode_row, record_key
from backfill.codec.tableinfo import column_info, table_info
from backfill.sources.kvscan.matcher import StreamEvent, match_events
from backfill.sources.kvscan.range_collapse import CollapsePlan, collapse_changes
from backfill.sources.kvscan.row_decode import decode_changes_batch
from tidelake.conventions import BEFORE_PREFIX, OP

pytestmark = pytest.mark.unit

TABLE = 92


def _schema(collate: str) -> TableSchema:
    cols = [
        column_info(1, "k", "varchar(8)", collate=collate, offset=0),
        column_info(2, "v", "int", offset=1),
    ]
    return TableSchema.from_table_info(table_info(TABLE, "ci", cols, pk=["k"]))


CI = _schema("utf8mb4_general_ci")
KEY = record_key(TABLE, [(CI.by_id[1], "abc")])  # 'abc', 'ABC', 'Abç'... all share it


def row(schema: TableSchema, k: str, v: int) -> bytes:
    return encode_row(schema, {1: k, 2: v})


def test_the_matcher_gives_each_change_the_old_value_of_its_prewrite_or_committed_event():
    old, new = row(CI, "abc", 1), row(CI, "ABC", 2)
    events = [
        StreamEvent(
            0, "COMMITTED", start_ts=5, commit_ts=6, op_type="PUT", key=KEY, value=old, old_value=b""
        ),
        StreamEvent(1, "INITIALIZED"),
        StreamEvent(2, "PREWRITE", start_ts=10, op_type="PUT", key=KEY, value=new, old_value=old),
        StreamEvent(3, "COMMIT", start_ts=10, commit_ts=11, op_type="PUT", key=KEY),
    ]
    changes, _ = match_events(events, region_id=1, checkpoint_ts=0)
    assert [(c.commit_ts, c.value, c.old_value) for c in changes] == [(6, old, b""), (11, new, old)]


def test_collapse_keeps_the_last_change_with_its_own_and_the_first_old_value():
    plan = CollapsePlan(
        {TABLE: 0}, frozenset({TABLE}), {TABLE: [(0, None)]}, {0: 10}, 100, {0: []}, {"s": (0, 100)}
    )
    v1, v2, v3 = row(CI, "abc", 1), row(CI, "ABC", 2), row(CI, "AbC", 3)
    changes = pa.table(
        {
            "scan_id": ["s"] * 4,
            "region_id": pa.array([1] * 4, pa.int64()),
            "key": pa.array([KEY] * 4, pa.binary()),
            "op": ["PUT", "PUT", "PUT", "DELETE"],
            "value": pa.array([v1, v2, v3, b""], pa.binary()),
            "old_value": pa.array([b"", v1, v2, v3], pa.binary()),
            "commit_ts": pa.array([8, 20, 30, 40], pa.int64()),  # 8 is at or below the floor (10)
        }
    )
    (out,) = collapse_changes(changes, plan).to_pylist()
    assert (out["op"], out["commit_ts"], out["old_value"], out["first_old_value"]) == ("DELETE", 40, v3, v1)


def batch(*changes: tuple[str, bytes, bytes | None, bytes | None, int]) -> pa.RecordBatch:
    """(op, value, old_value, first_old_value, commit_ts) of KEY."""
    return pa.record_batch(
        {
            "key": pa.array([KEY] * len(changes), pa.binary()),
            "value": pa.array([c[1] for c in changes], pa.binary()),
            "op": [c[0] for c in changes],
            "commit_ts": pa.array([c[4] for c in changes], pa.int64()),
            "old_value": pa.array([c[2] for c in changes], pa.binary()),
            "first_old_value": pa.array([c[3] for c in changes], pa.binary()),
        }
    )


def test_a_put_carries_its_key_from_the_value_and_the_window_start_key_from_the_first_old_value():
    out, _ = decode_changes_batch(
        CI, batch(("PUT", row(CI, "ABC", 2), row(CI, "Abc", 1), row(CI, "abc", 0), 9))
    )
    assert out.to_pylist() == [
        {"k": "ABC", "v": 2, "_tidb_commit_ts": 9, OP: "PUT", BEFORE_PREFIX + "k": "abc"}
    ]


def test_a_delete_names_its_row_from_its_old_value_else_the_first_old_value():
    out, _ = decode_changes_batch(
        CI,
        batch(
            ("DELETE", b"", row(CI, "ABC", 2), row(CI, "abc", 0), 9),
            ("DELETE", b"", None, row(CI, "aBc", 0), 10),
            ("PUT", row(CI, "abC", 3), b"", None, 11),  # an insert: no row before it
        ),
    )
    got = [(r[OP], r["k"], r["v"], r[BEFORE_PREFIX + "k"]) for r in out.to_pylist()]
    assert got == [("PUT", "abC", 3, None), ("DELETE", "ABC", None, "abc"), ("DELETE", "aBc", None, "aBc")]


def test_a_delete_of_a_sort_key_without_old_values_is_an_error_naming_key_and_ts():
    with pytest.raises(CodecError) as err:
        decode_changes_batch(CI, batch(("DELETE", b"", None, b"", 42)))
    assert f"DELETE of key {KEY.hex()} at commit_ts 42" in str(err.value)
    assert "utf8mb4_general_ci sort keys of 'k'" in str(err.value)


def test_a_binary_collation_delete_without_old_values_takes_its_key_from_the_record_key():
    """utf8mb4_bin VARCHAR keys need the row too (PAD SPACE), but the key still gives the value back."""
    bin_schema = _schema("utf8mb4_bin")
    key = record_key(TABLE, [(bin_schema.by_id[1], "abc")])
    rows = batch(("DELETE", b"", None, None, 42)).set_column(0, "key", pa.array([key], pa.binary()))
    out, _ = decode_changes_batch(bin_schema, rows)
    assert [(r[OP], r["k"]) for r in out.to_pylist()] == [("DELETE", "abc")]
