"""`--repair`: rewrite the differing keys of a Delta table from the upstream rows, in one MERGE.

Extra rows are deleted, missing and changed rows are upserted with the upstream values (columns not
compared, such as ignored ones, keep their Delta values). The MERGE is one Delta commit through
`tidelake.delta.merge_with_txn`, with app id `<job app id>:repair`, transaction version = the Delta
version the diff was computed on (a repair of the same version is never applied twice), and
userMetadata saying it was a repair and keeping the table's `resolved_ts`. `_tidb_commit_ts` of a
rewritten row becomes the ts the upstream was read at (an upper bound of the row's real commit ts),
or the Delta table's resolved ts when the upstream has no ts. Afterwards the same keys are read again
and diffed against the same upstream rows: that re-check is what the result reports as remaining.
A repair is refused when the compared version is not the table's latest (the diff would be stale).

A table without a key (no primary key, and no `_tidb_rowid` on both sides) is repaired as a multiset,
also in one tagged MERGE: every copy of a row that Delta holds too often is deleted and the upstream's
number of copies inserted again, and rows Delta lacks are inserted as often as they are missing. Rows
are "the same" by their canonical texts (`diff.whole_row_texts`), on both sides of the MERGE condition.
Columns not compared are NULL in inserted copies, so a Delta NOT NULL column outside the compared ones
refuses the repair (`refusal`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce
from typing import TYPE_CHECKING

from reconcile.diff import DELTA, KIND, UP, RowDiff, diff_keyed, diff_multiset, whole_row_texts
from reconcile.downstream import DeltaSnapshot
from reconcile.result import DiffCounts, RepairOutcome
from reconcile.schema import TIDB_COMMIT_TS, Column, Comparison
from tidelake import delta
from tidelake.errors import InputError
from tidelake.faults import fault_stage
from tidelake.sqlident import column, quote_ident

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession

    from tidelake.config import TidelakeConfig

DELETE = "_delete"
INSERT = "_insert"


def repair(
    spark: SparkSession,
    config: TidelakeConfig,
    snapshot: DeltaSnapshot,
    comparison: Comparison,
    diff: RowDiff,
    *,
    tolerance: float,
    sample_size: int,
    upstream_ts: int | None,
) -> RepairOutcome:
    from pyspark.sql import functions as F

    _check_latest(spark, snapshot)
    delta_names = {f.name.lower(): f.name for f in snapshot.df.schema.fields}
    keys = comparison.key_names
    source = diff.differences.select(
        *[F.coalesce(column(UP + k), column(DELTA + k)).alias(f"_k_{k}") for k in keys],
        *[column(UP + c.name).alias(c.name) for c in comparison.columns],
        (column(KIND) == F.lit("extra")).alias(DELETE),
    )
    source = fault_stage(source, "repair.write")
    deleted = diff.counts.extra
    upserted = diff.counts.missing + diff.counts.changed
    values = _written_values(snapshot, comparison.columns, upstream_ts)
    on = reduce(
        lambda acc, k: acc & _ref("t", delta_names[k.lower()]).eqNullSafe(_ref("s", f"_k_{k}")),
        keys[1:],
        _ref("t", delta_names[keys[0].lower()]).eqNullSafe(_ref("s", f"_k_{keys[0]}")),
    )

    def build(table: DeltaTable) -> DeltaMergeBuilder:
        return (
            table.alias("t")
            .merge(source.alias("s"), on)
            .whenMatchedDelete(condition=F.col(f"s.{DELETE}"))
            .whenMatchedUpdate(condition=~F.col(f"s.{DELETE}"), set=values)
            .whenNotMatchedInsert(condition=~F.col(f"s.{DELETE}"), values=values)
        )

    new_version = _merge(spark, config, snapshot, build, upstream_ts, deleted, upserted)
    remaining = recheck(spark, snapshot.path, comparison, diff, tolerance=tolerance, sample_size=sample_size)
    applied = new_version is not None
    return RepairOutcome(deleted if applied else 0, upserted if applied else 0, new_version, remaining)


def refusal(snapshot: DeltaSnapshot, comparison: Comparison) -> str | None:
    """Why a table cannot be repaired, or None. Only a multiset repair can be refused here: the copies
    it inserts leave NULL in every column not compared."""
    if comparison.key:
        return None
    compared = {c.name.lower() for c in comparison.columns} | {TIDB_COMMIT_TS}
    required = [
        f.name for f in snapshot.df.schema.fields if not f.nullable and f.name.lower() not in compared
    ]
    if required:
        return (
            f"the table has no key, so missing rows are inserted whole, but Delta column(s) "
            f"{', '.join(required)} are NOT NULL and not compared (no upstream value)"
        )
    return None


def repair_multiset(
    spark: SparkSession,
    config: TidelakeConfig,
    snapshot: DeltaSnapshot,
    comparison: Comparison,
    diff: RowDiff,
    *,
    tolerance: float,
    sample_size: int,
    upstream_ts: int | None,
) -> RepairOutcome:
    """Repair a table without a key from a `diff_multiset` result (see the module docstring)."""
    from pyspark.sql import functions as F

    _check_latest(spark, snapshot)
    columns = comparison.columns
    width = range(len(columns))
    delta_names = {f.name.lower(): f.name for f in snapshot.df.schema.fields}
    upstream_copies = F.coalesce(column("_nu"), F.lit(0))
    surplus = column("_surplus")  # upstream copies minus Delta copies
    group = _group_texts(len(columns))
    values = [column(UP + c.name).alias(c.name) for c in columns]
    deletes = diff.differences.where(surplus < 0).select(
        *group, *[F.lit(None).cast(c.delta_type).alias(c.name) for c in columns], F.lit(False).alias(INSERT)
    )
    copies = F.when(surplus > 0, surplus).otherwise(upstream_copies)
    inserts = diff.differences.where(copies > 0).select(
        *group, *values, F.explode(F.array_repeat(F.lit(True), copies.cast("int"))).alias(INSERT)
    )
    source = fault_stage(deletes.unionByName(inserts), "repair.write")
    target_texts = whole_row_texts(columns, [_ref("t", delta_names[c.name.lower()]) for c in columns])
    on = reduce(
        lambda acc, i: acc & target_texts[i].eqNullSafe(_ref("s", f"_g{i}")), width, ~F.col(f"s.{INSERT}")
    )
    inserted = _written_values(snapshot, columns, upstream_ts)

    def build(table: DeltaTable) -> DeltaMergeBuilder:
        return (
            table.alias("t")
            .merge(source.alias("s"), on)
            .whenMatchedDelete()
            .whenNotMatchedInsert(condition=F.col(f"s.{INSERT}"), values=inserted)
        )

    deleted, added = diff.counts.extra, diff.counts.missing
    new_version = _merge(spark, config, snapshot, build, upstream_ts, deleted, added)
    remaining = recheck_multiset(spark, snapshot.path, comparison, diff, sample_size=sample_size)
    applied = new_version is not None
    return RepairOutcome(deleted if applied else 0, added if applied else 0, new_version, remaining)


def recheck_multiset(
    spark: SparkSession, path: str, comparison: Comparison, diff: RowDiff, *, sample_size: int
) -> DiffCounts:
    """Diff the repaired rows again: the latest Delta copies of the differing rows against the
    upstream's copies of them."""
    from pyspark.sql import functions as F

    columns = comparison.columns
    current = _project(spark.read.format("delta").load(path), comparison)
    width = range(len(columns))
    groups = diff.differences.select(*_group_texts(len(columns)))
    texts = current.select("*", *[t.alias(f"_x{i}") for i, t in enumerate(whole_row_texts(columns))])
    on = reduce(lambda acc, i: acc & texts[f"_x{i}"].eqNullSafe(groups[f"_g{i}"]), width, F.lit(True))
    delta_rows = texts.join(groups, on=on, how="left_semi").select(*[column(c.name) for c in columns])
    upstream_rows = (
        diff.differences.where(column("_nu").isNotNull())
        .select(
            *[column(UP + c.name).alias(c.name) for c in columns],
            F.explode(F.array_repeat(F.lit(True), column("_nu").cast("int"))).alias("_copy"),
        )
        .drop("_copy")
    )
    again = diff_multiset(upstream_rows, delta_rows, comparison, sample_size=sample_size)
    again.differences.unpersist()
    return again.counts


