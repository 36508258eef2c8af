"""TiDB record keys, memcomparable bytes and key datums (reference §2).

Raw keys (what CDC events carry): ``t{EncodeInt(table)}_r{handle}``, handle = EncodeInt(rowid or int PK)
or the EncodeKey of the clustered PK datums. Region boundaries use the memcomparable form
``EncodeBytes(raw)`` (:func:`to_comparable_key`).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, NamedTuple

from backfill.codec import collation, mydecimal
from backfill.codec.errors import CodecError
from backfill.codec.numbers import (
    decode_cmp_float,
    decode_cmp_int,
    decode_cmp_uint,
    decode_uvarint,
    decode_varint,
    encode_cmp_float,
    encode_cmp_int,
    encode_cmp_uint,
)
from backfill.codec.schema import (
    STRING_TPS,
    TP_VAR_STRING,
    TP_VARCHAR,
    UNSIGNED_STORED,
    ColumnKind,
    ColumnSchema,
    TableSchema,
)

TABLE_PREFIX = b"t"
RECORD_SEP = b"_r"
INDEX_SEP = b"_i"
META_PREFIX = b"m"
RECORD_PREFIX_LEN = 11  # 't' + 8 + '_r'
RECORD_KEY_LEN = 19  # with an int handle
COMMON_HANDLE_MIN_LEN = 9  # kv.NewCommonHandle pads shorter encodings with zero bytes

# Datum flags (codec.go)
NIL_FLAG, BYTES_FLAG, COMPACT_BYTES_FLAG, INT_FLAG, UINT_FLAG = 0x00, 0x01, 0x02, 0x03, 0x04
FLOAT_FLAG, DECIMAL_FLAG, DURATION_FLAG = 0x05, 0x06, 0x07
VARINT_FLAG, UVARINT_FLAG, JSON_FLAG = 0x08, 0x09, 0x0A
VECTOR_FLOAT32_FLAG, MAX_FLAG = 0x14, 0xFA

_GROUP = 8
_PAD = b"\0" * _GROUP


# ---------------------------------------------------------------- memcomparable bytes


def encode_bytes(data: bytes) -> bytes:
    """EncodeBytes: 8-byte groups, each followed by ``0xFF - pad``; always ends with a padded group."""
    out = bytearray()
    for i in range(0, len(data) + 1, _GROUP):
        chunk = data[i : i + _GROUP]
        pad = _GROUP - len(chunk)
        out += chunk + _PAD[:pad]
        out.append(0xFF - pad)
    return bytes(out)


def decode_bytes(buf: bytes, pos: int = 0) -> tuple[bytes, int]:
    out = bytearray()
    start = pos
    while True:
        if len(buf) - pos < _GROUP + 1:
            raise CodecError("truncated memcomparable bytes", offset=start)
        group = buf[pos : pos + _GROUP]
        marker = buf[pos + _GROUP]
        pos += _GROUP + 1
        pad = 0xFF - marker
        if pad == 0:
            out += group
            continue
        if pad > _GROUP or group[_GROUP - pad :] != _PAD[:pad]:
            raise CodecError(f"bad memcomparable group marker {marker:#x}", offset=pos - 1)
        out += group[: _GROUP - pad]
        return bytes(out), pos


def to_comparable_key(raw: bytes) -> bytes:
    """Raw TiDB key -> TiKV/PD region-key form (``codec.EncodeBytes``); empty stays empty (open bound)."""
    return encode_bytes(raw) if raw else b""


def from_comparable_key(key: bytes) -> bytes:
    """Region-key form -> raw key; a boundary that ends inside a group yields its complete groups' prefix."""
    if not key:
        return b""
    try:
        raw, end = decode_bytes(key)
    except CodecError:
        # Region boundaries need not be whole encoded keys: keep the whole groups we can read.
        out = bytearray()
        pos = 0
        while len(key) - pos >= _GROUP + 1 and key[pos + _GROUP] == 0xFF:
            out += key[pos : pos + _GROUP]
            pos += _GROUP + 1
        return bytes(out)
    # A ts suffix (8 bytes) may follow inside TiKV; anything else is not a region key.
    if end != len(key) and len(key) - end != 8:
        raise CodecError(f"{len(key) - end} bytes after the encoded key", offset=end)
    return raw


# ---------------------------------------------------------------- record keys


class RecordKey(NamedTuple):
    table_id: int
    handle: int | tuple[Any, ...]


def table_prefix(table_id: int) -> bytes:
    return TABLE_PREFIX + encode_cmp_int(table_id)


def table_span(table_id: int) -> tuple[bytes, bytes]:
    """Raw key range of a physical table's rows: ``t{id}_r`` .. ``t{id}_s`` (TiCDC GetTableRange)."""
    p = table_prefix(table_id)
    return p + RECORD_SEP, p + b"_s"


