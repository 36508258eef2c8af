"""TiDB's row-level checksum (row format v2 with the checksum flag; TiDB v7.1+, reference §3.1).

After the column data: a header byte (bits 0-2 version, bit 3 an extra checksum follows), then a
little-endian CRC32 (IEEE) [and the extra one]. TiDB ``rowcodec`` versions:

- 1 (v8.3): CRC32 over the row bytes up to and including the header, then over the raw record key
  (development builds between v8.3 and v8.4 wrote version 1 over the handle: accepted too);
- 2 (v8.4+): the same, then over the handle's encoded bytes (``kv.Handle.Encoded``: EncodeInt of an int
  handle, the padded EncodeKey datums of a common handle), i.e. the record key after ``t{id}_r``;
- 0 (v7.1-v8.2): a CRC32 over the columns' values in the schema the writer had (decode-only in TiDB);
  the bytes alone cannot prove it, so such rows are counted as not verified.

Only rows that carry the flag are checked; the work is one ``zlib.crc32`` per checked row.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa

from backfill.codec.cellmatrix import Binary
from backfill.codec.keys import RECORD_PREFIX_LEN
from backfill.codec.rowv2 import CODEC_VERSION, FLAG_CHECKSUM, FLAG_LARGE

VERSION_MASK = 0x07
RAW_KEY, RAW_HANDLE = 1, 2


def _data_end(value: bytes) -> int:
    """Where a v2 row's column data ends (its checksum header starts there)."""
    large = value[1] & FLAG_LARGE
    not_null, nulls = struct.unpack_from("<HH", value, 2)
    id_size, off_size = (4, 4) if large else (1, 2)
    offsets = 6 + id_size * (not_null + nulls)
    data = offsets + off_size * not_null
    if not not_null:
        return data
    last = struct.unpack_from("<I" if large else "<H", value, data - off_size)[0]
    return data + last


def row_checksum_ok(key: bytes, value: bytes) -> bool | None:
    """True or False for a v2 row with a raw-bytes checksum (versions 1, 2), None when there is nothing
    the bytes can prove (no checksum, version 0, row format v1, or a header too short to hold one)."""
    if len(value) < 6 or value[0] != CODEC_VERSION or not value[1] & FLAG_CHECKSUM:
        return None
    end = _data_end(value)
    if end + 5 > len(value):
        return None  # the row parser reports the truncation
    version = value[end] & VERSION_MASK
    if version not in (RAW_KEY, RAW_HANDLE):
        return None
    crc = zlib.crc32(value[: end + 1])
    stored = struct.unpack_from("<I", value, end + 1)[0]
    if zlib.crc32(key[RECORD_PREFIX_LEN:], crc) == stored:
        return True
    return version == RAW_KEY and zlib.crc32(key, crc) == stored


def append_raw_checksum(key: bytes, value: bytes, *, version: int = RAW_HANDLE) -> bytes:
    """A v2 row value with TiDB's raw-bytes checksum (``rowcodec.RawChecksum``) appended."""
    if value[0] != CODEC_VERSION or value[1] & FLAG_CHECKSUM:
        raise ValueError("want a v2 row value without a checksum")
    if version not in (RAW_KEY, RAW_HANDLE):
        raise ValueError(f"raw checksum version {version} (want 1 or 2)")
    row = bytes([value[0], value[1] | FLAG_CHECKSUM]) + value[2:] + bytes([version])
    crc = zlib.crc32(key if version == RAW_KEY else key[RECORD_PREFIX_LEN:], zlib.crc32(row))
    return row + struct.pack("<I", crc)


def _u(vals: Binary, pos: np.ndarray, size: int) -> np.ndarray:
    """Little-endian unsigned words of ``size`` bytes at ``pos``, as int64."""
    return vals.le_words(pos, 1, size)[:, 0]


def checksum_failures(keys: pa.Array, values: pa.Array) -> tuple[np.ndarray, int]:
    """(indices of rows whose checksum does not match, rows verified) of a batch's (key, value) pairs.

    Headers are read for all rows at once; only the CRC32 calls run per row, over views of the buffers."""
    vals, ks = Binary.of(values), Binary.of(keys)
    starts, lengths = vals.starts, vals.lengths
    has = (
        (lengths >= 6) & (vals.byte(starts) == CODEC_VERSION) & ((vals.byte(starts + 1) & FLAG_CHECKSUM) != 0)
    )
    has &= ~np.asarray(keys.is_null()) & (ks.lengths > RECORD_PREFIX_LEN)
    rows = np.flatnonzero(has)
    if not len(rows):
        return np.zeros(0, np.int64), 0
    s = starts[rows]
    large = (vals.byte(s + 1) & FLAG_LARGE) != 0
    not_null, nulls = _u(vals, s + 2, 2), _u(vals, s + 4, 2)
    id_size, off_size = np.where(large, 4, 1), np.where(large, 4, 2)
    data = 6 + id_size * (not_null + nulls) + off_size * not_null
    last_small, last_large = _u(vals, s + data - 2, 2), _u(vals, s + data - 4, 4)
    end = data + np.where(not_null > 0, np.where(large, last_large, last_small), 0)
    fits = end + 5 <= lengths[rows]
    version = np.where(fits, vals.byte(s + end) & VERSION_MASK, 0)
    raw = fits & ((version == RAW_KEY) | (version == RAW_HANDLE))
    rows, s, end, version = rows[raw], s[raw], end[raw], version[raw]
    stored = _u(vals, s + end + 1, 4)
    vbuf, kbuf = vals.data.data, ks.data.data  # ndarray.data: the array's buffer as a memoryview
    k0, k1 = ks.starts[rows], ks.offsets[1:][rows]
    bad = []
    crc32 = zlib.crc32
    for i, (vs, ve, kst, ken, v, want) in enumerate(
        zip(
            s.tolist(),
            (s + end + 1).tolist(),
            k0.tolist(),
            k1.tolist(),
            version.tolist(),
            stored.tolist(),
            strict=False,
        )
    ):
        row = crc32(vbuf[vs:ve])
        if crc32(kbuf[kst + RECORD_PREFIX_LEN : ken], row) == want:
            continue
        if v == RAW_KEY and crc32(kbuf[kst:ken], row) == want:
            continue
        bad.append(int(rows[i]))
    return np.array(bad, np.int64), len(rows)
