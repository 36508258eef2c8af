"""The simulator's TiCDC change log reads back every record, also past the writer's memo clears."""

from __future__ import annotations

import pytest

from backfill.simulate.changelog import MEMO_RECORDS, ChangeLog, read_changelog

pytestmark = pytest.mark.unit


def test_records_past_a_memo_clear_read_back_unchanged(tmp_path):
    log = ChangeLog(tmp_path / "changes.pkl")
    records = [("ddl", i, "db", f"t{i % 7}", "ALTER TABLE x", 5) for i in range(2 * MEMO_RECORDS + 17)]
    for record in records:
        log._add(record)
    log.close()
    assert list(read_changelog(tmp_path / "changes.pkl")) == records