def record_key(table_id: int, handle: int | Sequence[tuple[ColumnSchema, Any]]) -> bytes:
    """``t{table}_r{handle}``: an int handle, or a clustered PK as ``[(column, value), ...]``."""
    prefix = table_prefix(table_id) + RECORD_SEP
    if isinstance(handle, bool):
        raise TypeError(f"a record handle is an int or a clustered key's columns, not {handle!r}")
    if isinstance(handle, int):
        if handle >= 1 << 63:  # BIGINT UNSIGNED PK: the handle is the int64 bit pattern
            handle -= 1 << 64
        return prefix + encode_cmp_int(handle)
    encoded = b"".join(encode_key_datum(col, value) for col, value in handle)
    # kv.NewCommonHandle: a common handle is never 8 bytes long (that is an int handle's length).
    return prefix + encoded.ljust(COMMON_HANDLE_MIN_LEN, b"\0")


def decode_record_key(key: bytes, *, common: bool | None = None) -> RecordKey:
    """Raw record key -> (physical table id, handle). Index, meta and other keys raise CodecError.

    ``common`` says whether the table has a clustered (common-handle) primary key, when the caller knows
    its schema: the handle is then read datum by datum from its flags whatever its length (a DECIMAL(10)
    datum is 8 bytes, like an int handle). Unknown (None), TiDB's ``DecodeRecordKey`` rule applies: 8
    bytes are an int handle. Zero bytes after the datums are ``NewCommonHandle``'s padding to 9 bytes.
    """
    kind = classify_key(key)
    if kind != "record":
        raise CodecError(f"not a record key ({kind} key {bytes(key[:24]).hex()})", offset=0)
    table_id, _ = decode_cmp_int(key, 1)
    if common is False or (common is None and len(key) == RECORD_KEY_LEN):
        if len(key) != RECORD_KEY_LEN:
            raise CodecError(
                f"int-handle key has {len(key) - RECORD_PREFIX_LEN} handle bytes (want 8)",
                table_id=table_id,
                offset=RECORD_PREFIX_LEN,
            )
        handle, _ = decode_cmp_int(key, RECORD_PREFIX_LEN)
        return RecordKey(table_id, handle)
    try:
        datums = _common_handle_datums(key)
    except CodecError as e:
        raise e.at(table_id=table_id) from None
    return RecordKey(table_id, tuple(datums))


def _common_handle_datums(key: bytes) -> list[Any]:
    """The datums of a common handle; a NIL flag starts the zero padding (PK columns are never NULL)."""
    out = []
    pos = RECORD_PREFIX_LEN
    while pos < len(key):
        if key[pos] == NIL_FLAG:
            if len(key) - RECORD_PREFIX_LEN != COMMON_HANDLE_MIN_LEN or any(key[pos:]):
                raise CodecError("a NULL datum in a common handle", offset=pos)
            break
        v, pos = decode_datum(key, pos)
        out.append(v[0] if isinstance(v, tuple) and len(v) == 3 and isinstance(v[0], Decimal) else v)
    if not out:
        raise CodecError("record key without a handle", offset=RECORD_PREFIX_LEN)
    return out


def classify_key(key: bytes) -> str:
    """``"record"``, ``"index"``, ``"meta"`` or ``"other"`` (a key this codec never decodes as a row)."""
    if key[:1] == META_PREFIX:
        return "meta"
    if len(key) >= RECORD_PREFIX_LEN and key[:1] == TABLE_PREFIX:
        sep = key[9:11]
        if sep == RECORD_SEP and len(key) > RECORD_PREFIX_LEN:
            return "record"
        if sep == INDEX_SEP:
            return "index"
    return "other"


# ---------------------------------------------------------------- key datums (EncodeKey, comparable)

_BIN_COLLATIONS = frozenset({"binary", "utf8mb4_bin", "utf8_bin", "latin1_bin", "ascii_bin", "gbk_bin"})


def needs_restored_data(col: ColumnSchema) -> bool:
    """TiDB ``NeedRestoredData`` (new collation on): a clustered PK string the key cannot give back."""
    if col.kind != ColumnKind.TEXT or col.tp not in STRING_TPS:
        return False
    is_varchar = col.tp in (TP_VARCHAR, TP_VAR_STRING)
    return not (col.collate in _BIN_COLLATIONS and not is_varchar)


def key_columns_need_row(schema: TableSchema) -> bool:
    """Whether the clustered key may not give the primary-key values back exactly (a sort key, a PAD SPACE
    VARCHAR, a prefix): TiDB then writes those columns into the row value, and a DELETE's key columns
    come from its old value (as TiCDC's mounter takes them)."""
    return schema.pk_kind == "common" and any(
        needs_restored_data(col) or length not in (-1, None) for col, length in schema.common_handle
    )


