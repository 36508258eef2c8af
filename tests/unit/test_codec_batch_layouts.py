"""decode_batch over batches whose rows all have different layouts (the realistic case): many columns,
random NULL/absent patterns, both id widths, v1 and checksummed v2 rows, ids the reader schema dropped,
columns it added. The per-row decoder stays the reference, also for corrupted rows (same error) and for
decode_keys (the primary key of each record key)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
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
    decode_keys,
    decode_row,
    encode_row,
    record_key,
)
from backfill.codec.arrow import _key_row, decode_batch_rowwise
from backfill.codec.keys import encode_key_datum
from backfill.codec.mydecimal import encode_decimal_bin
from backfill.codec.numbers import encode_varint
from backfill.codec.schema import ColumnKind
from backfill.codec.tableinfo import column_info, table_info
from tests.unit.test_codec_strategies import RandomTable, random_rows, random_tables

pytestmark = pytest.mark.unit

SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

# Columns the reader has but writers never wrote (ADD COLUMN): every fill rule once.
ADDED = [
    column_info(901, "add_int", "int", origin_default="7"),
    column_info(902, "add_zero_date", "date", origin_default="0000-00-00"),
    column_info(903, "add_not_null", "varchar(5)", not_null=True),
    column_info(904, "add_enum", "enum('x','y')", not_null=True),
    column_info(905, "add_null", "double"),
    column_info(906, "add_ts", "timestamp(3)", origin_default="2020-02-02 10:00:00.5"),
]
PK_COLUMNS = {
    "int": [column_info(1000, "pk", "bigint", primary_key=True)],
    "common": [column_info(1000, "pk", "bigint"), column_info(1001, "pk2", "varbinary(8)")],
    "common_text": [
        column_info(1000, "pk", "int unsigned"),
        column_info(1001, "pk2", "char(6)"),
        column_info(1002, "pk3", "date"),
    ],
}


def _batch(keys: list[bytes], values: list[bytes], large: bool = False) -> pa.RecordBatch:
    typ = pa.large_binary() if large else pa.binary()
    return pa.RecordBatch.from_arrays([pa.array(keys, typ), pa.array(values, typ)], names=["key", "value"])


def _assert_same(schema: TableSchema, batch: pa.RecordBatch) -> DecodeStats:
    fast_stats, ref_stats = DecodeStats(), DecodeStats()
    fast = decode_batch(schema, batch, stats=fast_stats)
    ref = decode_batch_rowwise(schema, batch, stats=ref_stats)
    assert fast.schema.remove_metadata() == schema.arrow_schema
    assert fast.to_pylist() == ref.to_pylist()
    assert (fast_stats.rows, fast_stats.zero_dates, fast_stats.filled) == (
        ref_stats.rows,
        ref_stats.zero_dates,
        ref_stats.filled,
    )
    assert fast.schema.metadata[ZERO_DATES_METADATA_KEY] == str(ref_stats.zero_dates).encode()
    return fast_stats


def _with_checksum(value: bytes, extra: bool) -> bytes:
    """A v2 row with the HAS_CHECKSUM flag and its trailer (reference §3.1)."""
    return (
        value[:1]
        + bytes([value[1] | 0x02])
        + value[2:]
        + (bytes([0x09]) + bytes(8) if extra else bytes([0x01]) + b"\xaa\xbb\xcc\xdd")
    )


def _pk_values(pk: str, i: int) -> dict[int, object]:
    if pk == "int":
        return {1000: i * 7919 - 50}
    if pk == "common":
        return {1000: i * 7 - 3, 1001: bytes([i % 256]) * (i % 11)}
    if pk == "common_text":
        return {
            1000: 2**32 - 1 - i,
            1001: "ab"[: i % 3] + "é" * (i % 2),
            1002: ZERO_TIME if i % 5 == 0 else dt.date(2000, 1, 1) + dt.timedelta(days=i),
        }
    return {}


def _key(schema: TableSchema, pk: str, i: int, values: dict[int, object]) -> bytes:
    if pk in ("rowid", "int"):
        return record_key(schema.table_id, values.get(1000, i * 13 - 4))
    by_id = schema.by_id
    return record_key(
        schema.table_id, [(col, values[col.id]) for col, _ in schema.common_handle if col.id in by_id]
    )


@dataclass
class Layout:
    table: RandomTable
    writer: TableSchema
    reader: TableSchema
    pk: str
    ids: dict[int, int]  # the random table's column ids -> the writer's (small ids: 1-byte v2 ids)

    def row(self, data: st.DataObject) -> dict[int, object]:
        """A random row with its own NULL/absent pattern, by writer column id."""
        values, _ = data.draw(random_rows(self.table))
        return {self.ids[cid]: v for cid, v in values.items()}


@st.composite
def layouts(draw) -> Layout:
    """Writer and reader schemas of one table: the reader drops some writer columns and adds ADDED. Column
    ids are either the random ones (up to 600: mostly 4-byte v2 ids) or renumbered 1.. (1-byte ids)."""
    table = draw(random_tables(min_cols=6, max_cols=24))
    pk = draw(st.sampled_from(["rowid", "int", "common", "common_text"]))
    original = [c["id"] for c in table.schema.table_info["cols"]]
    ids = {cid: i + 1 for i, cid in enumerate(original)} if draw(st.booleans()) else {c: c for c in original}
    cols = [dict(c, id=ids[c["id"]]) for c in table.schema.table_info["cols"]]
    pk_cols = PK_COLUMNS.get(pk, [])
    pk_arg = {"rowid": None, "int": "int", "common": ["pk2", "pk"], "common_text": ["pk2", "pk", "pk3"]}[pk]
    writer = TableSchema.from_table_info(
        table_info(table.schema.table_id, "rand", [*pk_cols, *cols], pk=pk_arg)
    )
    dropped = draw(st.sets(st.sampled_from([c["id"] for c in cols]), max_size=len(cols) - 1))
    kept = [c for c in cols if c["id"] not in dropped]
    reader = TableSchema.from_table_info(
        table_info(table.schema.table_id, "rand", [*pk_cols, *kept, *ADDED], pk=pk_arg)
    )
    return Layout(table, writer, reader, pk, ids)


@SETTINGS
@given(data=st.data(), layout=layouts(), large=st.booleans())
def test_many_columns_any_layout_equals_decode_row(data, layout, large):
    writer, reader, pk = layout.writer, layout.reader, layout.pk
    n = data.draw(st.integers(1, 30))
    keys, values = [], []
    expect_fallback = 0
    for i in range(n):
        vals = {**layout.row(data), **_pk_values(pk, i)}  # every row its own NULL/absent pattern
        version = data.draw(st.sampled_from([1, 2, 2, 2]))
        value = encode_row(writer, vals, version=version)
        if version == 2 and data.draw(st.integers(0, 5)) == 0:
            value = _with_checksum(value, extra=data.draw(st.booleans()))
        if version == 1 and any(
            writer.by_id[cid].kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR)
            and v is not None
            and cid not in reader.by_id
            for cid, v in vals.items()
        ):
            expect_fallback += 1  # a dropped column's v1 DECIMAL datum: left to the per-row decoder
        keys.append(_key(writer, pk, i, vals))
        values.append(value)
    batch = _batch(keys, values, large)
    stats = _assert_same(reader, batch)
    assert stats.fallback_rows == expect_fallback
    # a slice of the batch (Arrow offset) decodes the same
    if n > 2:
        _assert_same(reader, batch.slice(1, n - 2))


@SETTINGS
@given(data=st.data(), layout=layouts())
def test_corrupted_row_fails_like_the_per_row_path(data, layout):
    """Mutate one row's bytes: decode_batch either equals the per-row result or raises its very error."""
    writer, reader, pk = layout.writer, layout.reader, layout.pk
    n = data.draw(st.integers(1, 6))
    keys, values = [], []
    for i in range(n):
        vals = {**layout.row(data), **_pk_values(pk, i)}
        keys.append(_key(writer, pk, i, vals))
        values.append(encode_row(writer, vals, version=data.draw(st.sampled_from([1, 2]))))
    victim = data.draw(st.integers(0, n - 1))
    raw = bytearray(values[victim])
    how = data.draw(st.sampled_from(["flip", "truncate", "insert", "key"]))
    if how == "flip" and raw:
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    elif how == "truncate":
        del raw[data.draw(st.integers(0, max(len(raw) - 1, 0))) :]
    elif how == "insert":
        raw.insert(data.draw(st.integers(0, len(raw))), data.draw(st.integers(0, 255)))
    else:
        key = bytearray(keys[victim])
        key[data.draw(st.integers(0, len(key) - 1))] = data.draw(st.integers(0, 255))
        keys[victim] = bytes(key)
    values[victim] = bytes(raw)
    batch = _batch(keys, values)
    try:
        ref = decode_batch_rowwise(reader, batch)
    except CodecError as e:
        with pytest.raises(CodecError) as info:
            decode_batch(reader, batch)
        got = info.value
        assert (got.reason, got.table_id, got.handle, got.offset, got.column) == (
            e.reason,
            e.table_id,
            e.handle,
            e.offset,
            e.column,
        )
        return
    assert _nan_safe(decode_batch(reader, batch).to_pylist()) == _nan_safe(ref.to_pylist())


