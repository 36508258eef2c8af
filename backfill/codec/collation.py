"""Collation sort keys as TiDB's new collation framework writes them into clustered keys (reference §2.3).

With new collation on, a string column of a clustered primary key is written into the record key as
``collate.GetCollator(coll).Key(s)``, not as its text (pkg/util/collate; TiKV computes the same keys in
tidb_query_datatype/src/codec/collation):

- ``binary`` and ``utf8mb4_0900_bin``: the bytes as they are (NO PAD).
- ``*_bin`` (utf8mb4_bin, utf8_bin, ...): PAD SPACE, trailing spaces trimmed, bytes kept.
- ``utf8mb4_general_ci`` / ``utf8_general_ci``: trailing spaces trimmed, then per rune one 16-bit weight
  big-endian from the general_ci plane table (runes above U+FFFF weigh 0xFFFD).
- ``utf8mb4_unicode_ci`` / ``utf8_unicode_ci``: trailing spaces trimmed, then per rune its UCA 4.0.0
  weights (0 to 8 of them; ignorable runes write none), each 16-bit big-endian; runes above U+FFFF weigh
  0xFFFD, so the BMP table is the whole collation.

Invalid UTF-8 ends the key where it starts, as TiDB's loops do. The weights are in
``collation_weights.bin`` (made by dev/gen_collation_weights.py). Many strings share one sort key ('abc',
'ABC', 'Abc '): such a key cannot give the value back, so the row value always carries the column.
"""

from __future__ import annotations

import struct
import zlib
from functools import cache
from pathlib import Path

from backfill.codec.errors import CodecError

NO_PAD = frozenset({"binary", "utf8mb4_0900_bin"})
PAD_SPACE_BIN = frozenset({"utf8mb4_bin", "utf8_bin", "latin1_bin", "ascii_bin", "gbk_bin", "gb18030_bin"})
GENERAL_CI = frozenset({"utf8mb4_general_ci", "utf8_general_ci"})
UNICODE_CI = frozenset({"utf8mb4_unicode_ci", "utf8_unicode_ci"})
SUPPORTED = NO_PAD | PAD_SPACE_BIN | GENERAL_CI | UNICODE_CI

_DATA = Path(__file__).with_name("collation_weights.bin")
_OUTSIDE_BMP = b"\xff\xfd"


def gives_value(collate: str | None) -> bool:
    """Whether a sort key under `collate` is the value itself (up to trailing spaces for PAD SPACE)."""
    return not collate or collate in NO_PAD or collate in PAD_SPACE_BIN


def sort_key(collate: str | None, text: bytes) -> bytes:
    """The sort key of UTF-8 `text` under `collate`, byte for byte as TiDB's ``Collator.Key``."""
    if not collate or collate in NO_PAD:
        return text
    if collate in PAD_SPACE_BIN:
        return text.rstrip(b" ")
    if collate in GENERAL_CI:
        return _weights(text.rstrip(b" "), _tables()[0])
    if collate in UNICODE_CI:
        return _weights(text.rstrip(b" "), _tables()[1])
    raise CodecError(f"sort keys for collation {collate!r} are not implemented (known: {sorted(SUPPORTED)})")


def _weights(text: bytes, per_rune: tuple[bytes, ...]) -> bytes:
    try:
        runes = text.decode("utf-8")
    except UnicodeDecodeError as e:  # TiDB stops at the first invalid byte
        runes = text[: e.start].decode("utf-8")
    return b"".join(per_rune[ord(r)] if ord(r) <= 0xFFFF else _OUTSIDE_BMP for r in runes)


@cache
def _tables() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """(general_ci, unicode_ci): per BMP code point, its key bytes."""
    raw = zlib.decompress(_DATA.read_bytes())
    if raw[:5] != b"TLCW1":
        raise CodecError(f"{_DATA}: not a collation weight table")
    planes: dict[int, tuple[int, ...]] = {}
    pos = 6
    for _ in range(raw[5]):
        planes[raw[pos]] = struct.unpack(">256H", raw[pos + 1 : pos + 513])
        pos += 513
    general = tuple(
        struct.pack(">H", planes[cp >> 8][cp & 0xFF] if cp >> 8 in planes else cp) for cp in range(0x10000)
    )
    unicode: list[bytes] = []
    for cp in range(0x10000):
        n = raw[pos]
        if n == 0x80:  # UCA implicit weights
            (base,) = struct.unpack(">H", raw[pos + 1 : pos + 3])
            unicode.append(struct.pack(">HH", base + (cp >> 15), (cp & 0x7FFF) | 0x8000))
            pos += 3
        else:
            unicode.append(raw[pos + 1 : pos + 1 + 2 * n])
            pos += 1 + 2 * n
    if pos != len(raw):
        raise CodecError(f"{_DATA}: {len(raw) - pos} bytes after the tables")
    return general, tuple(unicode)
