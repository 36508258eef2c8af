"""Decode an Arrow batch of (key, value) rows into the table's Delta-typed Arrow columns.

Fast path, whatever the rows' layouts: :mod:`backfill.codec.cellmatrix` parses every row header of the
batch at once (v2 and v1) into ``(column, row)`` matrices of state (absent / NULL / value) and byte ranges.
Each schema column is then decoded over all rows that hold a value for it, with numpy over the Arrow
buffers: compact ints and v1 varints, floats, decimals of any precision (int64, 128-bit limbs, or text
for DECIMAL(p>38)), packed times, TIME and SET/BIT/ENUM, strings copied out by Arrow's ``take``; JSON goes
through :mod:`jsonvec`, one call per top-level shape (on distinct cells when the column repeats itself).
VECTOR cells are decoded once per distinct cell in Python. Clustered-PK keys are parsed the same way
(:mod:`backfill.codec.keycells`). Absent cells get the
handle (int PK), the key's datum (clustered PK) or the fill value (origin default / NULL / zero value);
NULL cells stay NULL. Rows the fast path cannot take (a check failed: malformed header, odd v1 datum,
out-of-range value, bad UTF-8, ...) go through :func:`backfill.codec.row.decode_row`, which is the
reference the fast path is tested against and the one place that raises CodecError with the row's
location. :func:`decode_keys` gives the primary-key columns of record keys (DELETE rows).
"""

from __future__ import annotations

import datetime as dt
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import jsonvec
from backfill.codec.cellmatrix import ABSENT, FORM_INT, VALUE, Binary, Cells, RowParser
from backfill.codec.errors import CodecError
from backfill.codec.keycells import KeyCells, KeyParser
from backfill.codec.keys import RECORD_KEY_LEN, decode_record_key, key_gives_value
from backfill.codec.mydecimal import DIG2BYTES, MAX_FRAC, MAX_PRECISION, decimal_bin_size
from backfill.codec.mytime import MAX_DURATION_NS
from backfill.codec.row import DecodeStats, decode_row, handle_stored, table_record_key
from backfill.codec.rowv2 import decode_cell
from backfill.codec.schema import ROWID_NAME, ColumnKind, ColumnSchema, TableSchema
from backfill.codec.values import ZeroDate, fill_value, from_stored, int_bounds

ZERO_DATES_METADATA_KEY = b"tidelake.zero_dates"
K = ColumnKind
_SIGN = np.uint64(1 << 63)


def _be_u64(mat: np.ndarray) -> np.ndarray:
    """(n, 8) uint8 big-endian -> uint64."""
    return np.ascontiguousarray(mat).view(">u8").ravel().astype(np.uint64)


# ---------------------------------------------------------------- keys


def _int_handles(schema: TableSchema, keys: Binary) -> tuple[np.ndarray, np.ndarray]:
    """(ok mask, int64 handle) for rows whose key is a record key of this table with an int handle."""
    n = len(keys.starts)
    ok = keys.lengths == RECORD_KEY_LEN
    mat = keys.gather(np.where(ok, keys.starts, 0), RECORD_KEY_LEN)
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
            rk = decode_record_key(key, common=True)
        except CodecError:
            continue
        if rk.table_id in physical and isinstance(rk.handle, tuple):
            ok[i] = True
            handles[i] = rk.handle
    return ok, handles


# ---------------------------------------------------------------- column kernels
# Each kernel takes the value cells of one column (s, e: absolute byte ranges; form: FORM_INT where a v1
# int datum was decoded into ``s`` already, or None) and returns (Arrow array, mask of zero dates or None).


class _Bad(Exception):
    """Some cells failed a fast-path check: their rows go through the per-row decoder."""

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = mask


def _check(bad: np.ndarray) -> None:
    if bad.any():
        raise _Bad(bad)


_COMPACT_MASK = np.zeros(10, np.uint64)  # by cell length (9: any longer one); 0: not a compact int
_COMPACT_MASK[[1, 2, 4, 8]] = [0xFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF]
_COMPACT_SHIFT = np.zeros(10, np.uint64)
_COMPACT_SHIFT[[1, 2, 4]] = [56, 48, 32]


def _compact_int(values: Binary, s: np.ndarray, e: np.ndarray, signed: bool) -> np.ndarray:
    """Row-v2 compact ints -> uint64 bit patterns (sign-extended when ``signed``)."""
    lens = np.clip(e - s, 0, 9)
    mask = _COMPACT_MASK[lens]
    _check(mask == 0)
    u = values.le_u64(s) & mask
    if not signed:
        return u
    shift = _COMPACT_SHIFT[lens]
    return ((u << shift).view(np.int64) >> shift.view(np.int64)).view(np.uint64)


def _patterns(
    values: Binary, s: np.ndarray, e: np.ndarray, form: np.ndarray | None, signed: bool
) -> np.ndarray:
    """64-bit patterns of int-stored cells, v2 (compact) and v1 (already decoded) alike."""
    if form is None:
        return _compact_int(values, s, e, signed)
    v1 = form == FORM_INT
    if not v1.any():
        return _compact_int(values, s, e, signed)
    out = s.view(np.uint64).copy()
    v2 = ~v1
    if v2.any():
        try:
            out[v2] = _compact_int(values, s[v2], e[v2], signed)
        except _Bad as bad:
            mask = np.zeros(len(s), bool)
            mask[np.flatnonzero(v2)[bad.mask]] = True
            raise _Bad(mask) from None
    return out


