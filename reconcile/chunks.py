"""Key ranges: chunk planning from upstream boundaries, and bisection. Pure, and free of SQL.

A chunk is a half-open key range `[lower, upper)`; `None` means unbounded. Boundaries come from the
upstream (the first key of every `chunk_size` rows), so chunks hold about `chunk_size` upstream rows,
the first chunk starts at minus infinity and the last ends at plus infinity: every Delta row, even one
whose key the upstream never had, falls in exactly one chunk. Composite keys compare lexicographically
on both sides (the upstream dialect writes the range as SQL, `reconcile.sparkside` as Spark columns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Key = tuple[Any, ...]


@dataclass(frozen=True)
class KeyRange:
    """Keys `k` with `lower <= k < upper` (lexicographic); a `None` bound is unbounded."""

    lower: Key | None = None
    upper: Key | None = None

    def contains(self, key: Key) -> bool:
        return (self.lower is None or key >= self.lower) and (self.upper is None or key < self.upper)

    def describe(self) -> str:
        low = "-inf" if self.lower is None else _show(self.lower)
        high = "+inf" if self.upper is None else _show(self.upper)
        return f"[{low}, {high})"


def _show(key: Key) -> str:
    return str(key[0]) if len(key) == 1 else "(" + ", ".join(map(str, key)) + ")"


def ranges_from_boundaries(boundaries: Sequence[Key]) -> list[KeyRange]:
    """Chunks covering the whole key space, split at each boundary (sorted, distinct)."""
    points: list[Key | None] = [None, *boundaries, None]
    return [KeyRange(points[i], points[i + 1]) for i in range(len(points) - 1)]


def split(key_range: KeyRange, points: Sequence[Key]) -> list[KeyRange]:
    """Split a range at the given interior points (outside points and duplicates are dropped)."""
    inside = sorted({p for p in points if key_range.contains(p) and p != key_range.lower})
    bounds: list[Key | None] = [key_range.lower, *inside, key_range.upper]
    return [KeyRange(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def effective_chunk_size(rows_hint: int | None, chunk_size: int, max_chunks: int) -> int:
    """Grow the chunk size so a table never has more than `max_chunks` chunks."""
    if rows_hint is None or rows_hint <= chunk_size * max_chunks:
        return chunk_size
    return -(-rows_hint // max_chunks)


Checksum = tuple[int, int]  # (row count, sum of row hashes)


Part = tuple[KeyRange, Checksum]


def narrow(
    differing: Sequence[Part],
    split: Callable[[Sequence[Part]], Sequence[Sequence[Part]]],
    delta_checksums: Callable[[Sequence[KeyRange]], Sequence[Checksum]],
    *,
    leaf_rows: int,
    max_rounds: int = 40,
) -> list[KeyRange]:
    """Bisect differing ranges until each holds at most `leaf_rows` upstream rows; return the leaves.

    `differing` are ranges known to differ, with their upstream (count, checksum). Each round,
    `split` cuts every range with more than `leaf_rows` upstream rows into parts of equal upstream
    row counts (two for a binary search, k for a k-way split as reladiff's bisection factor) and
    returns each part with its upstream checksum, in one query per range; `delta_checksums` then
    checks all parts of the round on the Delta side in one batch. Parts that agree are dropped, the
    rest go to the next round: rounds, not ranges, cost round trips. A range that cannot be cut
    (one upstream key, or rows only on the Delta side) is a leaf however big it is.
    """
    leaves: list[KeyRange] = []
    pending = list(differing)
    for _ in range(max_rounds):
        big = [(r, up) for r, up in pending if up[0] > leaf_rows]
        leaves += [r for r, up in pending if up[0] <= leaf_rows]
        if not big:
            return sorted(leaves, key=_order)
        parts: list[Part] = []
        for (key_range, _up), cut in zip(big, split(big), strict=True):
            if len(cut) < 2:
                leaves.append(key_range)
            else:
                parts += cut
        down = delta_checksums([r for r, _ in parts]) if parts else []
        pending = [(r, up) for (r, up), d in zip(parts, down, strict=True) if tuple(up) != tuple(d)]
    return sorted(leaves + [r for r, _ in pending], key=_order)


def _order(key_range: KeyRange) -> tuple[bool, Key]:
    return (key_range.lower is not None, key_range.lower or ())
