"""Decode an Arrow batch of (key, value) rows into the table's Delta-typed Arrow columns.

Fast path: v2 rows of one table mostly share a header layout (same not-null and null column ids), so rows
are grouped by header shape and each column is decoded for a whole group with numpy over the Arrow
buffers: fixed-width cells are gathered with fancy indexing, packed times and decimals are unpacked
arithmetically, strings are sliced into new Arrow buffers. JSON goes through :mod:`jsonvec` (text of
same-shaped documents built with Arrow kernels); other kinds without a numpy kernel (SET, BIT, TIME, wide
DECIMAL ...) are decoded once per distinct cell. Rows the fast path cannot take (v1, checksummed rows, any
cell that fails a check) go through :func:`backfill.codec.row.decode_row`, which is the reference the fast
path is tested against and the one place that raises CodecError with the row's location.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from backfill.codec import jsonvec
from backfill.codec.errors import CodecError
from backfill.codec.keys import decode_record_key
from backfill.codec.mydecimal import DIG2BYTES, decimal_bin_size
from backfill.codec.row import DecodeStats, decode_row, handle_stored
from backfill.codec.rowv2 import decode_cell
from backfill.codec.schema import ColumnKind, ColumnSchema, TableSchema
from backfill.codec.values import ZeroDate, fill_value, from_stored, int_bounds

ZERO_DATES_METADATA_KEY = b"tidelake.zero_dates"
K = ColumnKind
_SIGN = np.uint64(1 << 63)
_AR8 = np.arange(8)
_FIRST_PASS_SIGNATURES = 8  # header shapes peeled off one by one before falling back to np.unique


@dataclass
class _Binary:
    """Offsets (int64, n+1) and data (uint8) of a binary Arrow array, whatever its offset width."""

    offsets: np.ndarray
    data: np.ndarray

    @classmethod
    def of(cls, arr: pa.Array) -> _Binary:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if pa.types.is_binary_view(arr.type) or pa.types.is_string_view(arr.type) \
                or pa.types.is_fixed_size_binary(arr.type):
            arr = arr.cast(pa.large_binary())
        width = np.int64 if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type) \
            else np.int32
        bufs = arr.buffers()
        offsets = np.frombuffer(bufs[1], dtype=width)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        return cls(offsets, data)

    @property
    def starts(self) -> np.ndarray:
        return self.offsets[:-1]

    @property
    def lengths(self) -> np.ndarray:
        return self.offsets[1:] - self.offsets[:-1]

    def gather(self, pos: np.ndarray, width: int) -> np.ndarray:
        """``width`` bytes from each position (positions past the data read as padding; callers check)."""
        if len(self.data) == 0:
            return np.zeros((len(pos), width), np.uint8)
        idx = pos[:, None] + np.arange(width)
        np.clip(idx, 0, len(self.data) - 1, out=idx)
        return self.data[idx]


def _be_u64(mat: np.ndarray) -> np.ndarray:
    """(n, 8) uint8 big-endian -> uint64."""
    return np.ascontiguousarray(mat).view(">u8").ravel().astype(np.uint64)


# ---------------------------------------------------------------- keys

def _int_handles(schema: TableSchema, keys: _Binary) -> tuple[np.ndarray, np.ndarray]:
    """(ok mask, int64 handle) for rows whose key is a record key of this table with an int handle."""
    n = len(keys.starts)
    ok = keys.lengths == 19
    mat = keys.gather(np.where(ok, keys.starts, 0), 19)
    ok &= (mat[:, 0] == ord("t")) & (mat[:, 9] == ord("_")) & (mat[:, 10] == ord("r"))
    table_ids = (_be_u64(mat[:, 1:9]) ^ _SIGN).view(np.int64)
    ok &= np.isin(table_ids, np.array(schema.physical_ids, dtype=np.int64))
    handles = (_be_u64(mat[:, 11:19]) ^ _SIGN).view(np.int64) if n else np.zeros(0, np.int64)
    return ok, handles


def _common_handles(schema: TableSchema, keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(ok mask, handle datum tuples) for clustered-PK keys, decoded one by one (keys are short)."""
    n = len(keys)
    ok = np.zeros(n, bool)
    handles = np.empty(n, dtype=object)
    physical = set(schema.physical_ids)
    for i, key in enumerate(keys.to_pylist()):
        if key is None:
            continue
        try:
            rk = decode_record_key(key)
        except CodecError:
            continue
        if rk.table_id in physical and isinstance(rk.handle, tuple):
            ok[i] = True
            handles[i] = rk.handle
    return ok, handles


