"""The key-range condition a MERGE gets: exact literals, nothing where a bound cannot be written."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from backfill.apply.merge import key_range_condition

pytestmark = pytest.mark.unit


def test_integer_string_decimal_and_date_bounds() -> None:
    assert key_range_condition("id", (3, 90)) == " AND t.`id` >= 3 AND t.`id` <= 90"
    assert key_range_condition("k", ("a'b", "z\\")) == " AND t.`k` >= 'a\\'b' AND t.`k` <= 'z\\\\'"
    assert key_range_condition("d", (Decimal("-1.50"), Decimal("1E+2"))) == (
        " AND t.`d` >= -1.50BD AND t.`d` <= 100BD"
    )
    day = datetime.date(2024, 2, 29)
    assert (
        key_range_condition("day", (day, day))
        == " AND t.`day` >= DATE'2024-02-29' AND t.`day` <= DATE'2024-02-29'"
    )


def test_no_condition_without_exact_bounds() -> None:
    assert key_range_condition("id", None) == ""
    assert key_range_condition("id", (None, None)) == ""  # every key NULL (or no rows)
    assert key_range_condition("f", (0.5, 1.5)) == ""  # floats: not pruned
    assert key_range_condition("b", (True, False)) == ""
    assert key_range_condition("t", (datetime.datetime(2024, 1, 1), datetime.datetime(2024, 1, 2))) == ""
