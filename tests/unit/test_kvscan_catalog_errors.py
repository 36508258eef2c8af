"""A capture's tables.jsonl whose TableInfo cannot describe a table stops the run naming the file and the
table (issue 17 §3, found by the drill: the message said only `KeyError('id')`)."""

from __future__ import annotations

import pytest

from backfill.sources.kvscan.capture_tables import build_catalog
from backfill.sources.kvscan.format import TableDoc
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

COLUMN = {"id": 1, "name": {"O": "id", "L": "id"}, "offset": 0, "state": 5, "type": {"Tp": 8, "Flag": 3}}


@pytest.mark.parametrize(
    ("info", "reason"),
    [
        ({"name": {"O": "users", "L": "users"}, "cols": [COLUMN]}, "no 'id' field"),
        ({"id": 7, "name": {"O": "users", "L": "users"}}, "no 'cols' field"),
        (
            {"id": 7, "name": {"O": "users", "L": "users"}, "cols": [{**COLUMN, "type": None}]},
            "bad TableInfo",
        ),
    ],
    ids=["id", "cols", "column type"],
)
def test_a_broken_table_info_names_the_file_and_the_table(info: dict, reason: str) -> None:
    with pytest.raises(InputError) as caught:
        build_catalog([TableDoc("app", info)], [], 100, ["*.*"], "s2/schema/tables.jsonl")
    message = str(caught.value)
    assert message.startswith("s2/schema/tables.jsonl: table app.users (id ")
    assert reason in message and "KeyError" not in message, message
