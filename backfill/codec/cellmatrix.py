"""Where every column's bytes are in every row of a batch: row headers parsed for all rows at once.

:func:`parse_values` reads the row values of a batch (row format v2 and v1 alike) with numpy over the
Arrow buffers and scatters what it finds into dense ``(column slot, row)`` matrices: whether the column is
absent, NULL or has a value, and where that value's bytes are. Nothing is grouped by row layout, so a batch
whose rows all have different NULL/absent patterns costs the same as a uniform one.

- v2 rows: the header (flags, counts, column ids of 1 or 4 bytes, end offsets of 2 or 4 bytes) is read as
  a ``(rows, ids)`` matrix per id width; every check :func:`backfill.codec.rowv2.parse_row_v2` makes is
  made here too (ids ascending, no id both NULL and not NULL, offsets not going backwards, the data ending
  where the row ends or where its checksum area starts).
- v1 rows: the ``id, value, id, value ...`` datums are walked for all rows in step, one datum per step.
  Integer datums (varint, uvarint, 8-byte forms) are decoded here to the 64-bit pattern (kept in
  ``start``, ``form`` = FORM_INT); other datums point at bytes laid out as in a v2 cell (float, decimal
  with its precision bytes, JSON with its type byte, string contents).

A row any check rejects is cleared in ``ok`` and left to the per-row decoder, which is the reference and
raises the precise error. The checks are never weaker than the per-row decoder's: a row kept here decodes
there too (the value kernels of :mod:`backfill.codec.arrow` check the cells themselves).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import as_strided

from backfill.codec import jsonbin
from backfill.codec.keys import (
    COMPACT_BYTES_FLAG,
    DECIMAL_FLAG,
    DURATION_FLAG,
    FLOAT_FLAG,
    INT_FLAG,
    JSON_FLAG,
    NIL_FLAG,
    UINT_FLAG,
    UVARINT_FLAG,
    VARINT_FLAG,
    VECTOR_FLOAT32_FLAG,
)
from backfill.codec.mydecimal import MAX_FRAC, MAX_PRECISION, decimal_bin_size
from backfill.codec.schema import UNSIGNED_STORED, ColumnKind, ColumnSchema

ABSENT, VALUE, NULL = 0, 1, 2
FORM_BYTES, FORM_INT = 0, 1
SIGN = np.uint64(1 << 63)
_AR10 = np.arange(10)
_SHIFTS = (7 * np.arange(10)).astype(np.uint64)
_WIDE_ROW_SLACK = 16  # rows with more ids than columns + this are parsed in a matrix of their own


_PAD = 256  # zero bytes after a copy of the data, so fixed-width reads need no clipping per byte


@dataclass
class Binary:
    """Offsets (int64, n+1) and data (uint8) of a binary Arrow array, whatever its offset width.

    Reads at arbitrary positions never fail: positions are clipped to the end of the data and bytes past
    it read as zeros (callers check lengths). Fixed-width reads go through strided views of a zero-padded
    copy of the data (one row copy per position instead of one gather per byte).
    """

    offsets: np.ndarray
    data: np.ndarray
    _padded: np.ndarray | None = None

    @classmethod
    def of(cls, arr: pa.Array | pa.ChunkedArray) -> Binary:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if (
            pa.types.is_binary_view(arr.type)
            or pa.types.is_string_view(arr.type)
            or pa.types.is_fixed_size_binary(arr.type)
        ):
            arr = arr.cast(pa.large_binary())
        width = (
            np.int64 if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type) else np.int32
        )
        bufs = arr.buffers()
        offsets = np.frombuffer(bufs[1], dtype=width)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        if len(offsets) and (offsets[0] or offsets[-1] != len(data)):  # a slice: only the bytes it uses
            lo = int(offsets[0])
            data = data[lo : int(offsets[-1])]
            offsets -= lo
        return cls(offsets, data)

    @property
    def starts(self) -> np.ndarray:
        return self.offsets[:-1]

    @property
    def lengths(self) -> np.ndarray:
        return self.offsets[1:] - self.offsets[:-1]

    @property
    def padded(self) -> np.ndarray:
        if self._padded is None:
            padded = np.empty(len(self.data) + _PAD, np.uint8)
            padded[: len(self.data)] = self.data
            padded[len(self.data) :] = 0
            self._padded = padded
        return self._padded

    def _clip(self, pos: np.ndarray) -> np.ndarray:
        return np.clip(pos, 0, len(self.data))

    def gather(self, pos: np.ndarray, width: int) -> np.ndarray:
        """``width`` bytes from each position: a (len(pos), width) uint8 matrix."""
        if width == 0:
            return np.zeros((len(pos), 0), np.uint8)
        if width <= 16:  # one or two unaligned 8-byte words per position
            pos = self._clip(pos)
            words = self._words("<u8")
            out = np.empty((len(pos), (width + 7) // 8), np.uint64)
            out[:, 0] = words[pos]
            if width > 8:
                out[:, 1] = words[pos + 8]
            return out.view(np.uint8)[:, :width]
        if width <= _PAD:
            windows = as_strided(self.padded, shape=(len(self.data) + 1, width), strides=(1, 1))
            return windows[self._clip(pos)]
        idx = self._clip(pos)[:, None] + np.arange(width)
        np.minimum(idx, len(self.data), out=idx)
        return self.padded[idx]

    def byte(self, pos: np.ndarray) -> np.ndarray:
        """One byte per position, as int64."""
        return self.padded[self._clip(pos)].astype(np.int64)

    def _words(self, dtype: str) -> np.ndarray:
        """The data read as one (unaligned) word of ``dtype`` at every byte position."""
        size = np.dtype(dtype).itemsize
        return np.ndarray(shape=(len(self.padded) - size + 1,), dtype=dtype, buffer=self.padded, strides=(1,))

    def le_u64(self, pos: np.ndarray) -> np.ndarray:
        return self._words("<u8")[self._clip(pos)]

    def be_u64(self, pos: np.ndarray) -> np.ndarray:
        return self._words(">u8")[self._clip(pos)].astype(np.uint64)

    def le_words(self, pos: np.ndarray, count: int, size: int) -> np.ndarray:
        """``count`` little-endian unsigned words of ``size`` (1, 2, 4) bytes from each position: int64."""
        if count == 1:
            return self._words({1: "<u1", 2: "<u2", 4: "<u4"}[size])[self._clip(pos)][:, None].astype(
                np.int64
            )
        mat = self.gather(pos, count * size)
        return np.ascontiguousarray(mat).view({1: "<u1", 2: "<u2", 4: "<u4"}[size]).astype(np.int64)

    def uvarints(self, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Go uvarints at ``pos`` that must end by ``limit``: (uint64 value, byte length, ok).

        Same rules as :func:`backfill.codec.numbers.decode_uvarint`: at most 10 bytes, the 10th at most 1.
        """
        first = self.byte(pos)
        if (first < 0x80).all():  # one byte each (small ids and values)
            return first.astype(np.uint64), np.ones(len(pos), np.int64), pos < limit
        mat = self.gather(pos, 10)
        last = mat < 0x80
        ok = last.any(axis=1)
        length = last.argmax(axis=1) + 1
        ok &= (pos + length <= limit) & ~((length == 10) & (mat[:, 9] > 1))
        low = (mat & 0x7F).astype(np.uint64)
        low[_AR10[None, :] >= length[:, None]] = 0
        value = np.bitwise_or.reduce(low << _SHIFTS, axis=1) if len(pos) else np.zeros(0, np.uint64)
        return value, length, ok


