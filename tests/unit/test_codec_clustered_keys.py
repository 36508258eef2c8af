"""Clustered (common-handle) record keys: the handle is read from its datum flags, never its length.

Vectors: TiDB pkg/tablecodec/tablecodec_test.go (TestRecordKey, TestTableCodecInvalid) and
pkg/kv/key.go ``NewCommonHandle`` (an encoded handle shorter than 9 bytes is padded with zero bytes).
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from backfill.codec import CodecError, TableSchema, decode_batch, decode_record_key, decode_row, encode_row
from backfill.codec.arrow import decode_keys
from backfill.codec.keys import encode_key_datum, record_key
from backfill.codec.tableinfo import column_info, table_info

pytestmark = pytest.mark.unit


def _decimal_pk_table() -> TableSchema:
    cols = [column_info(1, "id", "decimal(10,0)"), column_info(2, "v", "varchar(20)")]
    return TableSchema.from_table_info(table_info(90, "d", cols, pk=["id"]))


def test_tablecodec_record_key_vector():
    """TestRecordKey: table 55, IntHandle(MaxUint32)."""
    key = bytes.fromhex("7480000000000000375f7280000000ffffffff")
    assert decode_record_key(key) == (55, 0xFFFFFFFF)
    assert decode_record_key(key, common=False) == (55, 0xFFFFFFFF)


def test_tablecodec_invalid_key_vector():
    """TestTableCodecInvalid: an int handle followed by '0' is no record key TiDB can decode."""
    key = bytes.fromhex("7480000000000000645f72") + bytes.fromhex("0203000000000000") + b"0"
    with pytest.raises(CodecError, match="table 100"):
        decode_record_key(key)


def test_a_decimal10_pk_datum_is_eight_bytes_and_padded_like_new_common_handle():
    schema = _decimal_pk_table()
    col = schema.by_id[1]
    datum = encode_key_datum(col, Decimal(1234567890))
    assert len(datum) == 8 and datum[0] == 0x06  # decimal flag, prec 10, frac 0, 5 bytes
    key = record_key(90, [(col, Decimal(1234567890))])
    assert key[11:] == datum + b"\0"  # NewCommonHandle: padded to 9 bytes
    assert decode_record_key(key) == (90, (Decimal(1234567890),))
    assert decode_record_key(key, common=True) == (90, (Decimal(1234567890),))


def test_an_unpadded_eight_byte_common_handle_is_read_from_its_flags_when_the_schema_says_so():
    """An 8-byte handle is an int by TiDB's length rule; with the schema's word it is the datum it is."""
    schema = _decimal_pk_table()
    col = schema.by_id[1]
    key = record_key(90, 0)[:11] + encode_key_datum(col, Decimal(-42))
    assert len(key) == 19
    assert decode_record_key(key, common=True) == (90, (Decimal(-42),))
    value = encode_row(schema, {1: Decimal(-42), 2: "x"})
    assert decode_row(schema, key, value) == {"id": Decimal(-42), "v": "x"}
    batch = pa.RecordBatch.from_pydict({"key": [key], "value": [value]})
    assert decode_batch(schema, batch).to_pylist() == [{"id": Decimal(-42), "v": "x"}]
    assert decode_keys(schema, pa.array([key])).to_pylist() == [{"id": Decimal(-42)}]


def test_padded_keys_of_every_row_decode_in_batches():
    schema = TableSchema.from_table_info(
        table_info(91, "p", [column_info(1, "k", "varbinary(4)"), column_info(2, "n", "int")], pk=["k"])
    )
    col = schema.by_id[1]
    keys, values = [], []
    for k in (b"", b"a", b"abcd"):
        keys.append(record_key(91, [(col, k)]))
        values.append(encode_row(schema, {1: k, 2: len(k)}))
    assert [len(k) - 11 for k in keys] == [10, 10, 10]  # memcomparable bytes are never short
    out = decode_batch(schema, pa.RecordBatch.from_pydict({"key": keys, "value": values}))
    assert out.to_pylist() == [{"k": k, "n": len(k)} for k in (b"", b"a", b"abcd")]


def test_an_int_handle_key_of_the_wrong_length_is_an_error():
    with pytest.raises(CodecError, match="handle bytes"):
        decode_record_key(record_key(55, 1) + b"\0", common=False)


def test_padding_that_is_not_zero_is_an_error():
    schema = _decimal_pk_table()
    key = record_key(90, [(schema.by_id[1], Decimal(5))])
    with pytest.raises(CodecError, match="table 90"):
        decode_record_key(key[:-1] + b"\x01")


def test_a_delete_keyed_by_ci_sort_keys_is_an_error_not_a_wrong_row():
    """utf8mb4_general_ci: the key holds sort keys ('abc' and 'ABC' share one), so a DELETE's key alone
    cannot give the primary key value back; TiDB and TiCDC take it from the row (old) value."""
    ci = TableSchema.from_table_info(
        table_info(92, "ci", [column_info(1, "k", "varchar(8)", collate="utf8mb4_general_ci")], pk=["k"])
    )
    key = bytes.fromhex("74800000000000005c5f72") + bytes.fromhex("01004100420043ff0000000000000000f9")
    with pytest.raises(CodecError, match="utf8mb4_general_ci sort keys"):
        decode_keys(ci, pa.array([key]))