def _ints(col: ColumnSchema, u: np.ndarray) -> pa.Array:
    """Signed (patterns read as int64) or unsigned (uint64) ints -> the column's Arrow type."""
    if col.kind == K.UINT64:
        return _decimal128_from_int(u.view(np.int64), np.zeros(len(u), np.int64), col.arrow_type)
    lo, hi = int_bounds(col)
    dtype = col.arrow_type.to_pandas_dtype()
    if col.kind == K.UINT:
        _check(u > np.uint64(hi))
        return pa.array(u.view(np.int64).astype(dtype), type=col.arrow_type)
    v = u.view(np.int64)
    if (lo, hi) == (-(1 << 63), (1 << 63) - 1):
        return pa.array(v, type=col.arrow_type)
    narrow = v.astype(dtype)
    if (lo, hi) == (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)):
        _check(narrow != v)  # exactly the target type's range: it did not survive the cast
    else:
        _check((v < lo) | (v > hi))  # MEDIUMINT, YEAR
    return pa.array(narrow, type=col.arrow_type)


def _floats(col: ColumnSchema, values: Binary, s: np.ndarray, e: np.ndarray) -> pa.Array:
    _check(e - s != 8)
    return _float_column(col, values.be_u64(s))


def _float_column(col: ColumnSchema, u: np.ndarray) -> pa.Array:
    """Memcomparable float64 bit patterns -> the column's float type."""
    f = np.where(u & _SIGN, u & ~_SIGN, ~u).view(np.float64)
    if col.kind == K.FLOAT32:
        with np.errstate(over="ignore"):  # beyond FLOAT's range: infinite, as Go's float32(f) gives
            f = f.astype(np.float32)
    return pa.array(f, type=col.arrow_type)


