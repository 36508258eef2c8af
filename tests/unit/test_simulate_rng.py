"""The simulator's random source draws exactly what the stdlib's does for a seed."""

from __future__ import annotations

import random

import pytest

from tidbsim.rng import SimRandom

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_the_same_draws_as_the_stdlib(seed: int) -> None:
    ours, stdlib = SimRandom(seed), random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    ranges = [(0, 0), (1, 3), (-100_000, 100_000), (0, 2**64 - 1), (-(10**12), 10**12), (5, 6)]
    for i in range(3_000):
        lo, hi = ranges[i % len(ranges)]
        assert ours.randint(lo, hi) == stdlib.randint(lo, hi)
        assert ours.choice(letters) == stdlib.choice(letters)
        assert ours.choice(ranges) == stdlib.choice(ranges)
        # Draws the class leaves alone stay in step too.
        assert ours.random() == stdlib.random()
        assert ours.sample(letters, 3) == stdlib.sample(letters, 3)


def test_empty_draws_fail_as_the_stdlib_does() -> None:
    rng = SimRandom(1)
    with pytest.raises(ValueError, match="empty range"):
        rng.randint(3, 2)
    with pytest.raises(IndexError):
        rng.choice([])
    with pytest.raises(IndexError):
        rng.choice("")
