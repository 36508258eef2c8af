"""Bad bytes never decode into a row: they raise CodecError naming table id, handle and byte offset."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backfill.codec import CodecError, TableSchema, decode_record_key, decode_row, encode_row, record_key
from backfill.codec.tableinfo import column_info, table_info

pytestmark = pytest.mark.unit

SCHEMA = TableSchema.from_table_info(
    table_info(
        45,
        "t",
        [
            column_info(1, "id", "bigint", primary_key=True),
            column_info(2, "name", "varchar(20)"),
            column_info(3, "age", "int"),
            column_info(4, "score", "decimal(5,2)"),
            column_info(5, "j", "json"),
            column_info(6, "e", "enum('a','b')"),
        ],
        pk="int",
    )
)
KEY = record_key(45, 77)
GOOD_V2 = encode_row(SCHEMA, {2: "Alice", 3: 30, 4: "12.34", 5: '{"a": [1, 2]}', 6: "b"})
GOOD_V1 = encode_row(SCHEMA, {2: "Alice", 3: 30, 4: "12.34", 5: '{"a": [1, 2]}', 6: "b"}, version=1)


def _decode_error(value: bytes, key: bytes = KEY, schema: TableSchema = SCHEMA) -> CodecError:
    with pytest.raises(CodecError) as info:
        decode_row(schema, key, value)
    err = info.value
    assert err.table_id == 45 and err.handle == 77
    assert "table 45" in str(err) and "handle 77" in str(err)
    return err


def test_good_rows_decode():
    assert (
        decode_row(SCHEMA, KEY, GOOD_V2)
        == decode_row(SCHEMA, KEY, GOOD_V1)
        == {
            "id": 77,
            "name": "Alice",
            "age": 30,
            "score": __import__("decimal").Decimal("12.34"),
            "j": '{"a": [1, 2]}',
            "e": "b",
        }
    )


@pytest.mark.parametrize("cut", range(1, len(GOOD_V2)))
def test_truncated_v2_value(cut):
    err = _decode_error(GOOD_V2[:cut])
    assert err.offset is not None and err.offset <= cut
    assert f"offset {err.offset}" in str(err)


# v1 rows carry no column count: a cut exactly between two (id, value) pairs is a valid shorter row.
V1_PAIR_ENDS = {
    len(
        encode_row(
            SCHEMA,
            dict(list({2: "Alice", 3: 30, 4: "12.34", 5: '{"a": [1, 2]}', 6: "b"}.items())[:n]),
            version=1,
        )
    )
    for n in range(1, 6)
}


@pytest.mark.parametrize("cut", [c for c in range(1, len(GOOD_V1)) if c not in V1_PAIR_ENDS])
def test_truncated_v1_value(cut):
    err = _decode_error(GOOD_V1[:cut])
    assert err.offset is not None and err.offset <= cut


def test_unknown_version_byte_and_flags():
    err = _decode_error(b"\x81" + GOOD_V2[1:])  # not 0x80, and not a v1 datum flag
    assert err.offset == 0
    err = _decode_error(GOOD_V2[:1] + b"\x04" + GOOD_V2[2:])
    assert err.offset == 1 and "flags" in str(err)


def test_offsets_past_the_end():
    # Header: 80 00 | 05 00 | 00 00 | ids(5) | offsets(5 x u16)
    n = GOOD_V2[2]
    last = 6 + n + 2 * (n - 1)
    bad = bytearray(GOOD_V2)
    struct.pack_into("<H", bad, last, 0xFFF0)
    err = _decode_error(bytes(bad))
    assert err.offset == last and "past the end" in str(err)


def test_offsets_going_backwards():
    bad = bytearray(GOOD_V2)
    n = bad[2]
    struct.pack_into("<H", bad, 6 + n, 50)  # first end offset beyond the second
    _decode_error(bytes(bad))


def test_id_list_out_of_order():
    bad = bytearray(GOOD_V2)
    bad[6], bad[7] = bad[7], bad[6]
    err = _decode_error(bytes(bad))
    assert "out of order" in str(err) and err.offset == 7


def test_trailing_bytes():
    err = _decode_error(GOOD_V2 + b"\x00")
    assert err.offset == len(GOOD_V2)


def test_type_the_schema_cannot_hold():
    # age (INT) holding 3 bytes: no compact int is 3 bytes long.
    schema3 = TableSchema.from_table_info(
        table_info(
            45,
            "t",
            [column_info(1, "id", "bigint", primary_key=True), column_info(3, "age", "int")],
            pk="int",
        )
    )
    raw = bytes([0x80, 0, 1, 0, 0, 0, 3, 3, 0]) + b"\x01\x02\x03"
    err = _decode_error(raw, schema=schema3)
    assert err.offset == 9 and err.column == "age"
    # enum index beyond the elements
    raw = encode_row(SCHEMA, {6: "b"}).replace(b"\x02", b"\x07")
    assert "enum" in str(_decode_error(raw))
    # v1: a bytes datum in the INT column
    v1 = bytes.fromhex("0806") + bytes.fromhex("0206") + b"abc"
    err = _decode_error(v1)
    assert err.offset == 2 and err.column == "age"
    # invalid UTF-8 in a text column
    assert "UTF-8" in str(_decode_error(encode_row(SCHEMA, {2: b"\xff\xfe"})))


def test_bad_decimal_and_json():
    raw = bytearray(GOOD_V2)
    i = raw.index(bytes([5, 2, 0x80, 0x0C, 0x22]))
    raw[i + 2] = raw[i + 3] = 0xFF  # leading 3-digit group 0x7fff = 32767: more than 3 digits
    err = _decode_error(bytes(raw))
    assert err.column == "score"
    j = GOOD_V2.index(bytes.fromhex("0200000022000000"))  # the JSON array header: 2 elements, 34 bytes
    raw = bytearray(GOOD_V2)
    raw[j] = 9  # 9 elements in a 34-byte array
    assert _decode_error(bytes(raw)).column == "j"


def test_wrong_table_and_non_record_keys():
    with pytest.raises(CodecError) as info:
        decode_row(SCHEMA, record_key(46, 1), GOOD_V2)
    assert info.value.table_id == 46
    with pytest.raises(CodecError):
        decode_row(SCHEMA, bytes.fromhex("74800000000000002d5f69800000000000000103800000000000000a"), GOOD_V2)
    with pytest.raises(CodecError):
        decode_record_key(record_key(45, 1)[:15])
    with pytest.raises(CodecError):
        decode_row(SCHEMA, KEY, b"")  # a DELETE carries no value to decode


@settings(max_examples=500, deadline=None)
@given(pos=st.integers(0, len(GOOD_V2) - 1), byte=st.integers(0, 255), version=st.sampled_from([1, 2]))
def test_corruption_is_an_error_or_a_valid_row(pos, byte, version):
    """A flipped byte gives CodecError or a row of well-typed values; never an exception of another type."""
    good = GOOD_V2 if version == 2 else GOOD_V1
    if pos >= len(good):
        return
    bad = bytearray(good)
    bad[pos] = byte
    try:
        row = decode_row(SCHEMA, KEY, bytes(bad))
    except CodecError as e:
        assert e.table_id == 45 and e.handle == 77
        return
    assert set(row) == {"id", "name", "age", "score", "j", "e"}


@settings(max_examples=300, deadline=None)
@given(value=st.binary(min_size=1, max_size=60))
def test_random_bytes_never_crash(value):
    try:
        decode_row(SCHEMA, KEY, value)
    except CodecError as e:
        assert e.table_id == 45 and e.handle == 77


def test_encoder_rejects_values_the_column_cannot_hold():
    with pytest.raises(CodecError, match="out of range"):
        encode_row(SCHEMA, {3: 2**31})
    with pytest.raises(CodecError, match="does not fit"):
        encode_row(SCHEMA, {4: "1000.00"})
    with pytest.raises(CodecError, match="ENUM"):
        encode_row(SCHEMA, {6: "zzz"})
    with pytest.raises(CodecError, match="not in the schema"):
        encode_row(SCHEMA, {99: 1})
    with pytest.raises(CodecError, match="JSON"):
        encode_row(SCHEMA, {5: "{not json"})


def test_checksummed_rows_decode_and_bad_checksum_area_is_an_error():
    """reference §3.1: HAS_CHECKSUM rows carry u8 header + u32 CRC (+ u32 extra) after the data."""
    import pyarrow as pa

    from backfill.codec import decode_batch

    with_checksum = GOOD_V2[:1] + b"\x02" + GOOD_V2[2:] + b"\x01" + b"\xaa\xbb\xcc\xdd"
    with_extra = GOOD_V2[:1] + b"\x02" + GOOD_V2[2:] + b"\x09" + bytes(8)
    expected = decode_row(SCHEMA, KEY, GOOD_V2)
    assert decode_row(SCHEMA, KEY, with_checksum) == decode_row(SCHEMA, KEY, with_extra) == expected
    batch = pa.RecordBatch.from_pydict({"key": [KEY, KEY], "value": [with_checksum, GOOD_V2]})
    assert decode_batch(SCHEMA, batch).to_pylist() == [expected, expected]
    err = _decode_error(with_checksum[:-1])
    assert err.offset == len(GOOD_V2) and "checksum" in str(err)
