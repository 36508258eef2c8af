"""Which tables kv-scan decodes on the driver, and that the driver's decode is the executors' decode."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill.codec import TableSchema, encode_row, record_key
from backfill.sources.kvscan import small_tables
from backfill.sources.kvscan.row_decode import CHANGE_COLUMNS, decode_changes_batch
from backfill.sources.kvscan.small_tables import decode_on_driver
from tests.captures import users_table
from tidelake.errors import InputError

pytestmark = pytest.mark.unit


def test_small_tables_are_chosen_smallest_first_within_both_limits(monkeypatch) -> None:
    monkeypatch.setattr(small_tables, "DRIVER_DECODE_ROWS", 10)
    monkeypatch.setattr(small_tables, "DRIVER_DECODE_TOTAL", 12)
    counts = {
        (0, 0, "PUT"): 6, (0, 1, "DELETE"): 5,  # 11 over two segments: too many
        (1, 0, "PUT"): 4, (1, 0, "DELETE"): 3,  # 7
        (2, 0, "PUT"): 4,  # 4
        (3, 0, "PUT"): 2,  # 2
        (-1, 0, "PUT"): 1,  # bad rows are never a table
    }  # fmt: skip
    # 2 + 4 fit, 7 more would pass the total of 12
    assert small_tables.small_tables(counts) == [2, 3]
    monkeypatch.setattr(small_tables, "DRIVER_DECODE_TOTAL", 13)
    assert small_tables.small_tables(counts) == [1, 2, 3]


def _raw(rows: list[tuple[bytes, bytes, str, int]]) -> pa.Table:
    keys, values, ops, ts = zip(*rows, strict=True)
    return pa.table({
        "key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
        "op": pa.array(ops), "commit_ts": pa.array(ts, pa.int64()),
        "old_value": pa.nulls(len(rows), pa.binary()), "first_old_value": pa.nulls(len(rows), pa.binary()),
    })  # fmt: skip


def test_the_driver_decodes_as_the_executors_do_and_leaves_deletes_out_of_a_first_load() -> None:
    schema = TableSchema.from_table_info(users_table(100, "users"))
    raw = _raw([
        (record_key(100, 1), encode_row(schema, {1: 1, 2: "a", 3: 10}), "PUT", 11),
        (record_key(100, 2), b"", "DELETE", 12),
    ])  # fmt: skip

    decoded, zeros = decode_on_driver(raw, schema, puts_only=False)
    on_executors, _ = decode_changes_batch(schema, raw.select(list(CHANGE_COLUMNS)).to_batches()[0])

    assert decoded.to_pylist() == pa.Table.from_batches([on_executors]).to_pylist()
    assert [r["id"] for r in decoded.to_pylist()] == [1, 2] and zeros == 0
    first_load, _ = decode_on_driver(raw, schema, puts_only=True)
    assert first_load.column("_tidb_op").to_pylist() == ["PUT"]
    assert decode_on_driver(raw.slice(1), schema, puts_only=True)[0].num_rows == 0


def test_a_row_the_driver_cannot_decode_is_an_input_error_naming_table_and_handle() -> None:
    schema = TableSchema.from_table_info(users_table(100, "users"))
    value = encode_row(schema, {1: 7, 2: "truncate me", 3: 5})[:-4]
    with pytest.raises(InputError, match=r"cannot decode a row: .*users: .*handle 7"):
        decode_on_driver(_raw([(record_key(100, 7), value, "PUT", 9)]), schema, puts_only=False)
