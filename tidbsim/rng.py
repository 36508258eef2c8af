"""The simulator's random source: the stdlib generator with its hottest draws called directly.

A workload of a million events draws some ten million numbers. ``Random.randint`` goes through
``randrange``'s argument checks and ``choice`` through a length check before both reach ``_randbelow``;
called straight, the same draws cost about half. The stream is the stdlib's, draw for draw, so a seed
gives the same workload as before.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import SupportsLenAndGetItem

T = TypeVar("T")


class SimRandom(random.Random):
    """``random.Random`` with ``randint`` and ``choice`` taking the stdlib's draws without its detours."""

    _randbelow: Callable[[int], int]  # the stdlib's own (typeshed leaves it out)

    def randint(self, a: int, b: int) -> int:
        if b < a:
            raise ValueError(f"empty range for randint({a}, {b})")
        return a + self._randbelow(b - a + 1)

    def choice(self, seq: SupportsLenAndGetItem[T]) -> T:
        if not seq:
            raise IndexError("cannot choose from an empty sequence")
        return seq[self._randbelow(len(seq))]
