"""Tables that hand a Delta path to one another (rename, re-create) are applied in order, in one group."""

from __future__ import annotations

import pytest

from backfill.apply.stage import sharing_groups

pytestmark = pytest.mark.unit


def test_unrelated_tables_each_get_a_group() -> None:
    assert sharing_groups([["a"], ["b"], ["c"]]) == [[0], [1], [2]]


def test_a_name_shared_directly_or_through_a_chain_joins_groups_in_order() -> None:
    # 0 is renamed a -> b, 2 re-creates a, 5 moves b -> e where 4 was; 1 and 3 share c
    names = [["a", "b"], ["c"], ["a"], ["d", "c"], ["e"], ["b", "e"]]
    assert sharing_groups(names) == [[0, 2, 4, 5], [1, 3]]


def test_no_tables() -> None:
    assert sharing_groups([]) == []
