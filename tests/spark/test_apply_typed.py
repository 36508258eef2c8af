"""The shared apply stage with already-typed changes (TiCDC's outputs): the collapse rule, tables merged by
their primary key without `_tidb_rowid`, and tables without a key as multisets."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from backfill.apply.stage import ApplyTarget, apply_window
from backfill.changes.typed import TypedRowChanges
from backfill.codec import SchemaVersion, TableSchema
from backfill.sources.base import StageClock, Window
from backfill.tables import RowIdentity, TrackedTable, identity_without_handle
from tests.captures import BIGINT, NOT_NULL, PRI_KEY, VARCHAR, column, users_table
from tidelake import delta

pytestmark = pytest.mark.spark

APP = "tidelake:typed"
CHANGE_COLUMNS = "_tidb_op STRING, _tidb_commit_ts BIGINT, _tidb_line BIGINT"


def keyless_table(table_id: int = 200, *, nonclustered_pk: bool = False) -> dict[str, Any]:
    """`k BIGINT [PRIMARY KEY NONCLUSTERED], v VARCHAR(16)`: the handle is `_tidb_rowid`."""
    cols = [
        column(1, "k", BIGINT, flag=(NOT_NULL | PRI_KEY) if nonclustered_pk else 0, flen=20, offset=0),
        column(2, "v", VARCHAR, flen=16, offset=1),
    ]
    return {"id": table_id, "name": {"O": "events", "L": "events"}, "cols": cols, "pk_is_handle": False,
            "state": 5, "max_col_id": 2, "index_info": []}  # fmt: skip


def window(schema: TableSchema, floor: int, resolved: int, identity: RowIdentity) -> Window:
    table = TrackedTable((SchemaVersion(0, schema),), 0)
    return Window(floor, resolved, (table,), (floor,), identities={0: identity})


def apply(spark, warehouse: str, schema: TableSchema, rows: list[tuple], floor: int, resolved: int,
          identity: RowIdentity = RowIdentity.HANDLE) -> None:  # fmt: skip
    ddl = f"{schema.spark_ddl.replace(' NOT NULL', '')}, {CHANGE_COLUMNS}"
    w = window(schema, floor, resolved, identity)
    raw = {(0, 0): spark.createDataFrame(rows, ddl)}
    changes = TypedRowChanges(w.segment_keys(raw), raw)
    try:
        apply_window(spark, ApplyTarget(warehouse, APP), w, changes, StageClock())
    finally:
        changes.release()


def read(spark, warehouse: str, name: str) -> list[tuple]:
    frame = spark.read.format("delta").load(f"{warehouse}/app/{name}")
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def test_last_change_per_key_wins_and_a_put_wins_a_tie(spark, warehouse) -> None:
    schema = TableSchema.from_table_info(users_table(), schema_name="app")
    apply(spark, warehouse, schema, [
        (1, "a", 1, "PUT", 10, 1), (1, "b", 2, "PUT", 20, 2),          # the later commit wins
        (2, "x", 1, "PUT", 10, 3), (2, None, None, "DELETE", 30, 4),   # deleted again: never written
        (3, "new", 5, "PUT", 40, 6), (3, None, None, "DELETE", 40, 5),  # D+I of a moved key at one ts
        (4, "late", 1, "PUT", 40, 7), (4, "later", 2, "PUT", 40, 8),   # one ts: the later line
    ], floor=0, resolved=100)  # fmt: skip
    assert read(spark, warehouse, "users") == [(1, "b", 2, 20), (3, "new", 5, 40), (4, "later", 2, 40)]
    apply(spark, warehouse, schema, [
        (1, None, None, "DELETE", 110, 1), (3, "newer", 6, "PUT", 120, 1), (9, "nine", 9, "PUT", 130, 1),
    ], floor=100, resolved=200)  # fmt: skip
    assert read(spark, warehouse, "users") == [(3, "newer", 6, 120), (4, "later", 2, 40), (9, "nine", 9, 130)]


def test_a_nonclustered_primary_key_merges_by_its_columns_without_rowid(spark, warehouse) -> None:
    schema = TableSchema.from_table_info(keyless_table(nonclustered_pk=True), schema_name="app")
    identity = identity_without_handle(schema)
    assert schema.pk_kind == "rowid" and identity is RowIdentity.PRIMARY_KEY
    apply(spark, warehouse, schema, [(None, 1, "a", "PUT", 10, 1), (None, 2, "b", "PUT", 10, 2)], 0, 100,
          identity)  # fmt: skip
    apply(spark, warehouse, schema, [(None, 1, "A", "PUT", 110, 1), (None, 2, None, "DELETE", 120, 1)], 100,
          200, identity)  # fmt: skip
    assert read(spark, warehouse, "events") == [(None, 1, "A", 110)]


def test_a_table_without_a_key_is_a_multiset(spark, warehouse) -> None:
    schema = TableSchema.from_table_info(keyless_table(), schema_name="app")
    identity = identity_without_handle(schema)
    assert identity is RowIdentity.WHOLE_ROW
    apply(spark, warehouse, schema, [
        (None, 1, "x", "PUT", 10, 1), (None, 1, "x", "PUT", 10, 2), (None, 1, "x", "PUT", 20, 1),
        (None, 2, "y", "PUT", 20, 2), (None, 3, None, "PUT", 20, 3), (None, 3, None, "PUT", 25, 1),
        (None, 4, "gone", "PUT", 30, 1), (None, 4, "gone", "DELETE", 40, 1),
    ], 0, 100, identity)  # fmt: skip
    first = Counter(row[:3] for row in read(spark, warehouse, "events"))
    assert first == Counter({(None, 1, "x"): 3, (None, 2, "y"): 1, (None, 3, None): 2})
    apply(spark, warehouse, schema, [
        (None, 1, "x", "DELETE", 110, 1),                                   # one copy of three goes
        (None, 3, None, "DELETE", 120, 1),                                  # NULLs are equal here
        (None, 2, "y", "DELETE", 130, 1), (None, 2, "y", "DELETE", 130, 2),  # more than there are: none left
        (None, 5, "z", "PUT", 140, 1),
    ], 100, 200, identity)  # fmt: skip
    second = Counter(row[:3] for row in read(spark, warehouse, "events"))
    assert second == Counter({(None, 1, "x"): 2, (None, 3, None): 1, (None, 5, "z"): 1})
    path = f"{warehouse}/app/events"
    version = delta.table_version(spark, path)
    apply(spark, warehouse, schema, [(None, 5, "z", "DELETE", 140, 1)], 100, 200, identity)  # a rerun
    assert delta.table_version(spark, path) == version
    assert Counter(row[:3] for row in read(spark, warehouse, "events")) == second


@pytest.mark.parametrize("small_rows", [10_000, 1])
def test_small_work_merges_interpreted_and_the_rest_compiled_to_the_same_rows(
    spark, warehouse, monkeypatch, small_rows
) -> None:
    """A MERGE of few changes into a small table runs without code generation or adaptive execution, on one
    shuffle partition (tidelake.spark.SMALL_WORK); above the bound it keeps the session's own settings.
    Both give the same rows, and the settings are only for that step."""
    import backfill.apply.stage as stage
    import tidelake.spark

    monkeypatch.setattr(tidelake.spark, "SMALL_WORK_ROWS", small_rows)
    seen: list[tuple[str, ...]] = []
    merge = stage.merge_changes
    keys = ("spark.sql.codegen.wholeStage", "spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")
    own = tuple(spark.conf.get(key) for key in keys)

    def recording_merge(session, *args, **kwargs):
        seen.append(tuple(session.conf.get(key) for key in keys))
        return merge(session, *args, **kwargs)

    monkeypatch.setattr(stage, "merge_changes", recording_merge)
    schema = TableSchema.from_table_info(users_table(), schema_name="app")
    apply(spark, warehouse, schema, [(1, "a", 1, "PUT", 10, 1), (2, "b", 2, "PUT", 10, 2)], 0, 100)
    apply(spark, warehouse, schema, [(1, "c", 3, "PUT", 110, 1), (2, None, None, "DELETE", 120, 1)], 100, 200)
    assert seen == [("false", "false", "1")] * 2 if small_rows > 1 else [own] * 2
    assert own == ("true", "true", "2")
    assert read(spark, warehouse, "users") == [(1, "c", 3, 110)]
    assert tuple(spark.conf.get(key) for key in keys) == own
