"""The simulated PD timestamp oracle: strictly increasing TSOs over a simulated wall clock."""

from __future__ import annotations

from tidelake.tso import LOGICAL_BITS, compose_ts

START_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z: fixed, so a seed always yields the same TSOs


class Oracle:
    """Hands out ``physical_ms << 18 | logical``; the clock only moves when the simulation says so.

    Every allocation is strictly greater than the one before, which is what makes resolved ts truthful:
    a commit ts is always allocated after any ts a region already reported as resolved.
    """

    def __init__(self, start_ms: int = START_MS) -> None:
        self.physical_ms = start_ms
        self._logical = 0

    def advance(self, ms: int) -> None:
        if ms > 0:
            self.physical_ms += ms
            self._logical = 0

    def next(self) -> int:
        self._logical += 1
        if self._logical >> LOGICAL_BITS:
            self.physical_ms += 1
            self._logical = 1
        return compose_ts(self.physical_ms, self._logical)
