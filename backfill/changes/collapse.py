"""The collapse rule every source shares, for changes that arrive already typed (TiCDC's outputs).

Per key the last change wins: the highest commit ts; at one commit ts a PUT wins over a DELETE (one
transaction holds one mutation per key, so a DELETE and a PUT of a key at one ts are the two halves of a
moved or split row: TiCDC writes split updates as DELETEs before PUTs, or as D/I pairs), then the later
line. kv-scan applies the same rule to key bytes before it decodes (`sources/kvscan/range_collapse.py`).

A table without a key is a multiset: its window collapses to the net number of copies per whole row.
At-least-once duplicates must be gone before either (sources drop repeated deliveries of a transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tidelake.conventions import BEFORE_PREFIX, COMMIT_TS, OP
from tidelake.sqlident import quote_ident as _q

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LINE = "_tidb_line"  # where a change was read (file line, message position): the last tie-breaker
COPIES = "_tidb_copies"  # a multiset's net copies of a row in the window


def last_change_per_key(changes: DataFrame, keys: Sequence[str]) -> DataFrame:
    """One change per key: the last by (commit ts, PUT over DELETE, line). Columns as given, `LINE` dropped."""
    from pyspark.sql import functions as F

    columns = [c for c in changes.columns if c != LINE]
    order = F.struct(
        F.col(COMMIT_TS), (F.col(OP) == "PUT").cast("int"), F.coalesce(F.col(LINE), F.lit(0)).cast("bigint")
    )
    last = changes.groupBy(*(F.col(_q(k)) for k in keys)).agg(
        F.max_by(F.struct(*(F.col(_q(c)) for c in columns)), order).alias("last")
    )
    return last.select(*(F.col("last").getField(c).alias(c) for c in columns))


def before_columns(keys: Sequence[str]) -> list[str]:
    """The columns that carry a change's key as the row stood at the window's start (`BEFORE_PREFIX`)."""
    return [BEFORE_PREFIX + k for k in keys]


def with_moved_key_deletes(changes: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The before/after key rule, for changes that carry their row's key as it stood at the window's start.

    A row's identity in TiDB is its record key, and under a `_ci` collation (or PAD SPACE) one record key
    holds many key values: `UPDATE t SET pk = 'ABC' WHERE pk = 'abc'` rewrites the same record key. The
    Delta table is keyed by the values, so when a change's before-image key (the `before_columns`, NULL when
    the row did not exist or is unknown) differs from its own key, the window also deletes the before-image
    key, at the change's commit ts. That is what TiCDC's outputs say for such an update (a DELETE of the
    pre-image's key and a PUT of the post-image), so every source ends with the same table. The before
    columns are dropped either way; changes without them pass as they are.
    """
    from pyspark.sql import functions as F

    before = before_columns(keys)
    if not keys or not set(before) <= set(changes.columns):
        return changes
    plain = changes.drop(*before)
    known = F.lit(True)
    for b in before:
        known = known & F.col(_q(b)).isNotNull()
    same = F.lit(True)
    for k, b in zip(keys, before, strict=True):
        same = same & F.col(_q(k)).eqNullSafe(F.col(_q(b)))
    moved = changes.filter(known & ~same)
    key_of = dict(zip(keys, before, strict=True))
    deletes = moved.select(
        *(
            F.col(_q(key_of[f.name])).alias(f.name)
            if f.name in key_of
            else F.col(_q(f.name))
            if f.name in (COMMIT_TS, LINE)
            else F.lit("DELETE").alias(OP)
            if f.name == OP
            else F.lit(None).cast(f.dataType).alias(f.name)
            for f in plain.schema.fields
        )
    )
    return plain.unionByName(deletes)


def without_before_columns(changes: DataFrame) -> DataFrame:
    """`changes` without the before-image key columns (a first load has nothing to move them from)."""
    return changes.drop(*(c for c in changes.columns if c.startswith(BEFORE_PREFIX)))


def net_copies(changes: DataFrame) -> DataFrame:
    """A multiset window as net changes: per distinct row, `_tidb_copies` copies to add (`_tidb_op` PUT) or
    remove (DELETE), with the newest commit ts among them. Rows whose inserts and deletes cancel out go."""
    from pyspark.sql import functions as F

    content = [c for c in changes.columns if c not in (OP, COMMIT_TS, LINE)]
    sign = F.when(F.col(OP) == "PUT", 1).otherwise(-1)
    net = changes.groupBy(*(F.col(_q(c)) for c in content)).agg(
        F.sum(sign).alias("net"), F.max(COMMIT_TS).alias(COMMIT_TS)
    )
    return net.filter(F.col("net") != 0).select(
        *(F.col(_q(c)) for c in content),
        F.col(COMMIT_TS),
        F.when(F.col("net") > 0, F.lit("PUT")).otherwise(F.lit("DELETE")).alias(OP),
        F.abs(F.col("net")).cast("bigint").alias(COPIES),
    )


def expand_copies(rows: DataFrame) -> DataFrame:
    """Each net row as `_tidb_copies` rows of its own (what an append writes)."""
    from pyspark.sql import functions as F

    columns = [c for c in rows.columns if c != COPIES]
    return rows.select(*(F.col(_q(c)) for c in columns), F.explode(F.sequence(F.lit(1), F.col(COPIES)))).drop(
        "col"
    )