def _nan_safe(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """NaN (a flipped float byte can make one) compared as a marker."""
    return [{k: "NaN" if isinstance(v, float) and v != v else v for k, v in row.items()} for row in rows]


def test_thousands_of_distinct_layouts_take_the_fast_path():
    """Every row with its own NULL/absent pattern over 40 columns of many kinds, ids past 255 included."""
    kinds = [
        "bigint",
        "int unsigned",
        "double",
        "float",
        "decimal(12,2)",
        "decimal(30,4)",
        "decimal(50,10)",
        "varchar(20)",
        "varbinary(8)",
        "date",
        "datetime(3)",
        "timestamp(6)",
        "time(2)",
        "year",
        "enum('a','b','c')",
        "set('a','b','c')",
        "bit(10)",
        "json",
        "tinyint",
        "smallint unsigned",
    ]
    cols = [column_info(1, "id", "bigint", primary_key=True)]
    cols += [column_info(2 + i + (300 if i >= 20 else 0), f"c{i}", kinds[i % len(kinds)]) for i in range(40)]
    schema = TableSchema.from_table_info(table_info(42, "wide", cols, pk="int"))
    samples = {
        "bigint": lambda i: i * 1_000_003 - 7,
        "int unsigned": lambda i: i * 977,
        "double": lambda i: i / 7,
        "float": lambda i: i / 8,
        "decimal(12,2)": lambda i: Decimal(i) / 4 - 50,
        "decimal(30,4)": lambda i: Decimal(i * 10**20 + 3) / 10**4 * (-1) ** i,
        "decimal(50,10)": lambda i: Decimal(i * 10**35 + i) / 10**10 * (-1) ** i,
        "varchar(20)": lambda i: f"é{i}",
        "varbinary(8)": lambda i: bytes([i % 256]) * (i % 8),
        "date": lambda i: ZERO_TIME if i % 9 == 0 else dt.date(1990, 1, 1) + dt.timedelta(days=i),
        "datetime(3)": lambda i: dt.datetime(2001, 2, 3, 4, 5, 6, 7000) + dt.timedelta(seconds=i),
        "timestamp(6)": lambda i: dt.datetime(2001, 2, 3, tzinfo=dt.UTC) + dt.timedelta(microseconds=i),
        "time(2)": lambda i: dt.timedelta(hours=i % 839, seconds=-i),
        "year": lambda i: 1901 + i % 255,
        "enum('a','b','c')": lambda i: "abc"[i % 3],
        "set('a','b','c')": lambda i: ",".join("abc"[: i % 4]),
        "bit(10)": lambda i: i % 1024,
        "json": lambda i: {"k": i, "t": ["x"] * (i % 3)} if i % 4 else [i],
        "tinyint": lambda i: i % 256 - 128,
        "smallint unsigned": lambda i: i % 65536,
    }
    keys, values = [], []
    for r in range(3000):
        row: dict[int, object] = {}
        for i, col in enumerate(schema.columns[1:]):
            bits = (r * 2654435761 >> i) % 5  # value / NULL / absent, differently per row
            if bits < 3:
                row[col.id] = samples[kinds[i % len(kinds)]](r + i)
            elif bits == 3:
                row[col.id] = None
        keys.append(record_key(42, r))
        values.append(encode_row(schema, row, version=1 if r % 20 == 0 else 2))
    stats = _assert_same(schema, _batch(keys, values))
    assert stats.fallback_rows == 0


# ---------------------------------------------------------------- decode_keys


def _keys_reference(schema: TableSchema, keys: list[bytes]) -> list[dict[str, object]]:
    return [_key_row(schema, k) for k in keys]


@pytest.mark.parametrize("pk", ["rowid", "int", "common", "common_text"])
def test_decode_keys_equals_the_key_part_of_decode_row(pk):
    cols = [column_info(5, "v", "varchar(10)")]
    pk_arg = {"rowid": None, "int": "int", "common": ["pk2", "pk"], "common_text": ["pk2", "pk", "pk3"]}[pk]
    schema = TableSchema.from_table_info(table_info(77, "t", [*PK_COLUMNS.get(pk, []), *cols], pk=pk_arg))
    keys, values = [], []
    for i in range(50):
        vals = {5: f"v{i}", **_pk_values(pk, i)}
        keys.append(_key(schema, pk, i, vals))
        values.append(encode_row(schema, vals))
    out = decode_keys(schema, pa.array(keys, pa.binary()))
    assert out.schema == pa.schema([schema.arrow_schema.field(name) for name in schema.pk_columns])
    assert out.to_pylist() == _keys_reference(schema, keys)
    for got, key, value in zip(out.to_pylist(), keys, values, strict=True):
        row = decode_row(schema, key, value)
        assert got == {name: row[name] for name in schema.pk_columns}
    # chunked and large_binary input, and no keys at all
    chunked = pa.chunked_array(
        [pa.array(keys[:10], pa.large_binary()), pa.array(keys[10:], pa.large_binary())]
    )
    assert decode_keys(schema, chunked).to_pylist() == out.to_pylist()
    assert decode_keys(schema, pa.array([], pa.binary())).num_rows == 0


def test_decode_keys_unsigned_and_small_int_pk():
    for sql, handle, expect in (
        ("bigint unsigned", 2**64 - 1, Decimal(2**64 - 1)),
        ("int unsigned", 2**32 - 1, 2**32 - 1),
    ):
        schema = TableSchema.from_table_info(
            table_info(8, "u", [column_info(1, "id", sql, primary_key=True)], pk="int")
        )
        assert decode_keys(schema, pa.array([record_key(8, handle)])).to_pylist() == [{"id": expect}]
    schema = TableSchema.from_table_info(
        table_info(8, "s", [column_info(1, "id", "int", primary_key=True)], pk="int")
    )
    with pytest.raises(CodecError, match="out of range"):
        decode_keys(schema, pa.array([record_key(8, 1), record_key(8, 2**40)]))


def test_decode_keys_decimal_pk_goes_row_by_row():
    schema = TableSchema.from_table_info(
        table_info(9, "d", [column_info(1, "d", "decimal(12,2)"), column_info(2, "v", "int")], pk=["d"])
    )
    keys = [record_key(9, [(schema.by_id[1], Decimal(i) / 4)]) for i in range(5)]
    assert decode_keys(schema, pa.array(keys)).to_pylist() == [{"d": Decimal(i) / 4} for i in range(5)]


@pytest.mark.parametrize("pk", ["rowid", "int", "common"])
def test_decode_keys_bad_keys_raise(pk):
    pk_arg = {"rowid": None, "int": "int", "common": ["pk2", "pk"]}[pk]
    schema = TableSchema.from_table_info(
        table_info(77, "t", [*PK_COLUMNS.get(pk, []), column_info(5, "v", "int")], pk=pk_arg)
    )
    good = [_key(schema, pk, i, _pk_values(pk, i)) for i in range(3)]
    other_table = (
        record_key(78, 1)
        if pk != "common"
        else record_key(78, [(schema.by_id[1001], b"x"), (schema.by_id[1000], 1)])
    )
    with pytest.raises(CodecError) as info:
        decode_keys(schema, pa.array([*good, other_table]))
    assert info.value.table_id == 78
    with pytest.raises(CodecError):
        decode_keys(schema, pa.array([*good, good[0][:11] + b"\x01"]))  # a handle cut short
    with pytest.raises(CodecError):
        decode_keys(schema, pa.array([*good, b"t" + good[0][1:9] + b"_i" + bytes(9)]))  # an index key
    with pytest.raises(CodecError):
        decode_keys(schema, pa.array([good[0], None], pa.binary()))


def test_decode_keys_common_handle_with_odd_datums_falls_back():
    """Odd clustered keys (an extra datum) go the per-row way, with its result; a NULL datum is no part of
    a primary key: TiDB reads a zero flag as the start of the padding, so one before the last datum is an
    error naming the table."""
    schema = TableSchema.from_table_info(
        table_info(77, "t", [*PK_COLUMNS["common"], column_info(5, "v", "int")], pk=["pk2", "pk"])
    )
    base = record_key(77, [(schema.by_id[1001], b"ab"), (schema.by_id[1000], 5)])
    extra = base + encode_key_datum(schema.by_id[1000], 6)
    assert decode_keys(schema, pa.array([extra])).to_pylist() == _keys_reference(schema, [extra])
    assert decode_keys(schema, pa.array([base])).to_pylist() == [{"pk2": b"ab", "pk": 5}]
    null_datum = base[:11] + b"\x00" + base[11 + 10 :]  # first datum NULL instead of b"ab"
    with pytest.raises(CodecError, match="table 77"):
        decode_keys(schema, pa.array([base, null_datum]))


def test_batches_are_decoded_in_chunks_of_bounded_cells(monkeypatch):
    """Wide tables: decode_batch splits a batch so its cell matrices stay bounded; same rows, same stats."""
    from backfill.codec import arrow

    monkeypatch.setattr(arrow, "_CELL_BUDGET", 64)
    monkeypatch.setattr(arrow, "_MIN_CHUNK_ROWS", 5)
    schema = TableSchema.from_table_info(
        table_info(
            5,
            "t",
            [
                column_info(1, "id", "bigint", primary_key=True),
                column_info(2, "d", "date"),
                column_info(3, "s", "varchar(10)"),
                column_info(4, "late", "int", origin_default="3"),
            ],
            pk="int",
        )
    )
    keys = [record_key(5, i) for i in range(37)]
    values = [
        encode_row(
            schema,
            {2: ZERO_TIME if i % 3 else dt.date(2001, 1, i % 28 + 1), 3: f"s{i}"},
            version=1 if i % 7 == 0 else 2,
        )
        for i in range(37)
    ]
    # a dropped DECIMAL column's datum in a v1 row (28 % 7 == 0): left to the per-row decoder
    values[28] += (
        bytes([0x08]) + encode_varint(6) + bytes([0x06, 5, 2]) + encode_decimal_bin(Decimal("1.5"), 5, 2)
    )
    stats = _assert_same(schema, _batch(keys, values))
    assert stats.fallback_rows == 1
    values[33] = values[33][:-1]
    with pytest.raises(CodecError) as info:
        decode_batch(schema, _batch(keys, values))
    assert info.value.handle == 33


def test_v1_row_with_very_many_datums_goes_row_by_row():
    schema = TableSchema.from_table_info(
        table_info(6, "t", [column_info(1, "a", "int"), column_info(2, "b", "varchar(5)")])
    )
    row = encode_row(schema, {1: 5, 2: "x"}, version=1)
    for cid in range(100, 300):  # columns this schema does not know (dropped long ago)
        row += bytes([0x08]) + encode_varint(cid) + bytes([0x08]) + encode_varint(cid)
    keys = [record_key(6, 1), record_key(6, 2)]
    stats = _assert_same(schema, _batch(keys, [row, encode_row(schema, {1: 6}, version=1)]))
    assert stats.fallback_rows == 1


def test_a_column_whose_every_cell_is_bad_raises_the_per_row_error():
    schema = TableSchema.from_table_info(
        table_info(
            7, "j", [column_info(1, "id", "bigint", primary_key=True), column_info(2, "j", "json")], pk="int"
        )
    )
    keys = [record_key(7, i) for i in range(3)]
    # the JSON type code (first data byte, after the 9-byte header) made unknown
    values = [(v := encode_row(schema, {2: {"a": i}}))[:9] + b"\x02" + v[10:] for i in range(3)]
    with pytest.raises(CodecError) as ref:
        decode_batch_rowwise(schema, _batch(keys, values))
    with pytest.raises(CodecError) as got:
        decode_batch(schema, _batch(keys, values))
    assert str(got.value) == str(ref.value)