# ---------------------------------------------------------------- header groups

@dataclass
class _Group:
    rows: np.ndarray          # indices into the batch
    not_null: tuple[int, ...]
    nulls: tuple[int, ...]
    data_start: np.ndarray    # absolute position of the data area per row
    ends: np.ndarray          # (rows, len(not_null)) end offsets relative to data_start


def _v2_groups(values: _Binary, candidates: np.ndarray) -> tuple[list[_Group], np.ndarray]:
    """Split checksum-free v2 rows into header-shape groups; the rest is returned as fallback."""
    fallback = ~candidates
    lengths = values.lengths
    cand = candidates & (lengths >= 6)
    fallback |= candidates & ~cand
    hdr = values.gather(np.where(cand, values.starts, 0), 6)
    good = cand & (hdr[:, 0] == 0x80) & (hdr[:, 1] <= 1)  # no flag but LARGE (checksummed rows: per row)
    fallback |= cand & ~good
    n_not_null = hdr[:, 2].astype(np.int64) | (hdr[:, 3].astype(np.int64) << 8)
    n_null = hdr[:, 4].astype(np.int64) | (hdr[:, 5].astype(np.int64) << 8)
    groups: list[_Group] = []
    idx = np.flatnonzero(good)
    if not len(idx):
        return groups, fallback
    shape_keys = (hdr[idx, 1].astype(np.int64) << 32) | (n_not_null[idx] << 16) | n_null[idx]
    for shape in np.unique(shape_keys).tolist():
        rows = idx[shape_keys == shape]
        large, a, b = shape >> 32, (shape >> 16) & 0xFFFF, shape & 0xFFFF
        id_size, off_size = (4, 4) if large else (1, 2)
        header_len = 6 + id_size * (a + b) + off_size * a
        fits = lengths[rows] >= header_len
        fallback[rows[~fits]] = True
        rows = rows[fits]
        if not len(rows):
            continue
        id_bytes = values.gather(values.starts[rows] + 6, id_size * (a + b))
        for sig_rows, sig in _split_by_signature(rows, id_bytes):
            ids = _le_words(sig[None, :], id_size)[0].tolist() if a + b else []
            not_null, nulls = tuple(ids[:a]), tuple(ids[a:])
            if not _ascending(not_null) or not _ascending(nulls) or set(not_null) & set(nulls):
                fallback[sig_rows] = True
                continue
            starts = values.starts[sig_rows]
            if a:
                ends = _le_words(values.gather(starts + 6 + id_size * (a + b), off_size * a), off_size)
                ok = (np.diff(ends, axis=1) >= 0).all(axis=1)
                ok &= ends[:, -1] == lengths[sig_rows] - header_len
            else:
                ends = np.zeros((len(sig_rows), 0), np.int64)
                ok = lengths[sig_rows] == header_len
            fallback[sig_rows[~ok]] = True
            if ok.any():
                groups.append(_Group(sig_rows[ok], not_null, nulls, starts[ok] + header_len, ends[ok]))
    return groups, fallback


def _le_words(mat: np.ndarray, size: int) -> np.ndarray:
    """(rows, k*size) uint8 -> (rows, k) int64 of little-endian unsigned words."""
    words = np.ascontiguousarray(mat).view({1: "<u1", 2: "<u2", 4: "<u4"}[size])
    return words.astype(np.int64)


def _ascending(ids: tuple[int, ...]) -> bool:
    return all(x < y for x, y in itertools.pairwise(ids))


