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
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from reconcile.diff import DELTA, KIND, UP, RowDiff, diff_keyed
from reconcile.downstream import DeltaSnapshot
from reconcile.result import DiffCounts, RepairOutcome
from reconcile.schema import TIDB_COMMIT_TS, Comparison
from tidelake import delta
from tidelake.errors import InputError

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import SparkSession

    from tidelake.config import TidelakeConfig

DELETE = "_delete"


def _c(name: str) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


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

    latest = delta.table_version(spark, snapshot.path)
    if latest != snapshot.version:
        raise InputError(
            f"{snapshot.path}: not repaired: the diff was computed on Delta version {snapshot.version} "
            f"but the table is at version {latest} now; run reconcile again"
        )
    delta_names = {f.name.lower(): f.name for f in snapshot.df.schema.fields}
    commit_col = delta_names.get(TIDB_COMMIT_TS)
    stamp = upstream_ts if upstream_ts is not None else (snapshot.resolved_ts or 0)
    keys = comparison.key_names
    source = diff.differences.select(
        *[F.coalesce(_c(UP + k), _c(DELTA + k)).alias(f"_k_{k}") for k in keys],
        *[_c(UP + c.name).alias(c.name) for c in comparison.columns],
        (_c(KIND) == F.lit("extra")).alias(DELETE),
    )
    deleted = diff.counts.extra
    upserted = diff.counts.missing + diff.counts.changed
    values = {delta_names[c.name.lower()]: F.col(f"s.`{c.name}`") for c in comparison.columns}
    if commit_col is not None:
        values[commit_col] = F.lit(stamp).cast("bigint")
    on = reduce(
        lambda acc, k: acc & F.col(f"t.`{delta_names[k.lower()]}`").eqNullSafe(F.col(f"s.`_k_{k}`")),
        keys[1:],
        F.col(f"t.`{delta_names[keys[0].lower()]}`").eqNullSafe(F.col(f"s.`_k_{keys[0]}`")),
    )

    def build(table: DeltaTable) -> DeltaMergeBuilder:
        return (
            table.alias("t")
            .merge(source.alias("s"), on)
            .whenMatchedDelete(condition=F.col(f"s.{DELETE}"))
            .whenMatchedUpdate(condition=~F.col(f"s.{DELETE}"), set=values)
            .whenNotMatchedInsert(condition=~F.col(f"s.{DELETE}"), values=values)
        )

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
    new_version = delta.table_version(spark, snapshot.path) if applied else None
    remaining = recheck(spark, snapshot.path, comparison, diff, tolerance=tolerance, sample_size=sample_size)
    return RepairOutcome(deleted if applied else 0, upserted if applied else 0, new_version, remaining)


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
    current = spark.read.format("delta").load(path)
    by_lower = {f.name.lower(): f.name for f in current.schema.fields}
    current = current.select(*[_c(by_lower[c.name.lower()]).alias(c.name) for c in comparison.columns])
    touched = diff.differences.select(
        *[F.coalesce(_c(UP + k), _c(DELTA + k)).alias(k) for k in keys]
    ).distinct()
    upstream_rows = diff.differences.where(_c(KIND) != F.lit("extra")).select(
        *[_c(UP + c.name).alias(c.name) for c in comparison.columns]
    )
    delta_rows = current.join(touched, on=[current[k].eqNullSafe(touched[k]) for k in keys], how="left_semi")
    again = diff_keyed(upstream_rows, delta_rows, comparison, tolerance=tolerance, sample_size=sample_size)
    again.differences.unpersist()
    return again.counts
