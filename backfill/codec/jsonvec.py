"""Canonical JSON text for many binary JSON values at once (numpy + Arrow compute).

Values of one JSON column mostly share their shape: objects with the same keys and value types, arrays
of the same length and element types. Values are grouped by shape; each member position is then turned
into text for the whole group (ints cast by Arrow, strings sliced from the buffer, nested containers by
recursion) and joined with the constant key texts. Anything unusual (floats, opaque, dates, strings
needing escapes, multi-byte lengths, bad offsets) is done per value by :mod:`jsonbin`, which stays the
reference: the output is identical to :func:`jsonbin.to_text` (tested), and values that fail any check
are reported back so the caller can let ``jsonbin`` raise the precise error.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import jsonbin
from backfill.codec.errors import CodecError

_LITERAL_TEXT = pa.array(["null", "true", "false"], pa.string())
_EMPTY = pa.scalar("")
# Bytes a JSON string can hold without escaping and without a closer look (ASCII printable minus " and \).
_PLAIN = np.zeros(256, bool)
_PLAIN[0x20:0x7F] = True
_PLAIN[[ord('"'), ord("\\")]] = False
_PLAIN[0x80:] = True  # UTF-8 continuation/lead bytes: fine, except E2 (U+2028/2029 start), checked below
_PLAIN[0xE2] = False


def _u32(data: np.ndarray, pos: np.ndarray) -> np.ndarray:
    idx = pos[:, None] + np.arange(4)
    return np.ascontiguousarray(data[idx]).view("<u4").ravel().astype(np.int64)


def _u64_bytes(data: np.ndarray, pos: np.ndarray) -> np.ndarray:
    idx = pos[:, None] + np.arange(8)
    return np.ascontiguousarray(data[idx]).view("<u8").ravel()


def texts(
    data: np.ndarray, code: np.ndarray, pos: np.ndarray, end: np.ndarray, depth: int = 0
) -> tuple[pa.Array, np.ndarray]:
    """Text of the JSON value of type ``code[i]`` at ``data[pos[i]:]`` that must end by ``end[i]``.

    Returns (string array, bad mask); bad rows have an empty text and must be redone by ``jsonbin``.
    """
    n = len(pos)
    bad = np.zeros(n, bool)
    if n == 0:
        return pa.array([], pa.string()), bad
    if depth > jsonbin.MAX_DEPTH:
        return pa.array([""] * n, pa.string()), ~bad
    pieces: list[tuple[np.ndarray, pa.Array]] = []
    for c in np.unique(code).tolist():
        rows = np.flatnonzero(code == c)
        arr, row_bad = _texts_of_code(data, c, pos[rows], end[rows], depth)
        pieces.append((rows, arr))
        bad[rows[row_bad]] = True
    return _assemble(pieces), bad


def _assemble(pieces: list[tuple[np.ndarray, pa.Array]]) -> pa.Array:
    """Put per-subset text arrays back in row order."""
    if len(pieces) == 1:
        return pieces[0][1]
    order = np.concatenate([r for r, _ in pieces])
    joined = pa.concat_arrays([a for _, a in pieces])
    return joined.take(pa.array(np.argsort(order, kind="stable")))


def cells_to_text(cells: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Texts of row-v2 JSON cells (type byte + value). Bad cells come back empty, flagged in the mask.

    Top-level objects and arrays that fill their cell exactly go the vectorised way; other cells (scalars,
    or anything odd) go through :func:`jsonbin.cell_to_text`, one by one.
    """
    n = len(cells)
    bufs = cells.buffers()
    offsets = np.frombuffer(bufs[1], np.int32)[cells.offset : cells.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    starts, lens = offsets[:-1], offsets[1:] - offsets[:-1]
    if len(data) < 9:
        data = np.concatenate([data, np.zeros(9, np.uint8)])
    code = np.where(lens >= 1, data[np.minimum(starts, len(data) - 1)], 0).astype(np.int64)
    fast = (lens >= 9) & ((code == jsonbin.OBJECT) | (code == jsonbin.ARRAY))
    fast_rows = np.flatnonzero(fast)
    fast_rows = fast_rows[_u32(data, starts[fast_rows] + 5) == lens[fast_rows] - 1]
    pieces: list[tuple[np.ndarray, pa.Array]] = []
    bad = np.zeros(n, bool)
    slow = np.ones(n, bool)
    if len(fast_rows):
        arr, fast_bad = texts(data, code[fast_rows], starts[fast_rows] + 1, offsets[1:][fast_rows])
        good = ~fast_bad
        pieces.append((fast_rows[good], arr.filter(pa.array(good))))
        slow[fast_rows[good]] = False
    slow_rows = np.flatnonzero(slow)
    if len(slow_rows):
        out = []
        for i in slow_rows.tolist():
            try:
                out.append(jsonbin.cell_to_text(cells[i].as_py()))
            except CodecError:
                out.append("")
                bad[i] = True
        pieces.append((slow_rows, pa.array(out, pa.string())))
    return _assemble(pieces), bad


def _per_value(data: np.ndarray, c: int, pos: np.ndarray, end: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """The reference path, value by value (rare kinds)."""
    buf = data.tobytes() if len(pos) > 64 else None
    out, bad = [], np.zeros(len(pos), bool)
    for i, (p, e) in enumerate(zip(pos.tolist(), end.tolist(), strict=True)):
        chunk = buf[p:e] if buf is not None else data[p:e].tobytes()
        try:
            out.append(jsonbin.to_text(c, chunk))
        except CodecError:
            out.append("")
            bad[i] = True
    return pa.array(out, pa.string()), bad


def _texts_of_code(
    data: np.ndarray, c: int, pos: np.ndarray, end: np.ndarray, depth: int
) -> tuple[pa.Array, np.ndarray]:
    n = len(pos)
    if c == jsonbin.LITERAL:
        bad = pos + 1 > end
        lit = np.where(bad, 0, data[np.minimum(pos, len(data) - 1)]).astype(np.int64)
        bad |= lit > 2
        return _LITERAL_TEXT.take(pa.array(np.where(bad, 0, lit))), bad
    if c in (jsonbin.INT64, jsonbin.UINT64):
        bad = pos + 8 > end
        raw = _u64_bytes(data, np.where(bad, 0, pos))
        typ = pa.int64() if c == jsonbin.INT64 else pa.uint64()
        vals = raw.view(np.int64) if c == jsonbin.INT64 else raw
        return pc.cast(pa.array(vals, typ), pa.string()), bad
    if c == jsonbin.STRING:
        return _strings(data, pos, end)
    if c in (jsonbin.OBJECT, jsonbin.ARRAY):
        return _containers(data, c, pos, end, depth)
    if n and len(data) >= 1:
        return _per_value(data, c, pos, end)
    return pa.array([""] * n, pa.string()), np.ones(n, bool)


def _strings(data: np.ndarray, pos: np.ndarray, end: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    n = len(pos)
    bad = pos + 1 > end
    first = data[np.where(bad, 0, pos)].astype(np.int64)
    long_len = first >= 0x80  # multi-byte uvarint length: per value
    lens = np.where(bad | long_len, 0, first)
    starts = pos + 1
    bad |= starts + lens > end
    lens = np.where(bad | long_len, 0, lens)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    idx = np.repeat(starts - offsets[:-1], lens) + np.arange(total)
    body = data[idx]
    plain_bytes = np.concatenate([[0], np.cumsum(~_PLAIN[body])])
    needs_care = (plain_bytes[offsets[1:]] - plain_bytes[offsets[:-1]]) > 0
    arr = pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(body)]
    )
    try:
        arr.validate(full=True)  # UTF-8; invalid strings are printed with \ufffd escapes by jsonbin
    except pa.ArrowInvalid:
        needs_care[:] = True
        arr = pa.array([""] * n, pa.string())
    text = pc.binary_join_element_wise(pa.scalar('"'), arr, pa.scalar('"'), _EMPTY)
    slow = np.flatnonzero((needs_care | long_len) & ~bad)
    if len(slow):
        fixed, fixed_bad = _per_value(data, jsonbin.STRING, pos[slow], end[slow])
        bad[slow[fixed_bad]] = True
        text = _replace(text, slow, fixed)
    return text, bad


def _replace(arr: pa.Array, rows: np.ndarray, new: pa.Array) -> pa.Array:
    """``arr`` with ``arr[rows] = new`` (rows ascending)."""
    keep = np.ones(len(arr), bool)
    keep[rows] = False
    kept = np.flatnonzero(keep)
    order = np.concatenate([kept, rows])
    merged = pa.concat_arrays([arr.take(pa.array(kept)), new])
    return merged.take(pa.array(np.argsort(order, kind="stable")))


def _containers(
    data: np.ndarray, c: int, pos: np.ndarray, end: np.ndarray, depth: int
) -> tuple[pa.Array, np.ndarray]:
    is_obj = c == jsonbin.OBJECT
    bad = pos + 8 > end
    safe = np.where(bad, 0, pos)
    count = _u32(data, safe)
    size = _u32(data, safe + 4)
    cend = pos + size
    entry_bytes = (6 if is_obj else 0) * count + 5 * count
    bad |= (cend > end) | (pos + 8 + entry_bytes > cend) | (count > 0xFFFF)
    pieces: list[tuple[np.ndarray, pa.Array]] = []
    header_bad = np.flatnonzero(bad)
    if len(header_bad):
        pieces.append((header_bad, pa.array([""] * len(header_bad), pa.string())))
    for k in np.unique(count[~bad]).tolist():
        rows = np.flatnonzero(~bad & (count == k))
        arr, row_bad = _containers_of_count(data, is_obj, k, pos[rows], cend[rows], depth)
        bad[rows[row_bad]] = True
        pieces.append((rows, arr))
    return _assemble(pieces), bad


def _containers_of_count(
    data: np.ndarray, is_obj: bool, k: int, pos: np.ndarray, cend: np.ndarray, depth: int
) -> tuple[pa.Array, np.ndarray]:
    """Containers with ``k`` members: group by shape (key entries, key bytes, member types), then build
    the text member by member for each group."""
    n = len(pos)
    open_, close = ("{", "}") if is_obj else ("[", "]")
    if k == 0:
        return pa.array([open_ + close] * n, pa.string()), np.zeros(n, bool)
    bad = np.zeros(n, bool)
    entries = pos + 8 + (6 * k if is_obj else 0)
    types = data[entries[:, None] + 5 * np.arange(k)]
    sig = np.concatenate([data[(pos + 8)[:, None] + np.arange(6 * k)], types], axis=1) if is_obj else types
    pieces: list[tuple[np.ndarray, pa.Array]] = []
    for group, signature in _shape_groups(data, is_obj, k, pos, cend, sig, bad):
        g_pos, g_end = pos[group], cend[group]
        parts: list[pa.Array | pa.Scalar] = [pa.scalar(open_)]
        g_bad = np.zeros(len(group), bool)
        key_texts = _key_texts(data, int(g_pos[0]), signature, k) if is_obj else None
        for j, t in enumerate(signature[-k:].tolist()):
            if key_texts is not None:
                parts.append(pa.scalar(key_texts[j]))
            elif j:
                parts.append(pa.scalar(", "))
            entry = entries[group] + 5 * j
            child_pos = entry + 1 if t == jsonbin.LITERAL else g_pos + _u32(data, entry + 1)
            child_end = entry + 2 if t == jsonbin.LITERAL else g_end
            live = np.flatnonzero(~g_bad)  # rows already known bad are not followed any deeper
            arr, child_bad = texts(
                data, np.full(len(live), t, np.int64), child_pos[live], child_end[live], depth + 1
            )
            g_bad[live[child_bad]] = True
            if len(live) < len(group):
                dead = np.setdiff1d(np.arange(len(group)), live)
                arr = _assemble([(live, arr), (dead, pa.array([""] * len(dead), pa.string()))])
            parts.append(arr)
        parts.append(pa.scalar(close))
        bad[group] = g_bad
        pieces.append((group, pc.binary_join_element_wise(*parts, _EMPTY)))
    dead = np.flatnonzero(
        bad
        & ~np.isin(np.arange(n), np.concatenate([g for g, _ in pieces]) if pieces else np.zeros(0, np.int64))
    )
    if len(dead):
        pieces.append((dead, pa.array([""] * len(dead), pa.string())))
    return _assemble(pieces), bad


def _key_fields(signature: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    fields = np.ascontiguousarray(signature[: 6 * k]).reshape(k, 6)
    offs = fields[:, :4].copy().view("<u4").ravel().astype(np.int64)
    lens = fields[:, 4:].copy().view("<u2").ravel().astype(np.int64)
    return offs, lens


def _shape_groups(
    data: np.ndarray,
    is_obj: bool,
    k: int,
    pos: np.ndarray,
    cend: np.ndarray,
    sig: np.ndarray,
    bad: np.ndarray,
):
    """Yield (rows, signature) of same-shaped containers; objects are split further by their key bytes.
    Rows whose keys run past their container are marked in ``bad`` and not yielded."""
    for group, signature in _groups(sig):
        if not is_obj:
            yield group, signature
            continue
        offs, lens = _key_fields(signature, k)
        lo, hi = int(offs.min()), int((offs + lens).max())
        fits = pos[group] + hi <= cend[group]
        bad[group[~fits]] = True
        group = group[fits]
        if not len(group):
            continue
        key_bytes = data[(pos[group] + lo)[:, None] + np.arange(hi - lo)]
        for sub, _ in _groups(key_bytes):
            yield group[sub], signature


def _key_texts(data: np.ndarray, first: int, signature: np.ndarray, k: int) -> list[str]:
    """``"key": `` texts (``, `` before all but the first) read from the group's first object."""
    offs, lens = _key_fields(signature, k)
    return [
        (", " if j else "") + jsonbin.quote_string(data[first + o : first + o + n].tobytes()) + ": "
        for j, (o, n) in enumerate(zip(offs.tolist(), lens.tolist(), strict=True))
    ]


def _groups(sig: np.ndarray):
    """Yield (row indices, signature) per distinct signature row."""
    if len(sig) == 0:
        return
    same = (sig == sig[0]).all(axis=1)
    if same.all():
        yield np.arange(len(sig)), sig[0]
        return
    uniq, inverse = np.unique(sig, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    for i, s in enumerate(uniq):
        yield np.flatnonzero(inverse == i), s
