"""Row format v2 (TiDB ``rowcodec``; reference §3.1, §3.2).

Layout: ``0x80 | flags | u16 not-null count | u16 null count | ids (u8 or u32) | end offsets (u16 or u32)
| data [| checksum]``. Not-null ids come first, ascending, then null ids, ascending. A column whose id is
in neither list is *absent* from the row (filled later, §3.5).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from backfill.codec import jsonbin, mydecimal
from backfill.codec.errors import CodecError
from backfill.codec.numbers import (
    cmp_bits_to_float,
    decode_compact_int,
    decode_compact_uint,
    encode_cmp_float,
    encode_compact_int,
    encode_compact_uint,
)
from backfill.codec.schema import UNSIGNED_STORED, ColumnKind, ColumnSchema

CODEC_VERSION = 0x80
FLAG_LARGE = 0x01
FLAG_CHECKSUM = 0x02
_SMALL_ID_MAX = 255
_SMALL_DATA_MAX = 0xFFFF


# ---------------------------------------------------------------- encode


def encode_cell(col: ColumnSchema, stored: Any) -> bytes:
    """Bytes of one not-null stored datum in the v2 data area."""
    kind = col.kind
    if kind in UNSIGNED_STORED:
        return encode_compact_uint(stored)
    if kind in (ColumnKind.INT, ColumnKind.YEAR, ColumnKind.TIME):
        return encode_compact_int(stored)
    if kind in (ColumnKind.FLOAT32, ColumnKind.FLOAT64):
        return encode_cmp_float(stored)
    if kind in (ColumnKind.TEXT, ColumnKind.BINARY, ColumnKind.VECTOR):
        return stored
    if kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR):
        d, prec, frac = stored
        return bytes([prec, frac]) + mydecimal.encode_decimal_bin(d, prec, frac)
    if kind == ColumnKind.JSON:
        code, raw = stored
        return bytes([code]) + raw
    raise CodecError(f"cannot encode kind {kind}", column=col.name)


def encode_row_v2(cells: Iterable[tuple[int, bytes | None]]) -> bytes:
    """Assemble a v2 row from ``(column id, cell bytes or None for NULL)``, in any order."""
    not_null: list[tuple[int, bytes]] = []
    nulls: list[int] = []
    for cid, cell in cells:
        if cell is None:
            nulls.append(cid)
        else:
            not_null.append((cid, cell))
    return assemble_row_v2(not_null, nulls)


def assemble_row_v2(not_null: list[tuple[int, bytes]], nulls: list[int]) -> bytes:
    """The v2 row of not-null ``(id, cell)`` pairs and NULL ids (both in any order; sorted in place)."""
    not_null.sort(key=_first)
    nulls.sort()
    ids = [c for c, _ in not_null]
    ids += nulls
    if len(set(ids)) != len(ids):
        twice = min(c for c in ids if ids.count(c) > 1)
        raise CodecError(f"column id {twice} given twice")
    if ids and (min(ids) < 0 or max(ids) > 0xFFFFFFFF):
        raise CodecError("column id out of uint32 range")
    if len(not_null) > 0xFFFF or len(nulls) > 0xFFFF:
        raise CodecError("too many columns for a v2 row")
    cells = [cell for _, cell in not_null]
    data = b"".join(cells)
    large = (bool(ids) and max(ids) > _SMALL_ID_MAX) or len(data) > _SMALL_DATA_MAX
    ends, end = [], 0
    for cell in cells:
        end += len(cell)
        ends.append(end)
    n, m = len(ids), len(ends)
    fmt = f"<BBHH{n}I{m}I" if large else f"<BBHH{n}B{m}H"
    return struct.pack(fmt, CODEC_VERSION, FLAG_LARGE if large else 0, m, len(nulls), *ids, *ends) + data


def _first(pair: tuple[int, bytes]) -> int:
    return pair[0]


# ---------------------------------------------------------------- decode


@dataclass(frozen=True, slots=True)
class RowV2Layout:
    """Parsed header of a v2 row: where each not-null column's bytes are, which ids are NULL."""

    not_null_ids: tuple[int, ...]
    null_ids: tuple[int, ...]
    offsets: tuple[int, ...]  # end offsets relative to data_start
    data_start: int
    large: bool

    def span(self, i: int) -> tuple[int, int]:
        start = self.offsets[i - 1] if i else 0
        return self.data_start + start, self.data_start + self.offsets[i]


