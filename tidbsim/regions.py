"""Regions: contiguous raw-key ranges covering the whole key space, split as tables appear and grow.

Splits follow TiKV's default right-derive: the right part keeps the region id, the left part gets a new
one. Boundaries are raw TiDB keys (the manifest's form); ``b""`` is the open end.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True)
class Region:
    id: int
    start: bytes
    end: bytes  # b"" = +infinity

    def contains(self, key: bytes) -> bool:
        return self.start <= key and (not self.end or key < self.end)

    def overlaps(self, start: bytes, end: bytes) -> bool:
        return (not self.end or start < self.end) and (not end or self.start < end)


class RegionMap:
    def __init__(self, first_id: int = 2) -> None:
        self._next_id = first_id + 1
        self.regions: list[Region] = [Region(first_id, b"", b"")]
        self._starts: list[bytes] = [b""]
        self.splits = 0

    def locate(self, key: bytes) -> Region:
        return self.regions[bisect.bisect_right(self._starts, key) - 1]

    def split(self, at: bytes) -> bool:
        """Split the region containing ``at`` so that a region starts at ``at``; False if one already does."""
        i = bisect.bisect_right(self._starts, at) - 1
        r = self.regions[i]
        if r.start == at:
            return False
        left = Region(self._next_id, r.start, at)
        right = Region(r.id, at, r.end)
        self._next_id += 1
        self.regions[i : i + 1] = [left, right]
        self._starts[i : i + 1] = [left.start, right.start]
        self.splits += 1
        return True
