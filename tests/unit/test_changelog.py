"""The simulator's TiCDC change log reads back every record, however many were written (it once broke
past the writer's 10,000th record, where a shared pickle memo was cleared), with every value of the same
type and value (typed Arrow columns), and logs of the formats written before read too."""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal

import pytest

from tidbsim.changelog import ChangeLog, read_changelog, read_changelog_columnar

pytestmark = pytest.mark.unit


def _typed(records):
    """Records with each row value next to its type (== alone would take 1 for True, a naive for an aware
    datetime's equal, Decimal('1.0') for Decimal('1.00'))."""
    out = []
    for rec in records:
        if rec[0] == "row":
            rec = (*rec[:6], *({k: (type(v), str(v)) for k, v in r.items()} if r else r for r in rec[6:]))
        out.append(rec)
    return out


def test_many_records_with_shared_values_read_back_unchanged(tmp_path):
    log = ChangeLog(tmp_path / "changes.pkl")
    shared = {"name": "x" * 20}  # the same object in every record: a memo would reference it
    records = [("schema", (1, 0), "db", {"id": 1, "name": {"O": "t"}})]
    records += [("row", i, "db", f"t{i % 7}", (1, 0), None, shared, None) for i in range(25_017)]
    records.append(("ddl", 25_018, "db", "t", "TRUNCATE TABLE t", 11, None))
    for record in records:
        log._add(record)
    log.close()
    assert list(read_changelog(tmp_path / "changes.pkl")) == records


def test_row_values_keep_their_types(tmp_path):
    """Each column is typed by its values (ints past int64 unsigned; Decimal as its text; naive and UTC
    datetimes); anything else (bools, other zones, mixed types, folds) is kept pickled value by value."""
    utc = dt.datetime(2024, 3, 1, 12, 30, 5, 123456, tzinfo=dt.UTC)
    rows = [
        {
            "i": 5, "big": 2**64 - 1, "neg": -(2**63), "f": -0.0, "s": "\u00e9\u4e2d\u2028<", "b": b"\x00\xff",
            "d": Decimal("1.50"), "d0": Decimal("0E-10"), "day": dt.date(999, 1, 2), "naive": utc.replace(tzinfo=None),
            "aware": utc, "flag": True, "mixed": 1, "zone": utc.astimezone(dt.timezone(dt.timedelta(hours=8))),
            "fold": dt.datetime(2024, 11, 3, 1, 30, fold=1), "none": None,
        },
        {
            "i": None, "big": 7, "neg": 3, "f": float("inf"), "s": None, "b": b"", "d": Decimal("-0.001"),
            "d0": None, "day": None, "naive": None, "aware": None, "flag": None, "mixed": "1", "zone": None,
            "fold": None, "none": None,
        },
    ]  # fmt: skip
    records = [
        ("row", 10, "db", "t", (1, 0), None, rows[0], None),
        ("row", 11, "db", "t", (1, 0), 42, rows[1], rows[0]),
        ("row", 12, "db", "t", (1, 0), None, None, rows[1]),
        ("row", 13, "db", "u", (2, 0), None, {"a": 1}, None),
    ]
    log = ChangeLog(tmp_path / "changes.pkl")
    for record in records:
        log._add(record)
    log.close()
    back = list(read_changelog(tmp_path / "changes.pkl"))
    assert back == records and _typed(back) == _typed(records)
    assert back[0][6]["aware"].tzinfo is dt.UTC
    [chunk] = read_changelog_columnar(tmp_path / "changes.pkl")
    tags = {g.skey: dict(zip(g.names, g.tags, strict=True)) for g in chunk.groups}
    assert tags[(1, 0)] == {
        "i": "int", "big": "int", "neg": "int", "f": "float", "s": "str", "b": "bytes", "d": "decimal",
        "d0": "decimal", "day": "date", "naive": "datetime", "aware": "datetime_utc", "flag": "pickle",
        "mixed": "pickle", "zone": "pickle", "fold": "pickle", "none": "none",
    }  # fmt: skip


@pytest.mark.parametrize("per_pickle", [1, 256])
def test_logs_of_earlier_formats_read_too(tmp_path, per_pickle):
    """Logs written before the columnar chunks (one pickle per record, then lists of 256) read the same,
    as records and as chunks."""
    records = [("row", i, "db", "t", (1, 0), None, {"a": i, "b": Decimal(i)}, None) for i in range(600)]
    records.insert(300, ("ddl", 300, "db", "t", "ALTER TABLE t ADD c INT", 5, None))
    pickles = [records[i : i + per_pickle] for i in range(0, len(records), per_pickle)]
    data = b"".join(pickle.dumps(p[0] if per_pickle == 1 else p) for p in pickles)
    (tmp_path / "old.pkl").write_bytes(data)
    assert list(read_changelog(tmp_path / "old.pkl")) == records
    chunks = list(read_changelog_columnar(tmp_path / "old.pkl", records=256))
    assert [rec for chunk in chunks for rec in chunk.python_records()] == records
    assert len(chunks) == 3