def _split_by_signature(rows: np.ndarray, ids: np.ndarray):
    """Yield (rows, id bytes) per distinct id list: peel the common ones off, then np.unique the rest."""
    for _ in range(_FIRST_PASS_SIGNATURES):
        if not len(rows):
            return
        same = (ids == ids[0]).all(axis=1)
        yield rows[same], ids[0]
        rows, ids = rows[~same], ids[~same]
    if len(rows):
        sigs, inverse = np.unique(ids, axis=0, return_inverse=True)
        for k, sig in enumerate(sigs):
            yield rows[inverse.ravel() == k], sig


# ---------------------------------------------------------------- column kernels

class _Bad(Exception):
    """Some rows of a group failed a fast-path check: send them through the per-row decoder."""

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = mask


def _check(bad: np.ndarray) -> None:
    if bad.any():
        raise _Bad(bad)


def _compact_int(values: _Binary, s: np.ndarray, e: np.ndarray, signed: bool) -> np.ndarray:
    lens = e - s
    _check(~np.isin(lens, (1, 2, 4, 8)))
    mat = values.gather(s, 8)
    mat[_AR8[None, :] >= lens[:, None]] = 0
    u = np.ascontiguousarray(mat).view("<u8").ravel()
    if not signed:
        return u
    shift = ((8 - lens) * 8).astype(np.int64)
    return (u.view(np.int64) << shift) >> shift


def _ints(col: ColumnSchema, v: np.ndarray) -> pa.Array:
    lo, hi = int_bounds(col)
    if v.dtype == np.uint64:
        _check(v > np.uint64(hi))
        if col.kind == K.UINT64:
            return _decimal128_from_int(v.view(np.int64), np.zeros(len(v), np.int64), col.arrow_type)
        v = v.astype(np.int64)
    else:
        _check((v < lo) | (v > hi))
    return pa.array(v.astype(col.arrow_type.to_pandas_dtype()), type=col.arrow_type)


def _floats(col: ColumnSchema, values: _Binary, s: np.ndarray, e: np.ndarray) -> pa.Array:
    _check(e - s != 8)
    u = _be_u64(values.gather(s, 8))
    f = np.where(u & _SIGN, u & ~_SIGN, ~u).view(np.float64)
    return pa.array(f.astype(np.float32) if col.kind == K.FLOAT32 else f, type=col.arrow_type)