def _slice(values: Binary, s: np.ndarray, e: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A string/binary Arrow array of the byte ranges ``[s, e)`` (one gather over the value buffer)."""
    return _gather_strings(values.data, s, e - s, typ)


def _gather_strings(data: np.ndarray, s: np.ndarray, lens: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A string/binary array of ``data[s[i] : s[i] + lens[i]]``. Ranges in increasing, non-overlapping
    order (cells of one column, row by row) are laid over ``data`` as the even elements of an array whose
    odd elements are the gaps between them, and Arrow's ``take`` copies them out."""
    n = len(s)
    text = pa.types.is_string(typ) or pa.types.is_large_string(typ)
    if n == 0:
        return pa.array([], pa.string() if text else pa.binary())
    e = s + lens
    large = int(e[-1]) >= 2**31 - 1 or int(lens.sum()) >= 2**31 - 1
    if n > 1 and not (s[1:] >= e[:-1]).all():
        return _gather_strings_copy(data, s, lens, text, large)
    spread = np.empty(2 * n + 1, np.int64 if large else np.int32)
    spread[0:-1:2] = s
    spread[1::2] = e
    spread[-1] = e[-1]
    binary = pa.large_binary() if large else pa.binary()
    arr = pa.Array.from_buffers(binary, 2 * n, [None, pa.py_buffer(spread), pa.py_buffer(data)])
    out = arr.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    if large and int(lens.sum()) < 2**31 - 1:  # only the source was past 2 GiB
        out = out.cast(pa.binary())
        binary = pa.binary()
    return out.view((pa.large_string() if binary == pa.large_binary() else pa.string()) if text else binary)


def _gather_strings_copy(
    data: np.ndarray, s: np.ndarray, lens: np.ndarray, text: bool, large: bool
) -> pa.Array:
    offsets = np.zeros(len(s) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        # source index of every output byte: +1 within a range, a jump at each range start (one cumsum)
        nonempty = lens > 0
        ss, ls, os_ = s[nonempty], lens[nonempty], offsets[:-1][nonempty]
        step = np.ones(total, np.int64)
        step[os_[1:]] = ss[1:] - ss[:-1] - ls[:-1] + 1
        step[0] = ss[0]
        out = data[np.cumsum(step)]
    else:
        out = np.zeros(0, np.uint8)
    if large:
        typ = pa.large_string() if text else pa.large_binary()
        offsets_buf = pa.py_buffer(offsets)
    else:
        typ = pa.string() if text else pa.binary()
        offsets_buf = pa.py_buffer(offsets.astype(np.int32))
    return pa.Array.from_buffers(typ, len(s), [None, offsets_buf, pa.py_buffer(out)])


def _char_rows(mat: np.ndarray, start: np.ndarray) -> pa.Array:
    """Strings ``mat[i, start[i]:]`` of an (n, w) uint8 character matrix."""
    n, w = mat.shape
    return _gather_strings(mat.ravel(), np.arange(n, dtype=np.int64) * w + start, w - start, pa.string())


def _strings(col: ColumnSchema, values: Binary, s: np.ndarray, e: np.ndarray) -> pa.Array:
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


def _decimal_groups(prec: int, frac: int) -> list[int]:
    intg = prec - frac
    return (
        ([intg % 9] if intg % 9 else [])
        + [9] * (intg // 9)
        + [9] * (frac // 9)
        + ([frac % 9] if frac % 9 else [])
    )


_M32 = np.uint64(0xFFFFFFFF)


def _decimals(col: ColumnSchema, values: Binary, s: np.ndarray, e: np.ndarray) -> pa.Array:
    """DECIMAL cells stored with the column's own (precision, scale): unpack the base-10^9 words, then
    int64 (p <= 18), 128-bit two's complement from 32-bit limbs (p <= 38) or text (p > 38)."""
    prec, frac = col.decimal_precision
    n = len(s)
    if not (0 < prec <= MAX_PRECISION and 0 <= frac <= MAX_FRAC and frac <= prec):
        raise _Bad(np.ones(n, bool))
    size = decimal_bin_size(prec, frac)
    head = values.gather(s, 2)
    _check((e - s != size + 2) | (head[:, 0] != prec) | (head[:, 1] != frac))
    mat = values.gather(s + 2, size)
    negative = (mat[:, 0] & 0x80) == 0
    mat ^= (negative.astype(np.uint8) * np.uint8(0xFF))[:, None]  # negative: every byte inverted
    mat[:, 0] ^= 0x80
    words: list[tuple[int, np.ndarray]] = []
    bad = np.zeros(n, bool)
    pos = 0
    for digits in _decimal_groups(prec, frac):
        nbytes = DIG2BYTES[digits] if digits < 9 else 4
        word: np.ndarray
        if nbytes == 4:
            word = np.ascontiguousarray(mat[:, pos : pos + 4]).view(">u4").ravel().astype(np.int64)
        else:
            word = mat[:, pos].astype(np.int64)
            for j in range(1, nbytes):
                word = (word << 8) | mat[:, pos + j]
        bad |= word >= 10**digits
        words.append((digits, word))
        pos += nbytes
    _check(bad)
    if prec <= 18:
        acc: np.ndarray = np.zeros(n, np.int64)
        for digits, word in words:
            acc = acc * 10**digits + word
        acc = np.where(negative, -acc, acc)
        return _decimal128_from_int(acc, np.where(acc < 0, -1, 0), col.arrow_type)
    if col.kind == K.DECIMAL:
        limbs: list[np.ndarray] = [np.zeros(n, np.uint64) for _ in range(4)]
        for digits, word in words:
            carry = word.astype(np.uint64)
            mult = np.uint64(10**digits)
            for i in range(4):
                t = limbs[i] * mult + carry
                limbs[i] = t & _M32
                carry = t >> np.uint64(32)
        if negative.any():  # two's complement: invert, add one
            carry = negative.astype(np.uint64)
            for i in range(4):
                t = np.where(negative, limbs[i] ^ _M32, limbs[i]) + carry
                limbs[i] = t & _M32
                carry = t >> np.uint64(32)
        lo = (limbs[0] | (limbs[1] << np.uint64(32))).view(np.int64)
        hi = (limbs[2] | (limbs[3] << np.uint64(32))).view(np.int64)
        return _decimal128_from_int(lo, hi, col.arrow_type)
    return _decimal_text(prec, frac, words, negative)


_LUT4 = np.array([f"{i:04d}".encode() for i in range(10_000)]).view(np.uint8).reshape(10_000, 4)
_LUT4_WORDS = np.ascontiguousarray(_LUT4).view("<u4").ravel()


def _digits(word: np.ndarray, count: int) -> np.ndarray:
    """(n, count) ASCII digits of each word (0 <= word < 10**12), zero-padded to ``count`` <= 12."""
    word = word.astype(np.int64, copy=False)
    out = np.empty((len(word), 3), np.uint32)
    out[:, 0] = _LUT4_WORDS[word // 100_000_000]
    out[:, 1] = _LUT4_WORDS[word // 10_000 % 10_000]
    out[:, 2] = _LUT4_WORDS[word % 10_000]
    return out.view(np.uint8).reshape(len(word), 12)[:, 12 - count :]


_POW10 = 10 ** np.arange(10, dtype=np.int64)


def _decimal_text(
    prec: int, frac: int, words: list[tuple[int, np.ndarray]], negative: np.ndarray
) -> pa.Array:
    """``format(Decimal, "f")`` of the exact values: no leading zeros, ``0.xx`` below one, ``-`` if not 0."""
    n = len(negative)
    intg = prec - frac
    int_w = max(intg, 1)
    width = 1 + int_w + (1 + frac if frac else 0)
    mat = np.full((n, width), ord("0"), np.uint8)
    if frac:
        mat[:, 1 + int_w] = ord(".")
    first: np.ndarray = np.full(n, int_w - 1, np.int64)  # first integer digit printed (relative to column 1)
    nonzero = np.zeros(n, bool)
    offset = 0  # digit position of the group
    int_groups = []
    for digits, word in words:
        column = 1 + offset if offset < intg else 2 + int_w + offset - intg
        mat[:, column : column + digits] = _digits(word, digits)
        nonzero |= word != 0
        if offset < intg:
            int_groups.append((offset, digits, word))
        offset += digits
    for offset, digits, word in reversed(int_groups):  # the leftmost non-zero group wins
        shown = np.searchsorted(_POW10, word, side="right")  # its digit count
        first = np.where(word != 0, offset + digits - shown, first)
    start = 1 + first
    sign = negative & nonzero
    start = np.where(sign, start - 1, start)
    mat[np.flatnonzero(sign), start[sign]] = ord("-")
    return _char_rows(mat, start)


_EPOCH_MONTH = 1970 * 12


def _times(col: ColumnSchema, packed: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Packed DATE/DATETIME/TIMESTAMP -> date32 / timestamp[us]; zero or impossible dates -> NULL."""
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
    if col.kind == K.DATE:
        arr = pa.array(days.astype(np.int32), type=pa.date32(), mask=unreal)
    else:
        micros = days * 86_400_000_000 + ((hour * 60 + minute) * 60 + second) * 1_000_000 + usec
        arr = pa.array(micros, type=pa.int64(), mask=unreal).cast(col.arrow_type)
    return arr, unreal


def _durations(col: ColumnSchema, ns: np.ndarray) -> pa.Array:
    """TIME nanoseconds -> ``[-]HH:MM:SS[.f]`` (hours grow to 3 digits; fsp digits, truncated)."""
    _check((ns < -MAX_DURATION_NS) | (ns > MAX_DURATION_NS))
    negative = ns < 0
    secs, frac_ns = np.divmod(np.abs(ns), 1_000_000_000)
    hours = secs // 3600
    fsp = col.fsp
    width = 10 + (1 + fsp if fsp else 0)  # sign, 3 hour digits, ":MM:SS", ".f"
    mat = np.empty((len(ns), width), np.uint8)
    mat[:, 0] = ord("-")
    mat[:, 1:4] = _digits(hours, 3)
    mat[:, 4] = mat[:, 7] = ord(":")
    mat[:, 5:7] = _digits(secs // 60 % 60, 2)
    mat[:, 8:10] = _digits(secs % 60, 2)
    if fsp:
        mat[:, 10] = ord(".")
        mat[:, 11:] = _digits(frac_ns // 10 ** (9 - fsp), fsp)
    start = np.where(hours >= 100, 1, 2)
    start = np.where(negative, start - 1, start)
    mat[np.flatnonzero(negative), start[negative]] = ord("-")
    return _char_rows(mat, start)


def _enums(col: ColumnSchema, idx: np.ndarray) -> pa.Array:
    _check(idx > np.uint64(len(col.elems)))
    return pa.array(["", *col.elems], type=pa.string()).take(pa.array(idx.astype(np.int64)))


def _sets(col: ColumnSchema, bits: np.ndarray) -> pa.Array:
    width = len(col.elems)
    if width < 64:
        _check(bits >> np.uint64(width) != 0)
    uniq, inverse = np.unique(bits, return_inverse=True)
    names = [",".join(e for i, e in enumerate(col.elems) if b >> i & 1) for b in uniq.tolist()]
    return pa.array(names, pa.string()).take(pa.array(inverse.ravel().astype(np.int64)))


def _bits(col: ColumnSchema, v: np.ndarray) -> pa.Array:
    width = (max(col.flen, 1) + 7) // 8
    if width > 8:
        raise _Bad(np.ones(len(v), bool))
    if width < 8:
        _check(v >> np.uint64(8 * width) != 0)
    mat = np.ascontiguousarray(v.astype(">u8").view(np.uint8).reshape(len(v), 8)[:, 8 - width :])
    offsets = (np.arange(len(v) + 1) * width).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), len(v), [None, pa.py_buffer(offsets), pa.py_buffer(mat)])


def _int_column(col: ColumnSchema, u: np.ndarray) -> tuple[pa.Array, np.ndarray | None]:
    kind = col.kind
    if kind in (K.INT, K.YEAR, K.UINT, K.UINT64):
        return _ints(col, u), None
    if kind in (K.DATE, K.DATETIME, K.TIMESTAMP):
        return _times(col, u)
    if kind == K.ENUM:
        return _enums(col, u), None
    if kind == K.SET:
        return _sets(col, u), None
    if kind == K.BIT:
        return _bits(col, u), None
    if kind == K.TIME:
        return _durations(col, u.view(np.int64)), None
    raise AssertionError(kind)


_INT_KINDS = frozenset(
    {K.INT, K.YEAR, K.UINT, K.UINT64, K.DATE, K.DATETIME, K.TIMESTAMP, K.ENUM, K.SET, K.BIT, K.TIME}
)
_SIGNED_KINDS = frozenset({K.INT, K.YEAR, K.TIME})


def _row_hash(mat: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of a uint8 matrix (equal rows, equal hashes)."""
    n, w = mat.shape
    pad = (-w) % 8
    if pad:
        mat = np.concatenate([mat, np.zeros((n, pad), np.uint8)], axis=1)
    words = np.ascontiguousarray(mat).view("<u8")
    h = np.full(n, 0xCBF29CE484222325, np.uint64)
    for j in range(words.shape[1]):
        h = (h ^ words[:, j]) * np.uint64(0x100000001B3)
        h ^= h >> np.uint64(29)
    return h


def _json_shapes(src: Binary, starts: np.ndarray, lens: np.ndarray) -> list[np.ndarray]:
    """Split JSON cells (``src`` bytes at ``starts``/``lens``) by top-level shape (type, member count, key
    entries, member types), so :func:`jsonvec.cells_to_text` sees one shape per call. Grouping only
    speeds things up: a hash clash merely hands jsonvec two shapes at once."""
    n = len(starts)
    if n < 64:
        return [np.arange(n)]
    code = np.where(lens >= 1, src.byte(starts), -1)
    container = (lens >= 9) & ((code == 0x01) | (code == 0x03))
    count = np.where(container, src.le_words(starts + 1, 1, 4).ravel(), -1)
    key = ((code << 32) ^ count).astype(np.uint64)
    for c in (0x01, 0x03):
        kinds = container & (code == c)
        for k in np.unique(count[kinds]).tolist():
            if k == 0 or k > 64:
                continue
            rows = np.flatnonzero(kinds & (count == k))
            body = starts[rows] + 9
            # objects: key entries (offset, length) and the members' type bytes; arrays: the type bytes
            sig = (
                src.gather(body, 11 * k)[:, np.r_[0 : 6 * k, 6 * k : 11 * k : 5]]
                if c == 0x01
                else src.gather(body, 5 * k)[:, ::5]
            )
            if not (sig == sig[0]).all():
                key[rows] ^= _row_hash(sig)
    if (key == key[0]).all():
        return [np.arange(n)]
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    return np.split(order, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1)


_JSON_SAMPLE = 1024


def _json(col: ColumnSchema, values: Binary, s: np.ndarray, e: np.ndarray) -> tuple[pa.Array, None]:
    """JSON cells -> canonical text through jsonvec, one call per top-level shape. Distinct cells only when
    a sample of the column shows repeats; when nearly every document differs (ids, timestamps inside),
    hashing them all would cost more than it saves."""
    n = len(s)
    if int((e - s).sum()) >= 2**31 - 1:  # over 2 GiB of JSON in one batch: cell by cell
        return _cells(col, values, s, e)[0], None
    if n > 2 * _JSON_SAMPLE:
        sample = _slice(values, s[:_JSON_SAMPLE], e[:_JSON_SAMPLE], pa.binary())
        dedupe = len(pc.unique(sample)) < 0.8 * _JSON_SAMPLE
    else:
        dedupe = True
    if dedupe:
        encoded = _slice(values, s, e, pa.binary()).dictionary_encode()
        dictionary = encoded.dictionary
        src = Binary.of(dictionary)
        texts, bad = _json_groups(src, src.starts, src.lengths, dictionary)
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        if bad.any():
            raise _Bad(bad[indices])
        return texts.take(encoded.indices), None
    texts, bad = _json_groups(values, s, e - s, None)
    _check(bad)
    return texts, None


def _json_groups(
    src: Binary, starts: np.ndarray, lens: np.ndarray, cells: pa.Array | None
) -> tuple[pa.Array, np.ndarray]:
    """Texts (and a bad mask) of the JSON cells ``src[starts:starts+lens]`` (``cells``: the same as an
    Arrow binary array, if there is one)."""
    pieces: list[tuple[np.ndarray, pa.Array]] = []
    bad = np.zeros(len(starts), bool)
    groups = _json_shapes(src, starts, lens)
    for group in groups:
        if cells is not None:
            part = cells if len(groups) == 1 else cells.take(pa.array(group))
        else:
            part = _gather_strings(src.data, starts[group], lens[group], pa.binary())
        texts, group_bad = jsonvec.cells_to_text(part)
        pieces.append((group, texts))
        bad[group[group_bad]] = True
    if len(pieces) == 1:
        return pieces[0][1], bad
    order = np.concatenate([g for g, _ in pieces])
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    return pa.concat_arrays([t for _, t in pieces]).take(pa.array(position)), bad


def _cells(col: ColumnSchema, values: Binary, s: np.ndarray, e: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Kinds without a numpy kernel (VECTOR): decode each *distinct* cell once in Python."""
    cells = _slice(values, s, e, pa.binary())
    encoded = cells.dictionary_encode()
    indices = encoded.indices.to_numpy(zero_copy_only=False)
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
    return pa.array(decoded, type=col.arrow_type).take(encoded.indices), np.isin(indices, zero_codes)


def _decode_column(
    col: ColumnSchema, values: Binary, s: np.ndarray, e: np.ndarray, form: np.ndarray | None = None
) -> tuple[pa.Array, np.ndarray | None]:
    kind = col.kind
    if not len(s):
        return pa.array([], col.arrow_type), None
    if kind in _INT_KINDS:
        return _int_column(col, _patterns(values, s, e, form, kind in _SIGNED_KINDS))
    if kind in (K.FLOAT32, K.FLOAT64):
        return _floats(col, values, s, e), None
    if kind in (K.TEXT, K.BINARY):
        return _strings(col, values, s, e), None
    if kind in (K.DECIMAL, K.DECIMAL_STR):
        return _decimals(col, values, s, e), None
    if kind == K.JSON:
        return _json(col, values, s, e)
    return _cells(col, values, s, e)


# ---------------------------------------------------------------- batch


class _FillError:
    """A column's fill value cannot be computed: rows that need it go to the per-row path (it raises)."""


_NO_FILL = _FillError()


class _Plan:
    """What decode_batch derives from a schema once (per server zone)."""

    def __init__(self, schema: TableSchema, tz: dt.tzinfo | None) -> None:
        self.parser = RowParser(schema.columns)
        self.tz = tz
        self.handle_id = schema.handle_column.id if schema.handle_column is not None else None
        self.common_ids = {c.id for c, _ in schema.common_handle}
        # clustered key columns whose key datum is a collation sort key: only the value gives them
        self.sort_key_ids = {c.id for c, _ in schema.common_handle if not key_gives_value(c)}
        self._fills: dict[int, Any] = {}
        self.fill_slots = np.array(
            [c.id != self.handle_id and c.id not in self.common_ids for c in schema.columns] + [False]
        )  # (+ the parser's spare column)
        self.key_parser = KeyParser(schema) if schema.pk_kind == "common" else None
        self.key_index = {c.id: k for k, (c, _) in enumerate(schema.common_handle)}

    def fill(self, col: ColumnSchema) -> Any:
        if col.id not in self._fills:
            try:
                self._fills[col.id] = fill_value(col, self.tz)
            except CodecError:
                self._fills[col.id] = _NO_FILL
        return self._fills[col.id]


_PLANS: weakref.WeakKeyDictionary[TableSchema, dict[Any, _Plan]] = weakref.WeakKeyDictionary()


def _plan(schema: TableSchema, tz: dt.tzinfo | None) -> _Plan:
    per_tz = _PLANS.setdefault(schema, {})
    plan = per_tz.get(tz)
    if plan is None:
        plan = per_tz[tz] = _Plan(schema, tz)
    return plan


def _handle_array(col: ColumnSchema, handles: np.ndarray) -> pa.Array:
    if col.kind == K.UINT64:
        return _decimal128_from_int(handles, np.zeros(len(handles), np.int64), col.arrow_type)
    return _ints(col, handles.view(np.uint64))


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


def _key_column(
    col: ColumnSchema, kc: KeyCells, k: int, rows: np.ndarray
) -> tuple[pa.Array, np.ndarray | None]:
    """PK column ``col`` (datum ``k`` of the key) for ``rows``, from the parsed keys."""
    if not len(rows):
        return pa.array([], col.arrow_type), None
    if col.kind in _INT_KINDS:
        return _int_column(col, kc.datums[k].pattern[rows])
    if col.kind in (K.FLOAT32, K.FLOAT64):
        return _float_column(col, kc.datums[k].pattern[rows]), None
    arr = kc.strings(k, rows, pa.string() if col.kind == K.TEXT else pa.binary())
    if col.kind == K.TEXT:
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid:
            raise _Bad(np.ones(len(rows), bool)) from None
    return arr, None


def _attempt(rows: np.ndarray, ok: np.ndarray, fn: Callable[[np.ndarray], Any]) -> tuple[np.ndarray, Any]:
    """``fn(rows)``, dropping rows a check rejects (cleared in ``ok``) until it succeeds."""
    while True:
        try:
            return rows, fn(rows)
        except _Bad as bad:
            ok[rows[bad.mask]] = False
            rows = rows[~bad.mask]


def _column(
    schema: TableSchema,
    plan: _Plan,
    slot: int,
    col: ColumnSchema,
    cells: Cells,
    values: Binary,
    handles: np.ndarray,
    kc: KeyCells | None,
    zero: np.ndarray,
) -> pa.Array:
    n = len(cells.ok)
    state = cells.state[slot]
    ok = cells.ok
    pieces: list[tuple[np.ndarray, pa.Array]] = []
    fill_piece: tuple[np.ndarray, pa.Array] | None = None
    present = np.flatnonzero((state == VALUE) & ok)
    if len(present):

        def decode(rows: np.ndarray) -> tuple[pa.Array, np.ndarray | None]:
            return _decode_column(col, values, *cells.values_of(slot, rows))

        present, (arr, zero_mask) = _attempt(present, ok, decode)
        if zero_mask is not None:
            zero[present[zero_mask]] += 1
        if len(present) == n:
            return arr
        pieces.append((present, arr))
    absent = state == ABSENT
    if absent.any():
        rows = np.flatnonzero(absent & ok)
        if col.id == plan.handle_id:
            rows, arr = _attempt(rows, ok, lambda r: _handle_array(col, handles[r]))
            pieces.append((rows, arr))
        elif col.id in plan.sort_key_ids:
            ok[rows] = False  # the per-row path names the missing column
        elif col.id in plan.common_ids and kc is not None:
            k = plan.key_index[col.id]
            rows, (arr, zero_mask) = _attempt(rows, ok, lambda r: _key_column(col, kc, k, r))
            if zero_mask is not None:
                zero[rows[zero_mask]] += 1
            pieces.append((rows, arr))
        elif col.id in plan.common_ids:
            rows, arr = _attempt(rows, ok, lambda r: _common_handle_column(schema, col, handles[r]))
            pieces.append((rows, arr))
        else:
            fill = plan.fill(col)
            if fill is _NO_FILL:
                ok[rows] = False
            elif isinstance(fill, ZeroDate):
                zero[rows] += 1
            elif fill is not None:
                fill_piece = (rows, pa.array([fill], col.arrow_type))
    return _assemble(n, pieces, col.arrow_type, fill_piece)


def _assemble(
    n: int,
    pieces: list[tuple[np.ndarray, pa.Array]],
    typ: pa.DataType,
    fill: tuple[np.ndarray, pa.Array] | None = None,
) -> pa.Array:
    """A column of ``n`` rows: each piece's rows from its array, ``fill``'s rows from its one-element
    array, NULL elsewhere."""
    if fill is not None:
        pieces = [*pieces, fill]
    if not pieces:
        return pa.nulls(n, typ)
    idx = np.full(n, -1, np.int64)
    offset = 0
    for rows, arr in pieces:
        idx[rows] = offset if (fill is not None and arr is fill[1]) else offset + np.arange(len(rows))
        offset += len(arr)
    source = pieces[0][1] if len(pieces) == 1 else pa.concat_arrays([a for _, a in pieces])
    missing = idx < 0
    if not missing.any():
        return source.take(pa.array(idx))
    return source.take(pa.array(idx, mask=missing))


def _rowwise(
    schema: TableSchema,
    keys: pa.Array,
    values: pa.Array,
    rows: np.ndarray,
    stats: DecodeStats,
    tz: dt.tzinfo | None,
    first: int = 0,
) -> pa.RecordBatch:
    out = []
    for i in rows.tolist():
        k, v = keys[i].as_py(), values[i].as_py()
        if k is None or v is None:
            raise CodecError(f"batch row {first + i} has a null key or value", table_id=schema.table_id)
        out.append(decode_row(schema, k, v, stats=stats, tz=tz))
    return pa.RecordBatch.from_pylist(out, schema=schema.arrow_schema)


def decode_batch_rowwise(
    schema: TableSchema,
    batch: pa.RecordBatch,
    *,
    stats: DecodeStats | None = None,
    tz: dt.tzinfo | None = None,
) -> pa.RecordBatch:
    """The per-row reference path of :func:`decode_batch` (same result, no vectorisation)."""
    local = DecodeStats()
    rows = np.arange(batch.num_rows)
    out = _rowwise(schema, batch.column("key"), batch.column("value"), rows, local, tz)
    local.fallback_rows = batch.num_rows
    if stats is not None:
        stats.add(local)
    return out.replace_schema_metadata({ZERO_DATES_METADATA_KEY: str(local.zero_dates).encode()})


def _empty(schema: TableSchema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([], f.type) for f in schema.arrow_schema], schema=schema.arrow_schema
    )


def decode_batch(
    schema: TableSchema,
    batch: pa.RecordBatch,
    *,
    stats: DecodeStats | None = None,
    tz: dt.tzinfo | None = None,
) -> pa.RecordBatch:
    """Decode ``batch`` (binary columns ``key`` and ``value``; others ignored) into ``schema.arrow_schema``.

    Rows keep their order. Zero dates turned into NULL are counted: the result's schema metadata carries
    ``tidelake.zero_dates`` (this batch), and ``stats`` (optional) accumulates rows, zero dates and how
    many rows took the per-row path. Raises CodecError (with table id, handle, offset) on the first bad row.
    """
    n = batch.num_rows
    if n == 0:
        return _empty(schema).replace_schema_metadata({ZERO_DATES_METADATA_KEY: b"0"})
    step = max(_MIN_CHUNK_ROWS, _CELL_BUDGET // (len(schema.columns) + 1))
    if n <= step:
        local = DecodeStats()
        out = _decode_chunk(schema, batch.select(["key", "value"]), local, tz, 0)
    else:  # wide tables: the cell matrices stay bounded
        local = DecodeStats()
        parts = [
            _decode_chunk(schema, batch.select(["key", "value"]).slice(i, step), local, tz, i)
            for i in range(0, n, step)
        ]
        out = pa.Table.from_batches(parts, schema=schema.arrow_schema).combine_chunks().to_batches()[0]
    if stats is not None:
        stats.add(local)
    return out.replace_schema_metadata({ZERO_DATES_METADATA_KEY: str(local.zero_dates).encode()})


_CELL_BUDGET = 8_000_000  # (rows x columns) cells parsed at once
_MIN_CHUNK_ROWS = 1024


def _decode_chunk(
    schema: TableSchema, batch: pa.RecordBatch, local: DecodeStats, tz: dt.tzinfo | None, first: int
) -> pa.RecordBatch:
    """decode_batch of rows ``first ..`` of a batch (stats added to ``local``)."""
    n = batch.num_rows
    keys_arr, values_arr = batch.column("key"), batch.column("value")
    plan = _plan(schema, tz)
    keys, values = Binary.of(keys_arr), Binary.of(values_arr)
    no_nulls = ~(np.asarray(keys_arr.is_null()) | np.asarray(values_arr.is_null()))
    kc = None
    if schema.pk_kind in ("int", "rowid"):
        key_ok, handles = _int_handles(schema, keys)
    elif plan.key_parser is not None and plan.key_parser.supported:
        kc = plan.key_parser.parse(keys, no_nulls)
        key_ok, handles = kc.ok, np.zeros(0, np.int64)
    else:
        key_ok, handles = _common_handles(schema, keys_arr)
    cells = plan.parser.parse(values, key_ok & no_nulls).by_column()
    zero = np.zeros(n, np.int64)
    arrays: list[pa.Array] = []
    if schema.pk_kind == "rowid":
        arrays.append(pa.array(handles, type=pa.int64()))
    for slot, col in enumerate(schema.columns):
        arrays.append(_column(schema, plan, slot, col, cells, values, handles, kc, zero))
    ok = cells.ok
    out = pa.RecordBatch.from_arrays(arrays, schema=schema.arrow_schema)
    n_ok = int(np.count_nonzero(ok))
    local.rows += n_ok
    local.zero_dates += int(zero[ok].sum())
    if plan.fill_slots.any():
        absent = cells.state[plan.fill_slots] == ABSENT
        local.filled += int(np.count_nonzero(absent[:, ok])) if n_ok < n else int(np.count_nonzero(absent))
    if n_ok < n:
        fb_rows = np.flatnonzero(~ok)
        fb = _rowwise(schema, keys_arr, values_arr, fb_rows, local, tz, first)
        local.fallback_rows += len(fb_rows)
        position = np.arange(n, dtype=np.int64)
        position[fb_rows] = n + np.arange(len(fb_rows))
        table = pa.Table.from_batches([out, fb], schema=schema.arrow_schema)
        out = table.take(pa.array(position)).combine_chunks().to_batches()[0]
    return out


# ---------------------------------------------------------------- keys only (DELETE rows)


def _key_row(schema: TableSchema, key: bytes | None) -> dict[str, Any]:
    """Primary-key values of one record key (the reference for :func:`decode_keys`)."""
    if key is None:
        raise CodecError("null record key", table_id=schema.table_id)
    record = table_record_key(schema, key)
    if schema.pk_kind == "rowid":
        if not isinstance(record.handle, int):
            raise CodecError(
                "rowid table needs an int handle", table_id=record.table_id, handle=record.handle
            )
        return {ROWID_NAME: record.handle}
    stored = handle_stored(schema, record.handle, record.table_id)
    out = {}
    for cid, value in stored.items():
        col = schema.by_id[cid]
        try:
            v = from_stored(col, value)
        except CodecError as e:
            raise e.at(table_id=record.table_id, handle=record.handle, column=col.name) from None
        out[col.name] = None if isinstance(v, ZeroDate) else v
    return out


def decode_keys(schema: TableSchema, keys: pa.Array | pa.ChunkedArray) -> pa.RecordBatch:
    """The primary-key columns of record keys: ``_tidb_rowid`` (rowid tables), the int PK column, or the
    clustered PK columns (in PK order; a prefix-indexed column holds the prefix the key has), typed as in
    ``schema.arrow_schema``: what a DELETE row carries. Int handles, rowids and clustered PKs of int,
    float and string columns are decoded vectorised; other keys one by one. Raises CodecError on a key
    that is not a record key of this table (or whose handle does not fit the PK column)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    for col, _ in schema.common_handle:
        if not key_gives_value(col):
            raise CodecError(
                f"the clustered key holds {col.collate} sort keys of {col.name!r}, not its values: "
                "a DELETE without the row's old value cannot name the row",
                table_id=schema.table_id,
                column=col.name,
            )
    target = pa.schema([schema.arrow_schema.field(name) for name in schema.pk_columns])
    n = len(keys)
    arrays = _keys_vectorised(schema, keys) if n else None
    if arrays is not None:
        return pa.RecordBatch.from_arrays(arrays, schema=target)
    # the reference path: one key at a time (raises on the first bad key)
    return pa.RecordBatch.from_pylist([_key_row(schema, key) for key in keys.to_pylist()], schema=target)


def _keys_vectorised(schema: TableSchema, keys: pa.Array) -> list[pa.Array] | None:
    """PK columns of all keys, or None if any key needs the per-row path."""
    n = len(keys)
    not_null = ~np.asarray(keys.is_null())
    everything = np.arange(n)
    if schema.pk_kind in ("int", "rowid"):
        ok, handles = _int_handles(schema, Binary.of(keys))
        ok &= not_null
        if schema.pk_kind == "rowid":
            arrays = [pa.array(handles, pa.int64())]
        else:
            handle_col = schema.handle_column
            assert handle_col is not None
            arrays = [_attempt(everything, ok, lambda r: _handle_array(handle_col, handles[r]))[1]]
        return arrays if ok.all() else None
    plan = _plan(schema, None)
    if plan.key_parser is None or not plan.key_parser.supported:
        return None
    kc = plan.key_parser.parse(Binary.of(keys), not_null)
    ok = kc.ok
    arrays = []
    for k, (col, _) in enumerate(schema.common_handle):
        _, (arr, _zero) = _attempt(everything, ok, partial(_key_column, col, kc, k))
        arrays.append(arr)  # zero dates are NULL already, as decode_row gives them
    return arrays if ok.all() else None
