"""Kafka without a schema folder: schema versions from the DDL events' text (`kafka.text_schema`)."""

from __future__ import annotations

import pytest

from backfill.codec.ddl_text import create_table_info
from backfill.sources.kafka.text_schema import (
    DdlEvent,
    KnownTable,
    rename_targets,
    schemas_at,
    text_histories,
)
from tidelake.errors import InputError

pytestmark = pytest.mark.unit


def ddl(ts: int, table: str, query: str, partition: int = 0) -> DdlEvent:
    return DdlEvent(ts, "s", table, query, f"topic 't' partition {partition} offset {ts}")


def test_versions_follow_the_ddl_text_once_per_ddl_and_only_above_what_is_known() -> None:
    _, _, info = create_table_info("CREATE TABLE s.a (id int PRIMARY KEY, v int)", table_id=1)
    known = [KnownTable("s", "a", info, since=10)]
    events = [
        ddl(5, "a", "ALTER TABLE s.a ADD COLUMN old int"),  # in the known schema already
        *(
            ddl(20, "a", "ALTER TABLE s.a ADD COLUMN w decimal(6,2)", p) for p in (0, 1, 2)
        ),  # to every partition
        ddl(30, "b", "RENAME TABLE s.a TO s.b"),  # TiCDC names the new table
        ddl(40, "b", "TRUNCATE TABLE s.b"),
        ddl(45, "c", "CREATE TABLE s.c (k varchar(8) PRIMARY KEY, e enum('x','y'))"),
        ddl(50, "b", "DROP TABLE s.b"),
        ddl(60, "c", "ALTER TABLE s.c DROP COLUMN e"),  # above the resolved ts: a later run's
        ddl(41, "z", "ALTER TABLE s.z ADD COLUMN q int"),  # a table the job does not track
    ]
    a, c = text_histories(known, events, resolved_ts=55, patterns=["s.*"])
    assert [(v.finished_ts, v.job_type) for v in a.versions] == [
        (0, None),
        (20, None),
        (30, 14),
        (40, 11),
        (50, 4),
    ]
    assert [c.name for c in a.versions[1].schema.columns] == ["id", "v", "w"]
    assert a.versions[2].schema.name == "b" and a.versions[3].schema.table_id != a.versions[2].schema.table_id
    assert a.versions[-1].schema is None and a.label == "s.a → s.b"
    assert (c.start_ts, c.versions[-1].schema.by_name["e"].elems) == (45, ("x", "y"))
    assert set(schemas_at([a, c], 55)) == {"s.c"}
    assert rename_targets(events) == {("s", "b")}


def test_a_ddl_that_removes_partition_rows_or_does_not_fit_stops_naming_it() -> None:
    _, _, info = create_table_info("CREATE TABLE s.a (id int PRIMARY KEY, v int)", table_id=1)
    known = [KnownTable("s", "a", info, since=0)]
    with pytest.raises(InputError, match=r"topic 't' partition 0 offset 5: .*DROP PARTITION"):
        text_histories(known, [ddl(5, "a", "ALTER TABLE s.a DROP PARTITION p0")], 9, ["s.*"])
    with pytest.raises(InputError, match=r"offset 6: DDL of s.a at ts 6: .*has no column 'nope'"):
        text_histories(known, [ddl(6, "a", "ALTER TABLE s.a DROP COLUMN nope")], 9, ["s.*"])