def zigzag(u: np.ndarray) -> np.ndarray:
    """Go varint zigzag: uint64 -> int64."""
    return ((u >> np.uint64(1)) ^ (np.uint64(0) - (u & np.uint64(1)))).view(np.int64)


class SlotMap:
    """Column id -> slot (index into the schema's columns), -1 for ids the schema does not have."""

    def __init__(self, ids: Sequence[int]) -> None:
        self.ids = np.asarray(ids, np.int64)
        top = int(self.ids.max()) if len(self.ids) else 0
        self._dense = 0 <= top < (1 << 20) and (len(self.ids) == 0 or int(self.ids.min()) >= 0)
        if self._dense:
            self._lut = np.full(top + 2, -1, np.int64)
            self._lut[self.ids] = np.arange(len(self.ids))
        else:
            self._order = np.argsort(self.ids)
            self._sorted = self.ids[self._order]
        # 1-byte ids (small v2 rows): a 256-entry table indexed by the id bytes themselves
        self.small = self(np.arange(256))

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        if self._dense:
            last = len(self._lut) - 1
            return self._lut[np.where((ids >= 0) & (ids < last), ids, last)]
        if not len(self._sorted):
            return np.full(ids.shape, -1, np.int64)
        at = np.minimum(np.searchsorted(self._sorted, ids), len(self._sorted) - 1)
        return np.where(self._sorted[at] == ids, self._order[at], -1)


