"""Conformance: byte-exact vectors published by TiKV/TiDB and the worked examples of the reference.

Each test names its source. ``reference`` = shared/reference/tidb-kv-formats.md.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from backfill.codec import (
    CodecError,
    TableSchema,
    classify_key,
    decode_record_key,
    decode_row,
    encode_row,
    from_comparable_key,
    jsonbin,
    mydecimal,
    numbers,
    record_key,
    table_span,
    to_comparable_key,
)
from backfill.codec.keys import decode_bytes, encode_bytes
from backfill.codec.mytime import PackedTime, duration_from_python
from backfill.codec.tableinfo import column_info, table_info

pytestmark = pytest.mark.unit


def _schema(cols, pk=None, table_id=45) -> TableSchema:
    return TableSchema.from_table_info(table_info(table_id, "t", cols, pk=pk))


# ---------------------------------------------------------------- TiKV encoder_for_test.rs

# tikv components/tidb_query_datatype/src/codec/row/v2/encoder_for_test.rs :: test_encode
TIKV_TEST_ENCODE = bytes(
    [
        128,
        0,
        11,
        0,
        1,
        0,
        1,
        3,
        6,
        7,
        8,
        9,
        12,
        13,
        14,
        15,
        16,
        33,
        2,
        0,
        3,
        0,
        11,
        0,
        14,
        0,
        16,
        0,
        24,
        0,
        25,
        0,
        33,
        0,
        36,
        0,
        65,
        0,
        69,
        0,
        232,
        3,
        3,
        64,
        3,
        51,
        51,
        51,
        51,
        51,
        50,
        97,
        98,
        99,
        255,
        127,
        191,
        252,
        204,
        204,
        204,
        204,
        204,
        205,
        2,
        0,
        0,
        0,
        135,
        51,
        230,
        158,
        25,
        1,
        0,
        129,
        1,
        1,
        0,
        0,
        0,
        28,
        0,
        0,
        0,
        19,
        0,
        0,
        0,
        3,
        0,
        12,
        22,
        0,
        0,
        0,
        107,
        101,
        121,
        5,
        118,
        97,
        108,
        117,
        101,
        0,
        202,
        154,
        59,
    ]
)


def _tikv_test_encode_schema() -> TableSchema:
    # Column 33 is NULL in the vector; TiDB only writes a NULL when the column has a default, so give it one.
    return _schema(
        [
            column_info(1, "c1", "bigint"),
            column_info(12, "c12", "bigint"),
            column_info(33, "c33", "bigint", default="0"),
            column_info(3, "c3", "bigint unsigned"),
            column_info(8, "c8", "bigint"),
            column_info(7, "c7", "varbinary(10)"),
            column_info(9, "c9", "double"),
            column_info(6, "c6", "double"),
            column_info(13, "c13", "datetime"),
            column_info(14, "c14", "decimal(1,0)"),
            column_info(15, "c15", "json"),
            column_info(16, "c16", "time"),
        ]
    )


def test_tikv_test_encode_bytes_and_values():
    """tikv encoder_for_test.rs::test_encode: 12 columns, every v2 value type."""
    schema = _tikv_test_encode_schema()
    values = {
        1: 1000,
        12: 2,
        33: None,
        3: 3,
        8: 32767,
        7: b"abc",
        9: 1.8,
        6: -1.8,
        13: dt.datetime(2018, 1, 19, 3, 14, 7),
        14: Decimal(1),
        15: '{"key":"value"}',
        16: dt.timedelta(seconds=1),
    }
    assert encode_row(schema, values) == TIKV_TEST_ENCODE
    row = decode_row(schema, 1, TIKV_TEST_ENCODE)
    assert row == {
        "_tidb_rowid": 1,
        "c1": 1000,
        "c12": 2,
        "c33": None,
        "c3": Decimal(3),
        "c8": 32767,
        "c7": b"abc",
        "c9": 1.8,
        "c6": -1.8,
        "c13": dt.datetime(2018, 1, 19, 3, 14, 7),
        "c14": Decimal(1),
        "c15": '{"key": "value"}',
        "c16": "00:00:01",
    }


def test_tikv_test_encode_unsigned():
    """tikv encoder_for_test.rs::test_encode_unsigned: u64::MAX as 8 bytes, -1 as one byte."""
    exp = bytes([128, 0, 2, 0, 0, 0, 1, 2, 8, 0, 9, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255])
    schema = _schema([column_info(1, "a", "bigint unsigned"), column_info(2, "b", "bigint")])
    assert encode_row(schema, {1: (1 << 64) - 1, 2: -1}) == exp
    assert encode_row(schema, {1: Decimal((1 << 64) - 1), 2: -1}) == exp
    assert decode_row(schema, 5, exp) == {"_tidb_rowid": 5, "a": Decimal(18446744073709551615), "b": -1}


def test_tikv_test_encode_big():
    """tikv encoder_for_test.rs::test_encode_big: column id 335 switches to u32 ids and offsets."""
    exp = bytes(
        [
            128,
            1,
            4,
            0,
            1,
            0,
            1,
            0,
            0,
            0,
            3,
            0,
            0,
            0,
            8,
            0,
            0,
            0,
            12,
            0,
            0,
            0,
            79,
            1,
            0,
            0,
            2,
            0,
            0,
            0,
            3,
            0,
            0,
            0,
            5,
            0,
            0,
            0,
            6,
            0,
            0,
            0,
            232,
            3,
            3,
            255,
            127,
            2,
        ]
    )
    schema = _schema(
        [
            column_info(1, "a", "bigint"),
            column_info(12, "b", "bigint"),
            column_info(335, "c", "bigint", default="7"),
            column_info(3, "d", "bigint"),
            column_info(8, "e", "bigint"),
        ]
    )
    assert encode_row(schema, {1: 1000, 12: 2, 335: None, 3: 3, 8: 32767}) == exp
    assert decode_row(schema, 9, exp) == {"_tidb_rowid": 9, "a": 1000, "b": 2, "c": None, "d": 3, "e": 32767}


# ---------------------------------------------------------------- TiDB rowcodec_test.go


def test_tidb_types_new_row_codec_small_large_col_id_and_large_data():
    """tidb pkg/util/rowcodec/rowcodec_test.go::TestTypesNewRowCodec (small, largeColID, largeData):
    packed timestamp 1840446893366133311, duration 4h = 14400000000000 ns, decimal 11.9900 (6,4),
    year 1999, enum 'n' = 2, set 'n1' = 1, BIT(24) 3223600, float 6, empty varstring."""

    def cols(first_id):
        return [
            column_info(first_id, "i", "bigint"),
            column_info(22, "us", "smallint unsigned"),
            column_info(3, "d", "double"),
            column_info(24, "blob", "text"),
            column_info(25, "s", "binary(2)"),
            column_info(5, "ts", "timestamp(6)"),
            column_info(16, "dur", "time"),
            column_info(8, "dec", "decimal(6,4)"),
            column_info(12, "y", "year"),
            column_info(9, "e", "enum('y','n')"),
            column_info(14, "j", "json"),
            column_info(116, "f", "float"),
            column_info(117, "st", "set('n1','n2')"),
            column_info(118, "bit", "bit(24)"),
            column_info(119, "vs", "varchar(10)"),
        ]

    values = {
        22: 1,
        3: 2.0,
        24: "abc",
        25: b"ab",
        5: dt.datetime(2011, 11, 10, 11, 11, 11, 999999, tzinfo=dt.UTC),
        16: "4:00:00",
        8: Decimal("11.9900"),
        12: 1999,
        9: "n",
        14: '{"a":2}',
        116: 6.0,
        117: "n1",
        118: (3223600).to_bytes(3, "big"),
        119: "",
    }
    expected = {
        "us": 1,
        "d": 2.0,
        "blob": "abc",
        "s": b"ab",
        "ts": dt.datetime(2011, 11, 10, 11, 11, 11, 999999, tzinfo=dt.UTC),
        "dur": "04:00:00",
        "dec": Decimal("11.9900"),
        "y": 1999,
        "e": "n",
        "j": '{"a": 2}',
        "f": 6.0,
        "st": "n1",
        "bit": b"\x31\x30\x30",
        "vs": "",
    }
    for first_id, blob in ((1, "abc"), (300, "abc"), (1, "a" * 65536)):
        schema = _schema(cols(first_id))
        vals = {first_id: 1, **values, 24: blob}
        raw = encode_row(schema, vals)
        assert raw[1] == (1 if first_id > 255 or len(blob) > 65535 else 0)  # LARGE flag
        assert decode_row(schema, 1, raw) == {"_tidb_rowid": 1, "i": 1, **expected, "blob": blob}
    assert PackedTime(2011, 11, 10, 11, 11, 11, 999999).pack() == 1840446893366133311
    assert duration_from_python("4:00:00", 0) == 14400000000000


def test_tidb_decode_decimal_fsp_not_match():
    """tidb rowcodec_test.go::TestDecodeDecimalFspNotMatch: 11.9900 stored (6,4), column scale 3 -> 11.990."""
    stored = _schema([column_info(1, "d", "decimal(6,4)")])
    raw = encode_row(stored, {1: Decimal("11.9900")})
    narrower = _schema([column_info(1, "d", "decimal(6,3)")])
    assert str(decode_row(narrower, 1, raw)["d"]) == "11.990"


def test_tidb_codec_util_v1_example():
    """reference §3.6 (input of tidb rowcodec_test.go::TestCodecUtil): v1 cols 1..4 = 1, 2, 3, NULL."""
    raw = bytes.fromhex("0802080208040804080608060808" + "00")
    schema = _schema([column_info(i, f"c{i}", "bigint", default="0") for i in (1, 2, 3, 4)])
    assert encode_row(schema, {1: 1, 2: 2, 3: 3, 4: None}, version=1) == raw
    assert decode_row(schema, 1, raw) == {"_tidb_rowid": 1, "c1": 1, "c2": 2, "c3": 3, "c4": None}


# ---------------------------------------------------------------- reference §2 keys


@pytest.mark.parametrize(
    ("v", "hexed"),
    [
        (1, "8000000000000001"),
        (-1, "7fffffffffffffff"),
        (numbers.INT64_MIN, "0000000000000000"),
        (numbers.INT64_MAX, "ffffffffffffffff"),
    ],
)
def test_reference_cmp_int(v, hexed):
    """reference §2.1 EncodeInt examples."""
    assert numbers.encode_cmp_int(v).hex() == hexed
    assert numbers.decode_cmp_int(bytes.fromhex(hexed)) == (v, 8)


@pytest.mark.parametrize(
    ("raw", "hexed"),
    [
        (b"", "0000000000000000f7"),
        (bytes.fromhex("010203"), "0102030000000000fa"),
        (bytes.fromhex("0102030405060708"), "0102030405060708ff0000000000000000f7"),
    ],
)
def test_reference_encode_bytes(raw, hexed):
    """reference §2.1 EncodeBytes examples (tidb pkg/util/codec/bytes_test.go shape)."""
    assert encode_bytes(raw).hex() == hexed
    assert decode_bytes(bytes.fromhex(hexed)) == (raw, len(hexed) // 2)


@pytest.mark.parametrize(
    ("f", "hexed"), [(1.5, "bff8000000000000"), (-1.5, "4007ffffffffffff"), (0.0, "8000000000000000")]
)
def test_reference_encode_float(f, hexed):
    """reference §2.1 EncodeFloat examples."""
    assert numbers.encode_cmp_float(f).hex() == hexed
    assert numbers.decode_cmp_float(bytes.fromhex(hexed))[0] == f


def test_reference_record_keys():
    """reference §2.2 record keys, incl. tiflow cdc/entry/codec_test.go (table 104, row 1)."""
    assert record_key(45, 1).hex() == "74800000000000002d5f728000000000000001"
    assert record_key(45, -1).hex() == "74800000000000002d5f727fffffffffffffff"
    assert decode_record_key(bytes.fromhex("7480000000000000685f728000000000000001")) == (104, 1)
    assert [k.hex() for k in table_span(45)] == ["74800000000000002d5f72", "74800000000000002d5f73"]
    # BIGINT UNSIGNED PK: the handle is the int64 bit pattern.
    assert record_key(45, (1 << 64) - 1) == record_key(45, -1)


def test_reference_common_handle_key():
    """reference §2.3 common-handle example: PK(varbinary 'abc', int 7)."""
    schema = _schema([column_info(1, "a", "varbinary(10)"), column_info(2, "b", "int")], pk=["a", "b"])
    a, b = schema.columns
    key = record_key(45, [(a, b"abc"), (b, 7)])
    assert key.hex() == "74800000000000002d5f72" + "016162630000000000fa" + "038000000000000007"
    assert decode_record_key(key) == (45, (b"abc", 7))


def test_reference_index_and_meta_keys_are_not_rows():
    """reference §2.4 index keys and §2.6 meta keys are recognised, never decoded as rows."""
    unique_idx = bytes.fromhex("74800000000000002d5f69800000000000000103800000000000000a")
    meta = bytes.fromhex("6d4442730000000000fa000000000000006844423a3200000000fb")
    assert classify_key(unique_idx) == "index"
    assert classify_key(meta) == "meta"
    assert classify_key(record_key(45, 1)) == "record"
    assert classify_key(b"zzz") == "other"
    for key in (unique_idx, meta):
        with pytest.raises(CodecError):
            decode_record_key(key)


def test_reference_comparable_keys():
    """reference §2.5 TiKV/PD-encoded keys."""
    assert (
        to_comparable_key(record_key(45, 1)).hex() == "7480000000000000ff2d5f728000000000ff0000010000000000fa"
    )
    start, end = table_span(45)
    assert to_comparable_key(start).hex() == "7480000000000000ff2d5f720000000000fa"
    assert to_comparable_key(end).hex() == "7480000000000000ff2d5f730000000000fa"
    assert from_comparable_key(bytes.fromhex("7480000000000000ff2d5f720000000000fa")) == start
    assert to_comparable_key(b"") == b"" and from_comparable_key(b"") == b""


# ---------------------------------------------------------------- reference §3.3 / §3.4


@pytest.mark.parametrize(
    ("t", "packed"),
    [
        (PackedTime(2011, 11, 10, 11, 11, 11, 999999), 1840446893366133311),
        (PackedTime(2018, 1, 19, 3, 14, 7), 0x199EE63387000000),
        (PackedTime(2024, 1, 2, 3, 4, 5), 1851617374130667520),
        (PackedTime(), 0),
    ],
)
def test_reference_packed_time(t, packed):
    """reference §3.3 packed time (tidb rowcodec_test.go value, TiKV vector value)."""
    assert t.pack() == packed
    assert PackedTime.unpack(packed) == t


# tikv codec/mysql/decimal.rs::test_codec, the Ok and Overflow cases (value, prec, frac, expected text)
TIKV_DECIMAL_CODEC = [
    ("-10.55", 4, 2, "-10.55"),
    ("0.0123456789012345678912345", 30, 25, "0.0123456789012345678912345"),
    ("12345", 5, 0, "12345"),
    ("12345", 10, 3, "12345.000"),
    ("123.45", 10, 3, "123.450"),
    ("-123.45", 20, 10, "-123.4500000000"),
    (".00012345000098765", 22, 20, "0.00012345000098765000"),
    (".12345000098765", 30, 20, "0.12345000098765000000"),
    ("1234500009876.5", 30, 5, "1234500009876.50000"),
    ("111111111.11", 10, 2, None),
    ("000000000.01", 7, 3, "0.010"),
    ("123.4", 10, 2, "123.40"),
    ("1000", 3, 0, None),
    ("10000000000000000000.23", 23, 2, "10000000000000000000.23"),
]


@pytest.mark.parametrize(("value", "prec", "frac", "expected"), TIKV_DECIMAL_CODEC)
def test_tikv_decimal_codec(value, prec, frac, expected):
    """tikv codec/mysql/decimal.rs::test_codec (overflow -> CodecError, never a wrong value)."""
    if expected is None:
        with pytest.raises(CodecError):
            mydecimal.encode_decimal_bin(Decimal(value), prec, frac)
        return
    raw = mydecimal.encode_decimal_bin(Decimal(value), prec, frac)
    assert len(raw) == mydecimal.decimal_bin_size(prec, frac)
    d, end = mydecimal.decode_decimal_bin(raw, 0, prec, frac)
    assert (str(d), end) == (expected, len(raw))


@pytest.mark.parametrize(
    ("value", "prec", "frac", "hexed"),
    [
        ("12.34", 5, 2, "800c22"),
        ("-12.34", 5, 2, "7ff3dd"),
        ("-10.55", 4, 2, "75c8"),
        ("12345", 10, 3, "800030390000"),
        ("1234567890.1", 12, 1, "810dfb38d201"),
        ("1", 1, 0, "81"),
    ],
)
def test_reference_decimal_bin(value, prec, frac, hexed):
    """reference §3.4 decimal-bin examples."""
    assert mydecimal.encode_decimal_bin(Decimal(value), prec, frac).hex() == hexed
    assert mydecimal.decode_decimal_bin(bytes.fromhex(hexed), 0, prec, frac)[0] == Decimal(value)


def test_reference_json_binary():
    """reference §3.4: {"a":2} -> 01 + object bytes."""
    code, raw = jsonbin.from_text('{"a":2}')
    assert bytes([code]) + raw == bytes.fromhex("01010000001c0000001300000001000914000000610200000000000000")
    assert jsonbin.to_text(code, raw) == '{"a": 2}'


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, "2", {"aa": "bb"}, 4, null], "b": true, "c": null}',
        '{"aaaaaaaaaaa": [1, "2", {"aa": "bb"}, 4.1], "bbbbbbbbbb": true, "ccccccccc": "d"}',
        '[{"a": 1, "b": true}, 3, 3.5, "hello, world", null, true]',
        '{"a": "&<>"}',
    ],
)
def test_tidb_json_marshal_unmarshal(text):
    """tidb pkg/types/json_binary_test.go::TestBinaryJSONMarshalUnmarshal: parse then print is identity."""
    assert jsonbin.to_text(*jsonbin.from_text(text)) == text


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ('{"b":1,"a":2}', '{"a": 2, "b": 1}'),
        ("3.0", "3.0"),
        ("1e2", "100.0"),
        ("-0.0", "-0.0"),
        ("1e15", "1e15"),
        ("1.5e-16", "1.5e-16"),
        ("123456789012345.6", "123456789012345.6"),
        ("18446744073709551615", "18446744073709551615"),
        ("18446744073709551616", "1.8446744073709552e19"),
        ('"\\\\ \\" \\b \\f \\n \\r \\t"', '"\\\\ \\" \\b \\f \\n \\r \\t"'),
        ('"\\u2028\\u0001"', '"\\u2028\\u0001"'),
        ('"你"', '"你"'),
        ('{"bb": 1, "a": 2, "ab": 3}', '{"a": 2, "ab": 3, "bb": 1}'),
    ],
)
def test_json_canonical_text(text, canonical):
    """TiDB json_binary.go marshal rules (tidb json_binary_test.go::TestQuoteString escapes; float form)."""
    assert jsonbin.to_text(*jsonbin.from_text(text)) == canonical


# ---------------------------------------------------------------- reference §3.7

REF_V2 = bytes.fromhex("8000040001000203040506050006000b001300416c6963651e0502800c22000000053144b219")
REF_V1 = bytes.fromhex("0804020a416c6963650806083c0808060502800c22080a09808080a8908691d919080c00")


def _reference_table() -> TableSchema:
    return _schema(
        [
            column_info(1, "id", "bigint", primary_key=True),
            column_info(2, "name", "varchar(20)"),
            column_info(3, "age", "int"),
            column_info(4, "score", "decimal(5,2)"),
            column_info(5, "created", "datetime"),
            column_info(6, "note", "varchar(10)", default="x", origin_default="x"),
        ],
        pk="int",
    )


@pytest.mark.parametrize(("version", "raw"), [(2, REF_V2), (1, REF_V1)])
def test_reference_worked_example(version, raw):
    """reference §3.7 worked example, v2 and v1: exact bytes both ways."""
    schema = _reference_table()
    values = {2: "Alice", 3: 30, 4: Decimal("12.34"), 5: dt.datetime(2024, 1, 2, 3, 4, 5), 6: None}
    assert encode_row(schema, values, version=version) == raw
    assert decode_row(schema, record_key(45, 1), raw) == {
        "id": 1,
        "name": "Alice",
        "age": 30,
        "score": Decimal("12.34"),
        "created": dt.datetime(2024, 1, 2, 3, 4, 5),
        "note": None,
    }