def _group_texts(width: int) -> list[SparkColumn]:
    """`_g<i>`: the canonical texts of a `diff_multiset` group, from whichever side holds it."""
    from pyspark.sql import functions as F

    return [
        F.when(column("_nu").isNotNull(), column(f"_t{i}")).otherwise(column(f"_s{i}")).alias(f"_g{i}")
        for i in range(width)
    ]


def _written_values(
    snapshot: DeltaSnapshot, columns: Sequence[Column], upstream_ts: int | None
) -> dict[str, str | SparkColumn]:
    """What a repaired row is written with, by Delta column name: the upstream's value of each compared
    column (the MERGE's source `s`) and, where the table has it, `_tidb_commit_ts` = the ts the upstream
    was read at (the table's resolved ts when the upstream has none)."""
    from pyspark.sql import functions as F

    delta_names = {f.name.lower(): f.name for f in snapshot.df.schema.fields}
    values: dict[str, str | SparkColumn] = {delta_names[c.name.lower()]: _ref("s", c.name) for c in columns}
    commit_col = delta_names.get(TIDB_COMMIT_TS)
    if commit_col is not None:
        stamp = upstream_ts if upstream_ts is not None else (snapshot.resolved_ts or 0)
        values[commit_col] = F.lit(stamp).cast("bigint")
    return values