# v1 datum flags a column of each kind accepts (what stored_from_v1 turns into its stored datum)
_INT_FLAGS = (INT_FLAG, UINT_FLAG, VARINT_FLAG, UVARINT_FLAG, DURATION_FLAG)
_INT_KINDS = UNSIGNED_STORED | {ColumnKind.INT, ColumnKind.YEAR, ColumnKind.TIME}


def _v1_flags(col: ColumnSchema) -> tuple[int, ...]:
    kind = col.kind
    if kind in _INT_KINDS:
        return _INT_FLAGS
    if kind in (ColumnKind.FLOAT32, ColumnKind.FLOAT64):
        return (FLOAT_FLAG,)
    if kind in (ColumnKind.TEXT, ColumnKind.BINARY):
        return (COMPACT_BYTES_FLAG,)
    if kind == ColumnKind.VECTOR:
        return (COMPACT_BYTES_FLAG, VECTOR_FLOAT32_FLAG)
    if kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR):
        return (DECIMAL_FLAG,)
    if kind == ColumnKind.JSON:
        return (JSON_FLAG,)
    return ()


# v1 value datums: fixed payload length by flag (-1: not fixed / unknown), and which reader takes the rest
_V1_FIXED = np.full(256, -1, np.int64)
_V1_FIXED[NIL_FLAG] = 0
_V1_FIXED[[INT_FLAG, UINT_FLAG, FLOAT_FLAG, DURATION_FLAG]] = 8
_G_FIXED_INT, _G_VARINT, _G_OTHER = 1, 2, 3
_V1_GROUP = np.zeros(256, np.int8)
_V1_GROUP[[INT_FLAG, UINT_FLAG, DURATION_FLAG]] = _G_FIXED_INT
_V1_GROUP[[VARINT_FLAG, UVARINT_FLAG, COMPACT_BYTES_FLAG]] = _G_VARINT
_V1_GROUP[[DECIMAL_FLAG, JSON_FLAG, VECTOR_FLOAT32_FLAG]] = _G_OTHER

# decimal bin size by (precision, frac); -1 where check_precision rejects the pair
_DEC_SIZE = np.full((256, 256), -1, np.int64)
for _p in range(1, MAX_PRECISION + 1):
    for _f in range(0, min(_p, MAX_FRAC) + 1):
        _DEC_SIZE[_p, _f] = decimal_bin_size(_p, _f)


