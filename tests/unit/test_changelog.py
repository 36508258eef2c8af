"""The simulator's TiCDC change log reads back every record, however many were written (it once broke
past the writer's 10,000th record, where a shared pickle memo was cleared)."""

from __future__ import annotations

import pytest

from tidbsim.changelog import ChangeLog, read_changelog

pytestmark = pytest.mark.unit


def test_many_records_with_shared_values_read_back_unchanged(tmp_path):
    log = ChangeLog(tmp_path / "changes.pkl")
    shared = {"name": "x" * 20}  # the same object in every record: a memo would reference it
    records = [("row", i, "db", f"t{i % 7}", shared, 5) for i in range(25_017)]
    for record in records:
        log._add(record)
    log.close()
    assert list(read_changelog(tmp_path / "changes.pkl")) == records


def test_a_log_of_single_records_reads_too(tmp_path):
    """Logs written before records were pickled in lists (one pickle per record) read the same."""
    import pickle

    records = [("row", i, "db", "t", {"a": i}, None) for i in range(5)]
    (tmp_path / "old.pkl").write_bytes(b"".join(pickle.dumps(r) for r in records))
    assert list(read_changelog(tmp_path / "old.pkl")) == records