def key_gives_value(col: ColumnSchema) -> bool:
    """Whether a clustered key datum of `col` is its value (binary and *_bin collations: up to trailing
    spaces) rather than a sort key that many values share (_ci and other new collations)."""
    return col.kind != ColumnKind.TEXT or collation.gives_value(col.collate)


def collation_key(col: ColumnSchema, text: bytes) -> bytes:
    """Sort key of a string under its collation (`collation.sort_key`); binary columns keep their bytes."""
    if col.kind == ColumnKind.BINARY:
        return text
    try:
        return collation.sort_key(col.collate, text)
    except CodecError as e:
        raise e.at(column=col.name) from None


def encode_key_datum(col: ColumnSchema, value: Any) -> bytes:
    from backfill.codec.values import to_stored  # values imports schema only; avoid a cycle at import

    stored = to_stored(col, value)
    kind = col.kind
    if stored is None:
        return bytes([NIL_FLAG])
    if kind in (ColumnKind.INT, ColumnKind.YEAR):
        return bytes([INT_FLAG]) + encode_cmp_int(stored)
    if kind == ColumnKind.TIME:
        return bytes([DURATION_FLAG]) + encode_cmp_int(stored)
    if kind in UNSIGNED_STORED:
        return bytes([UINT_FLAG]) + encode_cmp_uint(stored)
    if kind in (ColumnKind.FLOAT32, ColumnKind.FLOAT64):
        return bytes([FLOAT_FLAG]) + encode_cmp_float(stored)
    if kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR):
        d, prec, frac = stored
        return bytes([DECIMAL_FLAG, prec, frac]) + mydecimal.encode_decimal_bin(d, prec, frac)
    if kind in (ColumnKind.TEXT, ColumnKind.BINARY):
        return bytes([BYTES_FLAG]) + encode_bytes(collation_key(col, stored))
    raise CodecError(f"a {kind.value} column cannot be part of a key", column=col.name)


def decode_datum(buf: bytes, pos: int) -> tuple[Any, int]:
    """One datum of either form (key or v1 value) -> (Python value, new pos).

    bytes flags -> bytes; int/varint/duration -> int; uint/uvarint -> int; float -> float;
    decimal -> (Decimal, prec, frac); json -> (type code, bytes); nil -> None.
    """
    if pos >= len(buf):
        raise CodecError("truncated datum: no flag byte", offset=pos)
    flag = buf[pos]
    pos += 1
    if flag == NIL_FLAG:
        return None, pos
    if flag in (INT_FLAG, DURATION_FLAG):
        return decode_cmp_int(buf, pos)
    if flag == UINT_FLAG:
        return decode_cmp_uint(buf, pos)
    if flag == VARINT_FLAG:
        return decode_varint(buf, pos)
    if flag == UVARINT_FLAG:
        return decode_uvarint(buf, pos)
    if flag == FLOAT_FLAG:
        return decode_cmp_float(buf, pos)
    if flag == BYTES_FLAG:
        return decode_bytes(buf, pos)
    if flag == COMPACT_BYTES_FLAG:
        n, p = decode_varint(buf, pos)
        if n < 0 or p + n > len(buf):
            raise CodecError(f"compact bytes of length {n} run past the end", offset=pos)
        return bytes(buf[p : p + n]), p + n
    if flag == DECIMAL_FLAG:
        if len(buf) - pos < 2:
            raise CodecError("truncated decimal header", offset=pos)
        prec, frac = buf[pos], buf[pos + 1]
        d, p = mydecimal.decode_decimal_bin(buf, pos + 2, prec, frac)
        return (d, prec, frac), p
    if flag == JSON_FLAG:
        from backfill.codec import jsonbin

        if pos >= len(buf):
            raise CodecError("truncated JSON datum", offset=pos)
        code = buf[pos]
        size = jsonbin.binary_size(code, buf, pos + 1)
        if pos + 1 + size > len(buf):
            raise CodecError("JSON datum runs past the end", offset=pos)
        return (code, bytes(buf[pos + 1 : pos + 1 + size])), pos + 1 + size
    if flag == VECTOR_FLOAT32_FLAG:
        if len(buf) - pos < 4:
            raise CodecError("truncated vector datum", offset=pos)
        n = int.from_bytes(buf[pos : pos + 4], "little")
        end = pos + 4 + 4 * n
        if end > len(buf):
            raise CodecError("vector datum runs past the end", offset=pos)
        return bytes(buf[pos:end]), end
    raise CodecError(f"unknown datum flag {flag:#04x}", offset=pos - 1)
