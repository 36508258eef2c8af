"""Which tables kv-scan decodes in the match+collapse task, and what that task adds to its rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill.codec import TableSchema, encode_row, record_key
from backfill.codec.history import SchemaVersion
from backfill.codec.keys import table_prefix
from backfill.sources.kvscan import eager_decode
from backfill.sources.kvscan.eager_decode import EagerDecode, eager_segments, events_per_table
from backfill.sources.kvscan.format import Region, ScanManifest
from backfill.sources.kvscan.range_collapse import COLLAPSED_ARROW
from backfill.sources.kvscan.row_decode import decode_changes_batch, input_columns
from backfill.tables import TrackedTable
from tests.captures import users_table

pytestmark = pytest.mark.unit

USERS = TableSchema.from_table_info(users_table(100, "users"))
OTHER = TableSchema.from_table_info(users_table(200, "other"))


def tracked(*schemas: TableSchema | None) -> TrackedTable:
    return TrackedTable(tuple(SchemaVersion(10 * i, s) for i, s in enumerate(schemas)), 0)


def test_a_regions_events_count_for_every_table_its_span_overlaps() -> None:
    mid = record_key(100, 50)
    scan = ScanManifest("s1", "/x", 1, 2, (
        Region(1, b"", mid),  # the first half of table 100 and everything before it
        Region(2, mid, table_prefix(150)),  # the rest of table 100
        Region(3, table_prefix(150), b""),  # table 200 and beyond
    ))  # fmt: skip
    later = ScanManifest("s2", "/y", 2, 3, (Region(7, b"", b""),))
    counts = {("s1", 1): 10, ("s1", 2): 1000, ("s1", 3): 5, ("s2", 7): 3, ("s9", 1): 10_000}

    estimate = events_per_table([tracked(USERS), tracked(OTHER)], [scan, later], counts)

    assert estimate == {0: 10 + 1000 + 3, 1: 5 + 3}


def test_the_biggest_table_is_decoded_eagerly_with_every_schema_version_if_it_has_most_events(
    monkeypatch,
) -> None:
    tables = [tracked(USERS), tracked(None, OTHER, OTHER), tracked(USERS)]

    assert eager_segments(tables, {0: 10, 1: 250_000, 2: 100_000}, 400_000) == {(1, 1): OTHER, (1, 2): OTHER}
    assert eager_segments(tables, {0: 10, 1: 250_000, 2: 250_000}, 510_000) == {}, "not half the events"
    assert eager_segments(tables, {0: 99_999, 1: 5, 2: 0}, 100_004) == {}, "too few events"
    assert eager_segments(tables, {}, 0) == {}
    monkeypatch.setattr(eager_decode, "EAGER_DECODE_EVENTS", 0)
    assert eager_segments(tables, {0: 3, 1: 0, 2: 3}, 6) == {(0, 0): USERS}, "a tie goes to the first"


def _collapsed(rows: list[dict]) -> pa.Table:
    full = [{f.name: row.get(f.name) for f in COLLAPSED_ARROW} for row in rows]
    return pa.Table.from_pylist(full, schema=COLLAPSED_ARROW)


def test_a_segments_puts_get_their_decoded_columns_and_lose_their_bytes_other_rows_stay_raw() -> None:
    put = encode_row(USERS, {1: 7, 2: "ann", 3: 5})
    rows = _collapsed([
        {"table_idx": 0, "segment": 0, "op": "PUT", "commit_ts": 9, "key": record_key(100, 7), "value": put},
        {"table_idx": 0, "segment": 0, "op": "DELETE", "commit_ts": 9, "key": record_key(100, 8), "value": b""},
        {"table_idx": 1, "segment": 0, "op": "PUT", "commit_ts": 9, "key": record_key(200, 1), "value": put},
    ])  # fmt: skip
    eager = EagerDecode({(0, 0): USERS})

    out = eager.decode(rows)

    assert out.schema == eager.arrow_schema()
    by_key = {r["key"]: r for r in out.to_pylist()}
    decoded_put = by_key[record_key(100, 7)]
    expected, _ = decode_changes_batch(USERS, rows.slice(0, 1).select(input_columns(USERS)).to_batches()[0])
    assert [decoded_put[eager.column(0, 0, i)] for i in range(expected.num_columns)] == list(
        expected.to_pylist()[0].values()
    )
    assert decoded_put["value"] is None
    for raw in (record_key(100, 8), record_key(200, 1)):
        assert by_key[raw]["value"] is not None and by_key[raw][eager.column(0, 0, 0)] is None


def test_a_put_that_cannot_be_decoded_fails_the_task_naming_table_and_handle() -> None:
    from tidelake.sparkerrors import from_task

    value = encode_row(USERS, {1: 7, 2: "truncate me", 3: 5})[:-4]
    rows = _collapsed([
        {"table_idx": 0, "segment": 0, "op": "PUT", "commit_ts": 9, "key": record_key(100, 7), "value": value},
    ])  # fmt: skip

    with pytest.raises(RuntimeError) as failed:
        EagerDecode({(0, 0): USERS}).decode(rows)

    error = from_task(failed.value)
    assert error is not None and "cannot decode a row" in str(error) and "handle 7" in str(error), (
        failed.value
    )