@dataclass
class Cells:
    """Per (row, column slot): ``state`` (ABSENT, VALUE, NULL) and, for values, ``start``/``end`` (absolute
    positions in the value buffer) or, where ``form`` is FORM_INT (v1 int datums), the int64 pattern in
    ``ival``. ``ok`` is cleared for rows left to the per-row decoder. Row-major: the parsers scatter each
    row's cells next to each other."""

    ok: np.ndarray
    state: np.ndarray
    start: np.ndarray
    end: np.ndarray
    form: np.ndarray | None = None
    ival: np.ndarray | None = None

    @classmethod
    def empty(cls, ok: np.ndarray, n_cols: int, data_len: int) -> Cells:
        """Matrices for ``n_cols`` columns plus a spare one the parsers dump cells of no interest in."""
        n = len(ok)
        pos = np.int32 if data_len < 2**31 - 1 - _PAD else np.int64
        shape = (n, n_cols + 1)
        return cls(
            ok=ok, state=np.zeros(shape, np.int8), start=np.zeros(shape, pos), end=np.zeros(shape, pos)
        )

    def by_column(self) -> Cells:
        """The same cells column-major ((slot, row): what decoding reads, one column at a time)."""

        def t(a: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(a.T)

        form = None if self.form is None else t(self.form)
        ival = None if self.ival is None else t(self.ival)
        return Cells(self.ok, t(self.state), t(self.start), t(self.end), form, ival)

    def values_of(self, slot: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(start, end, form) of column ``slot`` in ``rows`` (column-major cells); FORM_INT cells carry their
        pattern as start."""
        s = self.start[slot][rows].astype(np.int64)
        e = self.end[slot][rows].astype(np.int64)
        if self.form is None:
            return s, e, None
        form = self.form[slot][rows]
        as_int = form == FORM_INT
        if as_int.any():
            assert self.ival is not None
            s[as_int] = self.ival[slot][rows[as_int]]
        return s, e, form


class RowParser:
    """Header parsing for one schema's columns (build once per schema, reuse for every batch)."""

    def __init__(self, columns: Sequence[ColumnSchema]) -> None:
        self.n_cols = len(columns)
        self.slots = SlotMap([c.id for c in columns])
        small = self.slots.small
        self._small_slots = np.where(small < 0, self.n_cols, small)  # unknown ids: the spare column
        allowed = np.zeros((max(self.n_cols, 1), 256), bool)
        for i, col in enumerate(columns):
            allowed[i, list(_v1_flags(col))] = True
        self._v1_allowed = allowed
        self._v1_int_slot = np.array([c.kind in _INT_KINDS for c in columns] or [False])

    def parse(self, values: Binary, candidates: np.ndarray) -> Cells:
        """Parse the rows where ``candidates`` is set (rows with a key of the table and a non-null value)."""
        cells = Cells.empty(candidates.copy(), self.n_cols, len(values.data))
        lengths = values.lengths
        cells.ok &= lengths >= 1
        first = values.byte(values.starts)
        v2 = cells.ok & (first == 0x80)
        cells.ok &= ~v2 | (lengths >= 6)
        v2 &= cells.ok
        rows = np.flatnonzero(v2)
        if len(rows):
            flags = values.byte(values.starts[rows] + 1)
            cells.ok[rows[(flags & ~3) != 0]] = False
            rows = rows[(flags & ~3) == 0]
            large = (flags[(flags & ~3) == 0] & 1) != 0
            for sel, id_size, off_size in ((~large, 1, 2), (large, 4, 4)):
                if sel.any():
                    self._v2(values, rows[sel], id_size, off_size, cells)
        v1 = np.flatnonzero(cells.ok & ~v2)
        if len(v1):
            cells.form = np.zeros(cells.state.shape, np.int8)
            cells.ival = np.zeros(cells.state.shape, np.int64)  # calloc: pages of v2 rows stay untouched
            self._v1(values, v1, cells)
        return cells

    # ------------------------------------------------------------ v2

    def _v2(self, values: Binary, rows: np.ndarray, id_size: int, off_size: int, cells: Cells) -> None:
        starts, lengths = values.starts[rows], values.lengths[rows]
        counts = values.le_words(starts + 2, 2, 2)
        n_nn, n_null = counts[:, 0], counts[:, 1]
        total = n_nn + n_null
        header = 6 + id_size * total + off_size * n_nn
        fits = header <= lengths
        cells.ok[rows[~fits]] = False
        rows, starts, lengths, n_nn, total, header = (
            a[fits] for a in (rows, starts, lengths, n_nn, total, header)
        )
        # rows carrying many more ids than the schema has columns get a matrix of their own
        wide = total > self.n_cols + _WIDE_ROW_SLACK
        if wide.any() and not wide.all():
            for sel in (~wide, wide):
                self._v2_matrix(
                    values,
                    rows[sel],
                    starts[sel],
                    lengths[sel],
                    n_nn[sel],
                    total[sel],
                    header[sel],
                    id_size,
                    off_size,
                    cells,
                )
        elif len(rows):
            self._v2_matrix(values, rows, starts, lengths, n_nn, total, header, id_size, off_size, cells)

    def _v2_matrix(
        self,
        values: Binary,
        rows: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        n_nn: np.ndarray,
        total: np.ndarray,
        header: np.ndarray,
        id_size: int,
        off_size: int,
        cells: Cells,
    ) -> None:
        """Rows of one id width, as (rows, ids) matrices. Cells of ids the schema lacks, and the padding
        past each row's ids, are written to the spare last column of ``cells`` instead of being masked
        out (fewer passes over the matrices)."""
        r, spare = len(rows), self.n_cols
        width, nn_width = int(total.max()), int(n_nn.max())
        j = np.arange(width)
        valid = j[None, :] < total[:, None]
        is_nn = j[None, :] < n_nn[:, None]
        if id_size == 1:
            ids = values.gather(starts + 6, width)
            slot = self._small_slots[ids]
        else:
            ids = values.le_words(starts + 6, width, id_size)
            slot = self.slots(ids)
            slot[slot < 0] = spare
        bad = np.zeros(r, bool)
        if width > 1:
            # ids ascending within the not-null part and within the null part
            step = valid[:, 1:] & (j[None, 1:] != n_nn[:, None])
            bad |= (step & (ids[:, 1:] <= ids[:, :-1])).any(axis=1)
        pos_type = cells.start.dtype
        ends = np.zeros((r, nn_width + 1), pos_type)  # column 0: the start of the first value
        ends[:, 1:] = values.le_words(starts + 6 + id_size * total, nn_width, off_size)
        if nn_width:  # from the first value's start (0) on; an offset past the position type wraps negative
            bad |= (is_nn[:, :nn_width] & (ends[:, 1:] < ends[:, :-1])).any(axis=1)
        data_start = starts + header
        data_end = data_start + ends[np.arange(r), n_nn]
        rest = starts + lengths - data_end
        checksum = (values.byte(starts + 1) & 2) != 0
        extra = (values.byte(data_end) & 0x08) != 0
        bad |= np.where(checksum, (rest < 5) | (rest != 5 + 4 * extra), rest != 0)
        state, start, end = cells.state.reshape(-1), cells.start.reshape(-1), cells.end.reshape(-1)
        row_base = (rows * (spare + 1))[:, None]
        if nn_width:  # not-null cells
            target = np.where(is_nn[:, :nn_width], slot[:, :nn_width], spare) + row_base
            base = data_start.astype(pos_type)[:, None]
            state[target] = VALUE
            start[target] = base + ends[:, :-1]
            end[target] = base + ends[:, 1:]
        if (total > n_nn).any():  # NULL cells; an id both NULL and not NULL makes the row bad
            is_null = valid & ~is_nn
            null_slot = np.where(is_null, slot, spare)
            target = null_slot + row_base
            bad |= ((state[target] == VALUE) & (null_slot != spare)).any(axis=1)
            state[target] = NULL
            unknown = is_null & (slot == spare)
            if unknown.any():  # ids the schema lacks: look them up among the row's not-null ids
                wide_ids = ids.astype(np.int64)
                local = np.broadcast_to(np.arange(r)[:, None], ids.shape)
                nn_keys = ((local << 32) + wide_ids)[is_nn & ~bad[:, None]]  # sorted: rows, then ids
                keys = (local[unknown] << 32) + wide_ids[unknown]
                if len(nn_keys):
                    at = np.minimum(np.searchsorted(nn_keys, keys), len(nn_keys) - 1)
                    bad[local[unknown][nn_keys[at] == keys]] = True
        cells.ok[rows[bad]] = False

    # ------------------------------------------------------------ v1

    def _v1(self, values: Binary, rows: np.ndarray, cells: Cells) -> None:
        starts, lengths = values.starts[rows], values.lengths[rows]
        empty = (lengths == 1) & (values.byte(starts) == NIL_FLAG)  # a row without columns
        rows, starts, lengths = rows[~empty], starts[~empty], lengths[~empty]
        limit = starts + lengths
        pos = starts.copy()
        bad = np.zeros(len(rows), bool)
        ent: list[tuple[np.ndarray, ...]] = []
        active = np.arange(len(rows))
        for _ in range(2 * self.n_cols + 64):  # rows with more datums than that: per row
            if not len(active):
                break
            p, lim = pos[active], limit[active]
            head = values.le_u64(p)  # id flag, id varint (one byte for ids below 64), value flag ...
            id_byte = (head >> np.uint64(8)) & np.uint64(0xFF)
            ok = (head & np.uint64(0xFF)) == VARINT_FLAG
            if (id_byte < 0x80).all():
                cid, q = zigzag(id_byte), p + 2
                flag = ((head >> np.uint64(16)) & np.uint64(0xFF)).astype(np.int64)
            else:
                u, n, good = values.uvarints(p + 1, lim)
                ok &= good
                cid, q = zigzag(u), p + 1 + n
                flag = values.byte(q)
            ok &= q < lim
            cs = q + 1
            ce, ival, ok = self._v1_datum(values, flag, cs, lim, ok)
            cs = np.where(flag == COMPACT_BYTES_FLAG, ce - ival.view(np.int64), cs)  # string contents
            ok &= ce <= lim
            bad[active[~ok]] = True
            keep = active[ok]
            ent.append((keep, cid[ok], flag[ok], cs[ok], ce[ok], ival[ok]))
            pos[keep] = ce[ok]
            active = keep[ce[ok] < lim[ok]]
        bad[active] = True
        if not ent:
            return
        local, cid, flag, cs, ce, ival = (np.concatenate(parts) for parts in zip(*ent, strict=True))
        order = np.lexsort((cid, local))
        same = (local[order][1:] == local[order][:-1]) & (cid[order][1:] == cid[order][:-1])
        bad[local[order][1:][same]] = True  # an id given twice
        slot = self.slots(cid)
        known = slot >= 0
        # unknown ids: DECIMAL datums are checked digit by digit by the per-row decoder; leave them to it
        bad[local[~known & (flag == DECIMAL_FLAG)]] = True
        local, slot, flag, cs, ce, ival = (a[known] for a in (local, slot, flag, cs, ce, ival))
        nil = flag == NIL_FLAG
        bad[local[~nil & ~self._v1_allowed[slot, flag]]] = True
        rr = rows[local]
        cells.state[rr, slot] = np.where(nil, NULL, VALUE)
        as_int = ~nil & self._v1_int_slot[slot]
        assert cells.form is not None and cells.ival is not None
        cells.form[rr, slot] = np.where(as_int, FORM_INT, FORM_BYTES)
        cells.ival[rr, slot] = ival.view(np.int64)
        cells.start[rr, slot] = np.where(as_int, 0, cs)
        cells.end[rr, slot] = np.where(as_int, 0, ce)
        cells.ok[rows[bad]] = False

    @staticmethod
    def _v1_datum(
        values: Binary, flag: np.ndarray, cs: np.ndarray, lim: np.ndarray, ok: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """End of each value datum whose payload starts at ``cs``, its int pattern (uint64: int datums;
        string length for compact bytes) and the updated ok mask."""
        m = len(cs)
        end = cs + _V1_FIXED[flag]  # unknown flags: before cs, caught below
        ival = np.zeros(m, np.uint64)
        group = _V1_GROUP[flag]
        if not group.any():  # NULLs and floats only
            ok &= end >= cs
            return end, ival, ok
        fixed = group == _G_FIXED_INT
        if fixed.any():
            be = values.be_u64(cs[fixed])
            ival[fixed] = np.where(flag[fixed] == UINT_FLAG, be, be ^ SIGN)
        var = group == _G_VARINT
        if var.any():
            u, n, good = values.uvarints(cs[var], lim[var])
            signed = flag[var] != UVARINT_FLAG
            u = np.where(signed, zigzag(u).view(np.uint64), u)
            compact = flag[var] == COMPACT_BYTES_FLAG
            size = u.view(np.int64)
            good &= ~compact | ((size >= 0) & (size <= lim[var]))
            end[var] = cs[var] + n + np.where(compact, np.where(good, size, 0), 0)
            ival[var] = u
            ok[np.flatnonzero(var)[~good]] = False
        if not (group == _G_OTHER).any():
            ok &= end >= cs
            return end, ival, ok
        dec = flag == DECIMAL_FLAG
        if dec.any():
            head = values.gather(cs[dec], 2).astype(np.int64)
            size = _DEC_SIZE[head[:, 0], head[:, 1]]
            ok[np.flatnonzero(dec)[size < 0]] = False
            end[dec] = cs[dec] + 2 + size
        js = flag == JSON_FLAG
        if js.any():
            end[js], good = _json_end(values, cs[js], lim[js])
            ok[np.flatnonzero(js)[~good]] = False
        vec = flag == VECTOR_FLOAT32_FLAG
        if vec.any():
            count = values.le_words(cs[vec], 1, 4).ravel()
            end[vec] = cs[vec] + 4 + 4 * count
            ok[np.flatnonzero(vec)[cs[vec] + 4 > lim[vec]]] = False
        ok &= end >= cs
        return end, ival, ok


def _json_end(values: Binary, cs: np.ndarray, lim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """End of v1 JSON datums (type byte at ``cs``), as :func:`jsonbin.binary_size` derives it."""
    code = values.byte(cs)
    raw = cs + 1
    size = np.full(len(cs), -1, np.int64)
    ok = np.ones(len(cs), bool)
    container = (code == jsonbin.OBJECT) | (code == jsonbin.ARRAY)
    if container.any():
        size[container] = values.le_words(raw[container] + 4, 1, 4).ravel()
        ok[np.flatnonzero(container)[raw[container] + 8 > lim[container]]] = False
    size[code == jsonbin.LITERAL] = 1
    size[
        np.isin(
            code,
            (
                jsonbin.INT64,
                jsonbin.UINT64,
                jsonbin.FLOAT64,
                jsonbin.DATE,
                jsonbin.DATETIME,
                jsonbin.TIMESTAMP,
            ),
        )
    ] = 8
    size[code == jsonbin.DURATION] = 12
    for c, skip in ((jsonbin.STRING, 0), (jsonbin.OPAQUE, 1)):
        sel = code == c
        if sel.any():
            u, n, good = values.uvarints(raw[sel] + skip, lim[sel])
            length = u.view(np.int64)
            good &= (length >= 0) & (length <= lim[sel])
            size[sel] = np.where(good, skip + n + length, 0)
            ok[np.flatnonzero(sel)[~good]] = False
    ok &= size >= 0
    return raw + np.maximum(size, 0), ok