def parse_row_v2(value: bytes) -> RowV2Layout:
    """Validate and parse the v2 header; every inconsistency is a CodecError with its byte offset."""
    n = len(value)
    if n < 6:
        raise CodecError(f"v2 row header needs 6 bytes, have {n}", offset=n)
    if value[0] != CODEC_VERSION:
        raise CodecError(f"unknown row format version byte {value[0]:#04x}", offset=0)
    flags = value[1]
    if flags & ~(FLAG_LARGE | FLAG_CHECKSUM):
        raise CodecError(f"unknown v2 row flags {flags:#04x}", offset=1)
    large = bool(flags & FLAG_LARGE)
    n_not_null, n_null = struct.unpack_from("<HH", value, 2)
    id_size, off_size = (4, 4) if large else (1, 2)
    ids_start = 6
    offs_start = ids_start + id_size * (n_not_null + n_null)
    data_start = offs_start + off_size * n_not_null
    if data_start > n:
        raise CodecError(
            f"v2 header ({n_not_null} not-null, {n_null} null ids) runs past the end ({data_start} > {n})",
            offset=min(offs_start, n),
        )
    if large:
        ids = struct.unpack_from(f"<{n_not_null + n_null}I", value, ids_start)
        offsets = struct.unpack_from(f"<{n_not_null}I", value, offs_start)
    else:
        ids = tuple(value[ids_start:offs_start])
        offsets = struct.unpack_from(f"<{n_not_null}H", value, offs_start)
    not_null, nulls = ids[:n_not_null], ids[n_not_null:]
    for group, base in ((not_null, 0), (nulls, n_not_null)):
        for i in range(1, len(group)):
            if group[i] <= group[i - 1]:
                raise CodecError(
                    f"column ids out of order: {group[i - 1]} then {group[i]}",
                    offset=ids_start + id_size * (base + i),
                )
    if nulls and not_null and set(nulls) & set(not_null):
        raise CodecError("a column id is both NULL and not NULL", offset=ids_start)
    prev = 0
    for i, off in enumerate(offsets):
        if off < prev:
            raise CodecError(
                f"value offsets go backwards ({prev} then {off})", offset=offs_start + off_size * i
            )
        prev = off
    data_end = data_start + prev
    if data_end > n:
        raise CodecError(
            f"value offset {prev} past the end of the data ({n - data_start} bytes)",
            offset=offs_start + off_size * max(n_not_null - 1, 0),
        )
    rest = n - data_end
    if flags & FLAG_CHECKSUM:
        if rest < 5:
            raise CodecError("truncated v2 checksum", offset=data_end)
        want = 5 + (4 if value[data_end] & 0x08 else 0)
        if rest != want:
            raise CodecError(f"v2 checksum area of {rest} bytes, expected {want}", offset=data_end)
    elif rest:
        raise CodecError(f"{rest} bytes after the last column value", offset=data_end)
    return RowV2Layout(tuple(not_null), tuple(nulls), tuple(offsets), data_start, large)


def decode_cell(col: ColumnSchema, value: bytes, start: int, end: int) -> Any:
    """Stored datum of one column from its v2 bytes ``value[start:end]``."""
    kind = col.kind
    cell = value[start:end]
    if kind in UNSIGNED_STORED:
        return decode_compact_uint(cell)
    if kind in (ColumnKind.INT, ColumnKind.YEAR, ColumnKind.TIME):
        return decode_compact_int(cell)
    if kind in (ColumnKind.FLOAT32, ColumnKind.FLOAT64):
        if len(cell) != 8:
            raise CodecError(f"float value of {len(cell)} bytes (want 8)")
        return cmp_bits_to_float(int.from_bytes(cell, "big"))
    if kind in (ColumnKind.TEXT, ColumnKind.BINARY, ColumnKind.VECTOR):
        return bytes(cell)
    if kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR):
        if len(cell) < 3:
            raise CodecError(f"decimal value of {len(cell)} bytes")
        prec, frac = cell[0], cell[1]
        d, p = mydecimal.decode_decimal_bin(cell, 2, prec, frac)
        if p != len(cell):
            raise CodecError(f"decimal({prec},{frac}) value has {len(cell) - p} extra bytes", offset=p)
        return d, prec, frac
    if kind == ColumnKind.JSON:
        if not cell:
            raise CodecError("empty JSON value")
        code = cell[0]
        raw = bytes(cell[1:])
        if jsonbin.binary_size(code, raw, 0) != len(raw):
            raise CodecError("JSON value length does not match its cell")
        return code, raw
    raise CodecError(f"cannot decode kind {kind}")


def decode_row_v2(columns: Iterable[ColumnSchema], value: bytes) -> dict[int, Any]:
    """Column id -> stored datum (None for NULL) for the given columns present in the row.

    Ids not asked for are ignored (unknown or dropped columns); asked-for ids not in the row are left out.
    """
    layout = parse_row_v2(value)
    index = {cid: i for i, cid in enumerate(layout.not_null_ids)}
    nulls = set(layout.null_ids)
    out: dict[int, Any] = {}
    for col in columns:
        i = index.get(col.id)
        if i is not None:
            start, end = layout.span(i)
            try:
                out[col.id] = decode_cell(col, value, start, end)
            except CodecError as e:
                raise e.at(offset=start, column=col.name) from None
        elif col.id in nulls:
            out[col.id] = None
    return out