def _slice(values: _Binary, s: np.ndarray, e: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A string/binary Arrow array of the byte ranges ``[s, e)`` (one gather over the value buffer)."""
    lens = e - s
    offsets = np.zeros(len(s) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        idx = np.repeat(s - offsets[:-1], lens) + np.arange(total)
        data = values.data[idx]
    else:
        data = np.zeros(0, np.uint8)
    if total >= 2**31 - 1:
        typ = pa.large_string() if pa.types.is_string(typ) else pa.large_binary()
        offsets_buf = pa.py_buffer(offsets)
    else:
        offsets_buf = pa.py_buffer(offsets.astype(np.int32))
    return pa.Array.from_buffers(typ, len(s), [None, offsets_buf, pa.py_buffer(data)])


def _strings(col: ColumnSchema, values: _Binary, s: np.ndarray, e: np.ndarray) -> pa.Array:
    arr = _slice(values, s, e, pa.string() if col.kind == K.TEXT else pa.binary())
    if col.kind == K.TEXT:
        try:
            arr.validate(full=True)  # UTF-8 check
        except pa.ArrowInvalid:
            raise _Bad(np.ones(len(s), bool)) from None
    return arr if arr.type == col.arrow_type else arr.cast(col.arrow_type)


def _decimal128_from_int(lo: np.ndarray, hi: np.ndarray, typ: pa.DataType) -> pa.Array:
    words = np.empty((len(lo), 2), np.int64)
    words[:, 0] = lo
    words[:, 1] = hi
    return pa.Array.from_buffers(typ, len(lo), [None, pa.py_buffer(words)])


def _decimals(col: ColumnSchema, values: _Binary, s: np.ndarray, e: np.ndarray) -> pa.Array:
    """DECIMAL(p<=18, s) cells stored with the column's own (precision, scale): unpack in int64."""
    prec, frac = col.decimal_precision
    size = decimal_bin_size(prec, frac)
    head = values.gather(s, 2)
    _check((e - s != size + 2) | (head[:, 0] != prec) | (head[:, 1] != frac))
    mat = values.gather(s + 2, size).astype(np.uint8)
    negative = (mat[:, 0] & 0x80) == 0
    mat[:, 0] ^= 0x80
    mat[negative] ^= 0xFF
    intg = prec - frac
    groups = ([intg % 9] if intg % 9 else []) + [9] * (intg // 9) + [9] * (frac // 9) + \
        ([frac % 9] if frac % 9 else [])
    acc = np.zeros(len(s), np.int64)
    bad = np.zeros(len(s), bool)
    pos = 0
    for digits in groups:
        nbytes = DIG2BYTES[digits] if digits < 9 else 4
        word = np.zeros(len(s), np.int64)
        for j in range(nbytes):
            word = (word << 8) | mat[:, pos + j].astype(np.int64)
        bad |= word >= 10**digits
        acc = acc * 10**digits + word
        pos += nbytes
    _check(bad)
    acc = np.where(negative, -acc, acc)
    return _decimal128_from_int(acc, np.where(acc < 0, -1, 0), col.arrow_type)


_EPOCH_MONTH = 1970 * 12


def _times(col: ColumnSchema, values: _Binary, s: np.ndarray, e: np.ndarray) -> tuple[pa.Array, int]:
    """Packed DATE/DATETIME/TIMESTAMP -> date32 / timestamp[us]; zero or impossible dates -> NULL."""
    packed = _compact_int(values, s, e, signed=False)
    ymdhms = packed >> np.uint64(24)
    ymd = (ymdhms >> np.uint64(17)).astype(np.int64)
    hms = (ymdhms & np.uint64(0x1FFFF)).astype(np.int64)
    usec = (packed & np.uint64(0xFFFFFF)).astype(np.int64)
    day, ym = ymd & 31, ymd >> 5
    year, month = ym // 13, ym % 13
    hour, minute, second = hms >> 12, (hms >> 6) & 63, hms & 63
    _check((year > 9999) | (hour > 23) | (minute > 59) | (second > 59) | (usec > 999_999))
    unreal = (year == 0) | (month == 0) | (day == 0)
    months = np.where(unreal, _EPOCH_MONTH, year * 12 + month - 1) - _EPOCH_MONTH
    first = months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    next_first = (months + 1).astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    unreal |= day > (next_first - first)
    days = first + day - 1
    mask = unreal  # NULL
    if col.kind == K.DATE:
        arr = pa.array(days.astype(np.int32), type=pa.date32(), mask=mask)
    else:
        micros = days * 86_400_000_000 + ((hour * 60 + minute) * 60 + second) * 1_000_000 + usec
        arr = pa.array(micros, type=pa.int64(), mask=mask).cast(col.arrow_type)
    return arr, int(unreal.sum())


def _enums(col: ColumnSchema, values: _Binary, s: np.ndarray, e: np.ndarray) -> pa.Array:
    idx = _compact_int(values, s, e, signed=False)
    _check(idx > np.uint64(len(col.elems)))
    return pa.array(["", *col.elems], type=pa.string()).take(pa.array(idx.astype(np.int64)))


def _cells(col: ColumnSchema, values: _Binary, s: np.ndarray, e: np.ndarray) -> tuple[pa.Array, int]:
    """Kinds without a numpy kernel (JSON, SET, TIME ...): decode each *distinct* cell once in Python.

    Cells are sliced into an Arrow binary array and dictionary-encoded, so repeated values (common in
    JSON/SET/TIME columns) cost one hash each; the decoded dictionary is expanded with ``take``.
    """
    cells = _slice(values, s, e, pa.binary())
    encoded = cells.dictionary_encode()
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    if col.kind == K.JSON and pa.types.is_binary(encoded.dictionary.type):
        texts, bad_mask = jsonvec.cells_to_text(encoded.dictionary)
        if bad_mask.any():
            raise _Bad(np.isin(indices, np.flatnonzero(bad_mask)))
        return texts.take(encoded.indices), 0
    decoded: list[Any] = []
    bad_codes: list[int] = []
    zero_codes: list[int] = []
    for code, cell in enumerate(encoded.dictionary.to_pylist()):
        try:
            v = from_stored(col, decode_cell(col, cell, 0, len(cell)))
        except CodecError:
            bad_codes.append(code)
            v = None
        if isinstance(v, ZeroDate):
            zero_codes.append(code)
            v = None
        decoded.append(v)
    if bad_codes:
        raise _Bad(np.isin(indices, bad_codes))
    zero = int(np.isin(indices, zero_codes).sum()) if zero_codes else 0
    return pa.array(decoded, type=col.arrow_type).take(encoded.indices), zero


def _decode_column(col: ColumnSchema, values: _Binary, s: np.ndarray, e: np.ndarray) -> tuple[pa.Array, int]:
    kind = col.kind
    if kind in (K.INT, K.YEAR):
        return _ints(col, _compact_int(values, s, e, signed=True)), 0
    if kind in (K.UINT, K.UINT64):
        return _ints(col, _compact_int(values, s, e, signed=False)), 0
    if kind in (K.FLOAT32, K.FLOAT64):
        return _floats(col, values, s, e), 0
    if kind in (K.TEXT, K.BINARY):
        return _strings(col, values, s, e), 0
    if kind in (K.DATE, K.DATETIME, K.TIMESTAMP):
        return _times(col, values, s, e)
    if kind == K.ENUM:
        return _enums(col, values, s, e), 0
    if kind == K.DECIMAL and col.decimal_precision[0] <= 18:
        return _decimals(col, values, s, e), 0
    return _cells(col, values, s, e)


# ---------------------------------------------------------------- batch

def _handle_array(col: ColumnSchema, handles: np.ndarray) -> pa.Array:
    if col.kind == K.UINT64:
        return _decimal128_from_int(handles, np.zeros(len(handles), np.int64), col.arrow_type)
    if col.kind == K.UINT:
        handles = handles.view(np.uint64)
    return _ints(col, handles)


def _common_handle_column(schema: TableSchema, col: ColumnSchema, handles: np.ndarray) -> pa.Array:
    """A clustered-PK column the value does not carry, from each row's key datums."""
    out = []
    bad = np.zeros(len(handles), bool)  # undecodable, or a zero date (left to the per-row path to count)
    for i, handle in enumerate(handles):
        try:
            v = from_stored(col, handle_stored(schema, handle, None)[col.id])
        except CodecError:
            v = None
        if v is None or isinstance(v, ZeroDate):
            bad[i] = True
        out.append(v)
    _check(bad)
    return pa.array(out, type=col.arrow_type)


def _decode_group(schema: TableSchema, values: _Binary, g: _Group, handles: np.ndarray,
                  fills: dict[int, Any]) -> tuple[pa.RecordBatch, DecodeStats]:
    n = len(g.rows)
    position = {cid: i for i, cid in enumerate(g.not_null)}
    nulls = set(g.nulls)
    arrays: list[pa.Array] = []
    zero_dates = filled = 0
    h = handles[g.rows]
    if schema.pk_kind == "rowid":
        arrays.append(pa.array(h, type=pa.int64()))
    handle_id = schema.handle_column.id if schema.handle_column is not None else None
    common_ids = {c.id for c, _ in schema.common_handle}
    for col in schema.columns:
        i = position.get(col.id)
        if i is not None:
            start = g.data_start + (g.ends[:, i - 1] if i else 0)
            arr, z = _decode_column(col, values, start, g.data_start + g.ends[:, i])
            zero_dates += z
        elif col.id in nulls:
            arr = pa.nulls(n, col.arrow_type)
        elif col.id == handle_id:
            arr = _handle_array(col, h)
        elif col.id in common_ids:
            arr = _common_handle_column(schema, col, h)
        else:
            fill = fills[col.id]
            if isinstance(fill, ZeroDate):
                zero_dates += n
                fill = None
            filled += n
            arr = pa.nulls(n, col.arrow_type) if fill is None else \
                pa.repeat(pa.scalar(fill, col.arrow_type), n)
        arrays.append(arr)
    counts = DecodeStats(rows=n, zero_dates=zero_dates, filled=filled)
    return pa.RecordBatch.from_arrays(arrays, schema=schema.arrow_schema), counts


def _rowwise(schema: TableSchema, keys: pa.Array, values: pa.Array, rows: np.ndarray, stats: DecodeStats,
             tz: dt.tzinfo | None) -> pa.RecordBatch:
    out = []
    for i in rows.tolist():
        k, v = keys[i].as_py(), values[i].as_py()
        if k is None or v is None:
            raise CodecError(f"batch row {i} has a null key or value", table_id=schema.table_id)
        out.append(decode_row(schema, k, v, stats=stats, tz=tz))
    return pa.RecordBatch.from_pylist(out, schema=schema.arrow_schema)


def decode_batch_rowwise(schema: TableSchema, batch: pa.RecordBatch, *, stats: DecodeStats | None = None,
                         tz: dt.tzinfo | None = None) -> pa.RecordBatch:
    """The per-row reference path of :func:`decode_batch` (same result, no vectorisation)."""
    local = DecodeStats()
    rows = np.arange(batch.num_rows)
    out = _rowwise(schema, batch.column("key"), batch.column("value"), rows, local, tz)
    local.fallback_rows = batch.num_rows
    if stats is not None:
        stats.add(local)
    return out.replace_schema_metadata({ZERO_DATES_METADATA_KEY: str(local.zero_dates).encode()})


def decode_batch(schema: TableSchema, batch: pa.RecordBatch, *, stats: DecodeStats | None = None,
                 tz: dt.tzinfo | None = None) -> pa.RecordBatch:
    """Decode ``batch`` (binary columns ``key`` and ``value``; others ignored) into ``schema.arrow_schema``.

    Rows keep their order. Zero dates turned into NULL are counted: the result's schema metadata carries
    ``tidelake.zero_dates`` (this batch), and ``stats`` (optional) accumulates rows, zero dates and how
    many rows took the per-row path. Raises CodecError (with table id, handle, offset) on the first bad row.
    """
    n = batch.num_rows
    keys_arr, values_arr = batch.column("key"), batch.column("value")
    local = DecodeStats()
    if n == 0:
        out = schema.arrow_schema.empty_table().to_batches()
        result = out[0] if out else pa.RecordBatch.from_pylist([], schema=schema.arrow_schema)
        return result.replace_schema_metadata({ZERO_DATES_METADATA_KEY: b"0"})
    keys, values = _Binary.of(keys_arr), _Binary.of(values_arr)
    no_nulls = ~(np.asarray(keys_arr.is_null()) | np.asarray(values_arr.is_null()))
    if schema.pk_kind in ("int", "rowid"):
        key_ok, handles = _int_handles(schema, keys)
    else:
        key_ok, handles = _common_handles(schema, keys_arr)
    groups, fallback = _v2_groups(values, key_ok & no_nulls)
    fills = {c.id: fill_value(c, tz) for c in schema.columns}
    pieces: list[tuple[np.ndarray, pa.RecordBatch]] = []
    while groups:
        g = groups.pop()
        try:
            rb, counts = _decode_group(schema, values, g, handles, fills)
        except _Bad as bad:
            fallback[g.rows[bad.mask]] = True
            keep = ~bad.mask
            if keep.any():
                groups.append(_Group(g.rows[keep], g.not_null, g.nulls, g.data_start[keep], g.ends[keep]))
            continue
        pieces.append((g.rows, rb))
        local.add(counts)
    fb_rows = np.flatnonzero(fallback)
    if len(fb_rows):
        pieces.append((fb_rows, _rowwise(schema, keys_arr, values_arr, fb_rows, local, tz)))
        local.fallback_rows += len(fb_rows)
    if len(pieces) == 1 and np.array_equal(pieces[0][0], np.arange(n)):
        out = pieces[0][1]
    else:
        order = np.concatenate([rows for rows, _ in pieces])
        table = pa.Table.from_batches([rb for _, rb in pieces], schema=schema.arrow_schema)
        table = table.take(pa.array(np.argsort(order, kind="stable")))
        out = table.combine_chunks().to_batches()[0]
    if stats is not None:
        stats.add(local)
    return out.replace_schema_metadata({ZERO_DATES_METADATA_KEY: str(local.zero_dates).encode()})
