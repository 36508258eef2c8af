"""Generate backfill/codec/collation_weights.bin: the weight tables of TiDB's utf8mb4_general_ci and
utf8mb4_unicode_ci collators (new collation framework), for `backfill.codec.collation`.

Usage: python dev/gen_collation_weights.py <tikv git dir> [commit]

The tables are read from TiKV's copy of them (TiKV computes the same sort keys for pushed-down
expressions): components/tidb_query_datatype/src/codec/collation/collator/utf8mb4_general_ci.rs
(`GENERAL_CI_PLANE_*`) and .../utf8mb4_uca/data_0400.rs (`UNICODE_CI_TABLE`, `map_long_rune`),
generated upstream from UCA allkeys-4.0.0.txt. The TiDB repository snapshot is too large to fetch here,
so TiDB's own tables (pkg/util/collate/general_ci.go `planeTable`, pkg/util/collate/ucadata/
unicode_ci_data_generated.go `DUCET0400Table`) were compared entry for entry over the parts read
(MapTable4 for U+0000-U+0158 and U+FF9F-U+FFFF, the whole LongRuneMap, general_ci plane 04) and by
TiDB's Key vectors (collate_test.go `TestUTF8CollatorKey`), which tests/unit/test_collation.py runs.

Read at: TiKV 0c96285516143dd28d9f42e4ea468d1133eab279 (last change of both files; snapshot
8e964719db0d2088d47a280a1dde3fefa1b31d6b); TiDB general_ci.go 0b229c97526123e9038689290e534a5f72a9e30d,
unicode_ci_data_generated.go b9c3d07a0fe96968f27764b5ffa5de3f5b085be5, collate_test.go
0abd01a3493e000931e9e67ffc052d90c2f7036f.

Layout (zlib-compressed): b"TLCW1", u8 number of general_ci planes, per plane u8 plane index + 256 u16
BE weights; then 65536 unicode_ci entries, each a u8 count n (0..8) and n u16 BE weights in key order,
or 0x80 + u16 BE base for the UCA implicit weights [base + (cp >> 15), (cp & 0x7FFF) | 0x8000].
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

COLLATOR = "components/tidb_query_datatype/src/codec/collation/collator"
OUT = Path(__file__).resolve().parent.parent / "backfill" / "codec" / "collation_weights.bin"
LONG_RUNE = 0xFFFD


def show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def general_ci_planes(text: str) -> dict[int, list[int]]:
    planes = {}
    for m in re.finditer(r"static GENERAL_CI_PLANE_([0-9A-F]{2}): \[u16; 256\] = \[(.*?)\];", text, re.S):
        values = [int(v, 16) for v in re.findall(r"0x[0-9A-Fa-f]+", m.group(2))]
        assert len(values) == 256, m.group(1)
        planes[int(m.group(1), 16)] = values
    table = re.search(r"static GENERAL_CI_PLANE_TABLE.*?= \[(.*?)\];", text, re.S)
    assert table is not None
    slots = re.findall(r"None|Some\(&GENERAL_CI_PLANE_([0-9A-F]{2})\)", table.group(1))
    assert len(slots) == 256
    used = {i: int(s, 16) for i, s in enumerate(slots) if s}
    assert all(i == p for i, p in used.items()) and set(used) == set(planes), "plane table layout"
    return planes


def weights(packed: int) -> list[int]:
    """Weights of a packed entry, first weight in the low 16 bits (TiDB/TiKV `Key` loop)."""
    out = []
    while packed:
        out.append(packed & 0xFFFF)
        packed >>= 16
    return out


def unicode_ci_table(text: str) -> list[list[int]]:
    long_runes = {int(cp, 16): int(w, 16) for cp, w in re.findall(r"(0x[0-9A-F]+) => (0x[0-9A-F]+),", text)}
    body = re.search(r"static UNICODE_CI_TABLE: \[u64; 0x10000\] = \[(.*?)\];", text, re.S)
    assert body is not None
    values = [int(v, 16) if v != "0" else 0 for v in re.findall(r"0x[0-9A-Fa-f]+|\b0\b", body.group(1))]
    assert len(values) == 0x10000, len(values)
    table = []
    for cp, v in enumerate(values):
        if v == LONG_RUNE:
            assert cp in long_runes, f"{cp:#x} is marked long but has no long weights"
            v = long_runes[cp]
        table.append(weights(v))
    return table


def encode(planes: dict[int, list[int]], table: list[list[int]]) -> bytes:
    out = bytearray(b"TLCW1")
    out.append(len(planes))
    for index in sorted(planes):
        out.append(index)
        out += struct.pack(">256H", *planes[index])
    for cp, w in enumerate(table):
        implicit_tail = (cp & 0x7FFF) | 0x8000
        if len(w) == 2 and w[1] == implicit_tail and w[0] - (cp >> 15) in range(0xFB40, 0xFC00):
            out.append(0x80)
            out += struct.pack(">H", w[0] - (cp >> 15))
        else:
            assert len(w) <= 8
            out.append(len(w))
            out += struct.pack(f">{len(w)}H", *w)
    return zlib.compress(bytes(out), 9)


def main() -> None:
    git_dir = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    planes = general_ci_planes(show(git_dir, commit, f"{COLLATOR}/utf8mb4_general_ci.rs"))
    table = unicode_ci_table(show(git_dir, commit, f"{COLLATOR}/utf8mb4_uca/data_0400.rs"))
    data = encode(planes, table)
    OUT.write_bytes(data)
    print(f"{OUT}: {len(data)} bytes, {len(planes)} general_ci planes, {len(table)} unicode_ci entries")


if __name__ == "__main__":
    main()
