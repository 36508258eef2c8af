"""decode_batch (vectorised) equals decode_row row by row, including absent columns, NULLs, zero dates,
v1 rows mixed in, int-PK and rowid tables, and bad rows (which must raise the per-row CodecError)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backfill.codec import (
    ZERO_DATES_METADATA_KEY,
    ZERO_TIME,
    CodecError,
    DecodeStats,
    TableSchema,
    decode_batch,
    decode_row,
    encode_row,
    record_key,
)
from backfill.codec.arrow import decode_batch_rowwise
from backfill.codec.mydecimal import encode_decimal_bin
from backfill.codec.numbers import encode_varint
from backfill.codec.tableinfo import column_info, table_info
from tests.unit.test_codec_strategies import random_rows, random_tables

pytestmark = pytest.mark.unit


def _batch(keys: list[bytes], values: list[bytes], large: bool = False) -> pa.RecordBatch:
    typ = pa.large_binary() if large else pa.binary()
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, typ), pa.array(values, typ), pa.array(range(len(keys)), pa.int64())],
        names=["key", "value", "seq"],
    )


def _assert_same(schema: TableSchema, batch: pa.RecordBatch) -> DecodeStats:
    fast_stats, ref_stats = DecodeStats(), DecodeStats()
    fast = decode_batch(schema, batch, stats=fast_stats)
    ref = decode_batch_rowwise(schema, batch, stats=ref_stats)
    assert fast.schema.remove_metadata() == schema.arrow_schema
    assert fast.to_pylist() == ref.to_pylist()
    # and row by row against decode_row itself
    for i, row in enumerate(fast.to_pylist()):
        assert row == decode_row(schema, batch.column("key")[i].as_py(), batch.column("value")[i].as_py())
    assert fast_stats.zero_dates == ref_stats.zero_dates
    assert fast.schema.metadata[ZERO_DATES_METADATA_KEY] == str(ref_stats.zero_dates).encode()
    assert fast_stats.filled == ref_stats.filled
    return fast_stats


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data(), pk=st.sampled_from(["rowid", "int", "common"]), large=st.booleans())
def test_decode_batch_equals_decode_row(data, pk, large):
    table = data.draw(random_tables(max_cols=6))
    schema = table.schema
    cols = list(schema.table_info["cols"])
    if pk == "int":
        info = table_info(
            schema.table_id, "rand", [column_info(1000, "pk", "bigint", primary_key=True), *cols], pk="int"
        )
        schema = TableSchema.from_table_info(info)
    elif pk == "common":
        pk_cols = [column_info(1000, "pk", "bigint"), column_info(1001, "pk2", "varbinary(8)")]
        schema = TableSchema.from_table_info(
            table_info(schema.table_id, "rand", [*pk_cols, *cols], pk=["pk2", "pk"])
        )
    n = data.draw(st.integers(1, 40))
    # Mostly one row shape (as in real tables), plus odd rows: other NULL patterns, absent columns, v1.
    shape = data.draw(random_rows(table, allow_absent=False))
    keys, values = [], []
    for i in range(n):
        vals, _ = shape if data.draw(st.integers(0, 3)) else data.draw(random_rows(table))
        handle = i * 7 - 3
        if pk == "int":
            vals = {**vals, 1000: handle}
            keys.append(record_key(schema.table_id, handle))
        elif pk == "common":
            pk_values = {1000: handle, 1001: bytes([i % 256]) * (i % 9)}
            vals = {**vals, **pk_values}
            by_id = schema.by_id
            keys.append(record_key(schema.table_id, [(by_id[1001], pk_values[1001]), (by_id[1000], handle)]))
        else:
            keys.append(record_key(schema.table_id, handle))
        version = 1 if data.draw(st.integers(0, 9)) == 0 else 2
        values.append(encode_row(schema, vals, version=version))
    stats = _assert_same(schema, _batch(keys, values, large))
    assert stats.fallback_rows == 0  # v1 rows too are decoded by the vectorised path


WIDE = TableSchema.from_table_info(
    table_info(
        70,
        "wide",
        [
            column_info(1, "id", "bigint", primary_key=True),
            column_info(2, "s", "varchar(20)"),
            column_info(3, "n", "int"),
            column_info(4, "d", "decimal(12,2)"),
            column_info(5, "t", "datetime(3)"),
            column_info(6, "f", "double"),
            column_info(7, "j", "json"),
            column_info(8, "e", "enum('x','y','z')"),
            column_info(9, "dt", "date", not_null=True),
            column_info(10, "ts", "timestamp(6)"),
            column_info(11, "u", "bigint unsigned"),
            column_info(12, "ti", "tinyint"),
            column_info(13, "added", "varchar(5)", origin_default="dflt"),
            column_info(14, "zd", "date", origin_default="0000-00-00"),
        ],
        pk="int",
    )
)


def _wide_row(i: int) -> dict[int, object]:
    return {
        2: f"name-{i}",
        3: i,
        4: Decimal(i) / 4,
        5: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i),
        6: i / 3,
        7: {"i": i, "tags": ["a", i]},
        8: "xyz"[i % 3],
        9: ZERO_TIME if i % 5 == 0 else dt.date(2020, 2, 29),
        10: dt.datetime(2001, 1, 1, tzinfo=dt.UTC),
        11: 2**64 - 1 - i,
        12: -(i % 128),
    }


def test_wide_table_fast_path():
    keys = [record_key(70, i) for i in range(200)]
    values = [encode_row(WIDE, _wide_row(i)) for i in range(200)]
    stats = _assert_same(WIDE, _batch(keys, values))
    assert stats.fallback_rows == 0
    assert stats.zero_dates == 40 + 200  # 40 stored zero dates; every row fills zd from a zero default
    assert stats.filled == 400


# A v1 datum the vectorised path leaves to the per-row decoder: a DECIMAL of a column the schema lacks.
_UNKNOWN_DECIMAL = (
    bytes([0x08]) + encode_varint(99) + bytes([0x06, 5, 2]) + encode_decimal_bin(Decimal("12.34"), 5, 2)
)


def test_fallback_rows_are_merged_in_order():
    keys = [record_key(70, i) for i in range(30)]
    values = [encode_row(WIDE, _wide_row(i), version=1 if i % 4 == 0 else 2) for i in range(30)]
    stats = _assert_same(WIDE, _batch(keys, values))
    assert stats.fallback_rows == 0  # v1 rows are vectorised too
    values = [v + _UNKNOWN_DECIMAL if i % 4 == 0 else v for i, v in enumerate(values)]
    stats = _assert_same(WIDE, _batch(keys, values))
    assert stats.fallback_rows == 8


def test_bad_row_in_a_batch_raises_codec_error_naming_it():
    keys = [record_key(70, i) for i in range(10)]
    values = [encode_row(WIDE, _wide_row(i)) for i in range(10)]
    values[6] = values[6][:-1]
    with pytest.raises(CodecError) as info:
        decode_batch(WIDE, _batch(keys, values))
    assert info.value.table_id == 70 and info.value.handle == 6
    # a key of another table
    keys[3] = record_key(71, 3)
    values[6] = encode_row(WIDE, _wide_row(6))
    with pytest.raises(CodecError) as info:
        decode_batch(WIDE, _batch(keys, values))
    assert info.value.table_id == 71


def test_empty_batch_and_sliced_batch():
    assert decode_batch(WIDE, _batch([], [])).num_rows == 0
    keys = [record_key(70, i) for i in range(20)]
    values = [encode_row(WIDE, _wide_row(i)) for i in range(20)]
    sliced = _batch(keys, values).slice(5, 10)
    out = decode_batch(WIDE, sliced)
    assert out.column("id").to_pylist() == list(range(5, 15))


def _float_table(kind: str) -> TableSchema:
    columns = [column_info(1, "id", "bigint", primary_key=True), column_info(2, "f", kind)]
    return TableSchema.from_table_info(table_info(72, "floats", columns, pk="int"))


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_float_cell_beyond_float_range_reads_as_infinity():
    """A FLOAT cell holds a double; one beyond FLOAT's range (foreign or corrupted) reads as TiDB's
    float32(f) does, infinite with its sign, on both paths and without numpy's overflow warning."""
    stored = [1e300, -1e300, 1.5, 3.5e38]
    keys = [record_key(72, i) for i in range(len(stored))]
    values = [encode_row(_float_table("double"), {2: f}) for f in stored]  # FLOAT is stored as a double
    decoded = _assert_same(_float_table("float"), _batch(keys, values))
    assert decoded.fallback_rows == 0
    rows = decode_batch(_float_table("float"), _batch(keys, values)).column("f").to_pylist()
    assert rows == [float("inf"), float("-inf"), 1.5, float("inf")]


