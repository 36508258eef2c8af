"""TiDB's row-level checksum on row format v2 (pkg/util/rowcodec row.go, encoder.go, rowcodec_test.go)."""

from __future__ import annotations

import struct
import zlib

import pyarrow as pa
import pytest

from backfill.codec import TableSchema, decode_row, encode_row, record_key
from backfill.codec.checksum import append_raw_checksum, checksum_failures, row_checksum_ok
from backfill.codec.tableinfo import column_info, table_info
from backfill.sources.kvscan.row_decode import decode_changes_batch

pytestmark = pytest.mark.unit

SCHEMA = TableSchema.from_table_info(
    table_info(70, "c", [column_info(1, "id", "bigint", primary_key=True), column_info(2, "s", "varchar(9)")],
               pk="int")
)  # fmt: skip


def test_encode_decode_row_with_checksum_vector():
    """TestEncodeDecodeRowWithChecksum: an empty row, RawChecksum{Handle: IntHandle(1)}, version 2: the
    CRC32 of the row bytes with the header byte, then of EncodeInt(1)."""
    key = record_key(70, 1)
    value = append_raw_checksum(key, bytes.fromhex("800000000000"))
    head = bytes.fromhex("80020000000002")
    assert value[:7] == head
    assert value[7:] == struct.pack("<I", zlib.crc32(bytes.fromhex("8000000000000001"), zlib.crc32(head)))
    assert row_checksum_ok(key, value) is True


def test_large_row_with_checksum_vector():
    """rowcodec's large-row case (column id 300, uint 300, IntHandle(11)): flags LARGE|CHECKSUM, u32 ids and
    offsets; the checksum covers the whole row and EncodeInt(11)."""
    raw = bytes.fromhex("80" "01" "0100" "0000" "2c010000" "02000000" "2c01")  # fmt: skip
    key = record_key(70, 11)
    value = append_raw_checksum(key, raw)
    assert value[1] == 0x03 and value[-5] == 2
    assert row_checksum_ok(key, value) is True
    assert row_checksum_ok(record_key(70, 12), value) is False


def test_version_1_covers_the_raw_key():
    key = record_key(70, 5)
    value = append_raw_checksum(key, encode_row(SCHEMA, {1: 5, 2: "five"}), version=1)
    body = value[:-4]
    assert value[-4:] == struct.pack("<I", zlib.crc32(key, zlib.crc32(body)))
    assert row_checksum_ok(key, value) is True
    assert decode_row(SCHEMA, key, value) == {"id": 5, "s": "five"}


def test_rows_without_checksum_or_with_the_legacy_one_prove_nothing():
    key = record_key(70, 5)
    plain = encode_row(SCHEMA, {1: 5, 2: "five"})
    assert row_checksum_ok(key, plain) is None
    legacy = bytes([0x80, 0x02]) + plain[2:] + bytes([0x00]) + struct.pack("<I", 12345)
    assert row_checksum_ok(key, legacy) is None
    assert decode_row(SCHEMA, key, legacy) == {"id": 5, "s": "five"}
    assert row_checksum_ok(key, encode_row(SCHEMA, {1: 5, 2: "five"}, version=1)) is None


def test_a_flipped_byte_is_found_in_a_batch():
    keys, values = [], []
    for i in range(50):
        key = record_key(70, i)
        keys.append(key)
        values.append(append_raw_checksum(key, encode_row(SCHEMA, {1: i, 2: f"v{i}"})))
    values[7] = values[7][:-6] + bytes([values[7][-6] ^ 1]) + values[7][-5:]  # a bit of the data
    values.append(encode_row(SCHEMA, {1: 99, 2: "none"}))
    keys.append(record_key(70, 99))
    bad, verified = checksum_failures(pa.array(keys), pa.array(values))
    assert bad.tolist() == [7] and verified == 50


def test_kvscan_decode_stops_on_a_mismatch_naming_key_and_commit_ts():
    key = record_key(70, 3)
    value = append_raw_checksum(key, encode_row(SCHEMA, {1: 3, 2: "x"}))
    broken = value[:-1] + bytes([value[-1] ^ 0xFF])
    batch = pa.RecordBatch.from_pydict(
        {"key": [key], "value": [broken], "op": ["PUT"], "commit_ts": pa.array([4242], pa.int64())}
    )
    with pytest.raises(ValueError, match=rf"checksum mismatch: key {key.hex()}, commit_ts 4242.*table 70"):
        decode_changes_batch(SCHEMA, batch)
    out, _ = decode_changes_batch(SCHEMA, batch, verify_checksums=False)
    assert out.column("s").to_pylist() == ["x"]