def _ref(alias: str, name: str) -> SparkColumn:
    """Column `name` of the MERGE's target (`t`) or source (`s`)."""
    from pyspark.sql import functions as F

    return F.col(f"{alias}.{quote_ident(name)}")


def _check_latest(spark: SparkSession, snapshot: DeltaSnapshot) -> None:
    latest = delta.table_version(spark, snapshot.path)
    if latest != snapshot.version:
        raise InputError(
            f"{snapshot.path}: not repaired: the diff was computed on Delta version {snapshot.version} "
            f"but the table is at version {latest} now; run reconcile again"
        )


def _merge(
    spark: SparkSession,
    config: TidelakeConfig,
    snapshot: DeltaSnapshot,
    build: Callable[[DeltaTable], DeltaMergeBuilder],
    upstream_ts: int | None,
    deleted: int,
    upserted: int,
) -> int | None:
    """The repair's one MERGE, tagged; the new Delta version, or None when it was applied before."""
    metadata = {
        "operation": "reconcile-repair",
        "repair": True,
        "resolved_ts": snapshot.resolved_ts,
        "upstream_ts": upstream_ts,
        "repaired_version": snapshot.version,
        "deleted": deleted,
        "upserted": upserted,
    }
    applied = delta.merge_with_txn(
        spark, snapshot.path, build, app_id=f"{config.job.app_id}:repair",
        txn_version=snapshot.version, metadata=metadata,
    )  # fmt: skip
    return delta.table_version(spark, snapshot.path) if applied else None


def _project(df: DataFrame, comparison: Comparison) -> DataFrame:
    by_lower = {f.name.lower(): f.name for f in df.schema.fields}
    return df.select(*[column(by_lower[c.name.lower()]).alias(c.name) for c in comparison.columns])


def recheck(
    spark: SparkSession,
    path: str,
    comparison: Comparison,
    diff: RowDiff,
    *,
    tolerance: float,
    sample_size: int,
) -> DiffCounts:
    """Diff the repaired keys again: the latest Delta rows against the same upstream rows."""
    from pyspark.sql import functions as F

    keys = comparison.key_names
    current = _project(spark.read.format("delta").load(path), comparison)
    touched = diff.differences.select(
        *[F.coalesce(column(UP + k), column(DELTA + k)).alias(k) for k in keys]
    ).distinct()
    upstream_rows = diff.differences.where(column(KIND) != F.lit("extra")).select(
        *[column(UP + c.name).alias(c.name) for c in comparison.columns]
    )
    delta_rows = current.join(touched, on=[current[k].eqNullSafe(touched[k]) for k in keys], how="left_semi")
    again = diff_keyed(upstream_rows, delta_rows, comparison, tolerance=tolerance, sample_size=sample_size)
    again.differences.unpersist()
    return again.counts
