"""Clustered primary keys of a batch's record keys, parsed for all keys at once.

A common-handle record key is ``t{table}_r`` followed by the PK columns' key datums (``EncodeKey``,
comparable form): 8-byte ints/uints/floats, memcomparable bytes (8-byte groups, each followed by a
marker byte), rarely varints or compact bytes. :class:`KeyParser` walks the datums of every key in step
and keeps, per PK column, where each key's datum is: its 64-bit pattern (ints, floats) or its byte
contents (strings). Keys it cannot take (another table, an odd datum, more or fewer datums than the PK
has, NULL datums other than the zero padding to 9 bytes) are cleared in ``ok`` and left to
:func:`backfill.codec.keys.decode_record_key`, the reference, which raises the precise error. PK columns
of kinds it does not handle (DECIMAL, ...) make the parser unsupported as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from backfill.codec.cellmatrix import SIGN, Binary, zigzag
from backfill.codec.keys import (
    BYTES_FLAG,
    COMMON_HANDLE_MIN_LEN,
    COMPACT_BYTES_FLAG,
    DURATION_FLAG,
    FLOAT_FLAG,
    INT_FLAG,
    RECORD_PREFIX_LEN,
    UINT_FLAG,
    UVARINT_FLAG,
    VARINT_FLAG,
)
from backfill.codec.schema import ColumnKind, ColumnSchema, TableSchema

K = ColumnKind
_SIGNED = frozenset({K.INT, K.YEAR, K.TIME})
_UNSIGNED = frozenset({K.UINT, K.UINT64, K.ENUM, K.SET, K.BIT, K.DATE, K.DATETIME, K.TIMESTAMP})
_STRINGS = frozenset({K.TEXT, K.BINARY})
_FLOATS = frozenset({K.FLOAT32, K.FLOAT64})


def _allowed(col: ColumnSchema) -> tuple[int, ...]:
    """Key datum flags whose value ``_key_datum_to_stored`` turns into this column's stored datum
    unchanged (unsigned kinds: only flags that cannot carry a negative value)."""
    if col.kind in _SIGNED:
        return INT_FLAG, UINT_FLAG, VARINT_FLAG, UVARINT_FLAG, DURATION_FLAG
    if col.kind in _UNSIGNED:
        return UINT_FLAG, UVARINT_FLAG
    if col.kind in _FLOATS:
        return (FLOAT_FLAG,)
    if col.kind in _STRINGS:
        return BYTES_FLAG, COMPACT_BYTES_FLAG
    return ()


@dataclass
class KeyDatum:
    """One PK column's datum in every key: its ``flag``, the int/float ``pattern`` (uint64), and for strings
    ``start`` (where the contents or their memcomparable groups begin) and ``length`` (decoded length)."""

    flag: np.ndarray
    pattern: np.ndarray
    start: np.ndarray
    length: np.ndarray


@dataclass
class KeyCells:
    ok: np.ndarray
    table_ids: np.ndarray
    datums: list[KeyDatum]
    keys: Binary

    def strings(self, k: int, rows: np.ndarray, typ: pa.DataType) -> pa.Array:
        """The string contents of PK datum ``k`` for ``rows`` (memcomparable groups stripped)."""
        d = self.datums[k]
        lens = d.length[rows]
        starts = d.start[rows]
        grouped = d.flag[rows] == BYTES_FLAG
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        total = int(offsets[-1])
        i = np.arange(total) - np.repeat(offsets[:-1], lens)
        base = np.repeat(starts, lens)
        idx = base + np.where(np.repeat(grouped, lens), (i >> 3) * 9 + (i & 7), i)
        data = self.keys.data[idx] if total else np.zeros(0, np.uint8)
        return pa.Array.from_buffers(
            typ, len(rows), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
        )


class KeyParser:
    """Common-handle key parsing for one schema (``supported`` is False if a PK column's kind is not
    handled here; callers then decode keys one by one)."""

    def __init__(self, schema: TableSchema) -> None:
        self.columns = [col for col, _ in schema.common_handle]
        self.physical = np.array(schema.physical_ids, np.int64)
        self.allowed = [_allowed(col) for col in self.columns]
        self.supported = bool(self.columns) and all(self.allowed)

    def parse(self, keys: Binary, candidates: np.ndarray) -> KeyCells:
        starts, lengths = keys.starts, keys.lengths
        end = starts + lengths
        ok = candidates & (lengths > RECORD_PREFIX_LEN)
        head = keys.gather(starts, RECORD_PREFIX_LEN)
        ok &= (head[:, 0] == ord("t")) & (head[:, 9] == ord("_")) & (head[:, 10] == ord("r"))
        table_ids = (keys.be_u64(starts + 1) ^ SIGN).view(np.int64)
        ok &= np.isin(table_ids, self.physical)
        pos = starts + RECORD_PREFIX_LEN
        datums = []
        for allowed in self.allowed:
            flag = keys.byte(pos)
            ok &= pos < end
            ok &= np.isin(flag, allowed)
            cs = pos + 1
            pattern: np.ndarray = np.zeros(len(pos), np.uint64)
            length = np.zeros(len(pos), np.int64)
            start = cs.copy()
            ce = cs.copy()
            fixed = np.isin(flag, (INT_FLAG, UINT_FLAG, DURATION_FLAG, FLOAT_FLAG))
            if fixed.any():
                be = keys.be_u64(cs)
                signed = (flag == INT_FLAG) | (flag == DURATION_FLAG)
                pattern = np.where(fixed, np.where(signed, be ^ SIGN, be), pattern)
                ce = np.where(fixed, cs + 8, ce)
            var = np.isin(flag, (VARINT_FLAG, UVARINT_FLAG, COMPACT_BYTES_FLAG))
            if var.any():
                u, n, good = keys.uvarints(cs[var], end[var])
                signed = flag[var] != UVARINT_FLAG
                u = np.where(signed, zigzag(u).view(np.uint64), u)
                compact = flag[var] == COMPACT_BYTES_FLAG
                size = u.view(np.int64)
                good &= ~compact | ((size >= 0) & (size <= end[var]))
                ok[np.flatnonzero(var)[~good]] = False
                pattern[var] = u
                length[var] = np.where(compact & good, size, 0)
                start[var] = cs[var] + n
                ce[var] = cs[var] + n + length[var]
            grouped = flag == BYTES_FLAG
            if grouped.any():
                rows = np.flatnonzero(grouped & ok)
                e, n, good = _memcomparable(keys, cs[rows], end[rows])
                ok[rows[~good]] = False
                ce[rows], length[rows] = e, n
            ok &= ce <= end
            datums.append(KeyDatum(flag, pattern, start, length))
            pos = ce
        # kv.NewCommonHandle pads a handle shorter than 9 bytes with zero bytes.
        pad = end - pos
        padded = (lengths == RECORD_PREFIX_LEN + COMMON_HANDLE_MIN_LEN) & (pad > 0) & (pad < 9)
        if padded.any():
            tail = keys.gather(np.where(padded, pos, starts), 8)
            padded &= ~((np.arange(8)[None, :] < pad[:, None]) & (tail != 0)).any(axis=1)
        ok &= (pad == 0) | padded
        return KeyCells(ok, table_ids, datums, keys)


def _memcomparable(
    keys: Binary, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Walk ``EncodeBytes`` groups: (end of the datum, decoded length, ok) as ``decode_bytes`` checks."""
    m = len(start)
    done_end = np.zeros(m, np.int64)
    length = np.zeros(m, np.int64)
    ok = np.ones(m, bool)
    active = np.arange(m)
    groups = 0
    while len(active):
        p = start[active] + 9 * groups
        fits = p + 9 <= end[active]
        ok[active[~fits]] = False
        active, p = active[fits], p[fits]
        group = keys.gather(p, 9)
        pad = 0xFF - group[:, 8].astype(np.int64)
        last = pad != 0
        good = ~last | (pad <= 8)
        if last.any():
            tail = np.arange(8)[None, :] >= 8 - pad[:, None]
            good &= ~(last[:, None] & tail & (group[:, :8] != 0)).any(axis=1)
        ok[active[~good]] = False
        fin = last & good
        done_end[active[fin]] = p[fin] + 9
        length[active[fin]] = 8 * groups + 8 - pad[fin]
        active = active[~last]
        groups += 1
    return done_end, length, ok