def test_first_value_offset_past_two_gib_is_a_bad_row_not_a_huge_allocation():
    """A corrupted large-format v2 row whose first 4-byte end offset has its high bit set: as a 32-bit
    position it wraps negative, and only the offsets after it were checked for going backwards, so the
    batch path sized a gather by it (GiBs) instead of raising the per-row path's error (a hypothesis
    find)."""
    schema = TableSchema.from_table_info(
        table_info(
            73,
            "texts",
            [
                column_info(1, "id", "bigint", primary_key=True),
                column_info(2, "a", "varchar(20)"),
                column_info(3, "b", "varchar(20)"),
            ],
            pk="int",
        )
    )
    # version 128, flags 1 (large: 4-byte ids and offsets), 2 not-null ids, 0 NULL ids, ids 2 and 3,
    # end offsets 0xCB000001 and 7, then 7 bytes of data
    header = bytes([128, 1]) + (2).to_bytes(2, "little") + (0).to_bytes(2, "little")
    ids = (2).to_bytes(4, "little") + (3).to_bytes(4, "little")
    value = header + ids + (0xCB000001).to_bytes(4, "little") + (7).to_bytes(4, "little") + b"abcdefg"
    good = encode_row(schema, {2: "x", 3: "y"})
    batch = _batch([record_key(73, 1), record_key(73, 2)], [good, value])
    with pytest.raises(CodecError) as per_row:
        decode_batch_rowwise(schema, batch)
    with pytest.raises(CodecError) as batched:
        decode_batch(schema, batch)
    assert (batched.value.reason, batched.value.handle) == (per_row.value.reason, 2)
    assert "backwards" in per_row.value.reason
