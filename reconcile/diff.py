"""Row diff in Spark: pair rows by key (or as multisets), name the differing columns, count and sample.

Both inputs hold the compared columns in Delta types, so one set of Column functions decides equality
for both sides: the canonical text of `reconcile.sparkenc` (JSON always in its normalised form), and
for FLOAT/DOUBLE the tolerance `|a - b| <= tol * max(1, |a|, |b|)` (absolute below 1, relative above;
NaN equals NaN). Every count comes from one aggregation over the cached differences; samples from one
more small job.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconcile import sparkenc
from reconcile.encoding import FloatDigits, JsonMode
from reconcile.result import DiffCounts, RowSample
from reconcile.schema import Column, Comparison, Kind
from tidelake.sqlident import column

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame

KIND = "_kind"
COLUMNS = "_columns"
UP, DELTA = "u_", "d_"


def values_equal(col: Column, a: SparkColumn, b: SparkColumn, tolerance: float) -> SparkColumn:
    """Null-safe equality of one column's values, as reconcile defines it for that type."""
    from pyspark.sql import functions as F

    if col.kind in (Kind.FLOAT, Kind.DOUBLE):
        x, y = a.cast("double"), b.cast("double")
        close = F.abs(x - y) <= F.lit(tolerance) * F.greatest(F.lit(1.0), F.abs(x), F.abs(y))
        return (
            F.when(x.isNull() | y.isNull(), x.isNull() & y.isNull())
            .when(F.isnan(x) | F.isnan(y), F.isnan(x) & F.isnan(y))
            .otherwise((x == y) | close)
        )
    digits = FloatDigits.for_tolerance(0)
    return sparkenc.text(col, a, JsonMode.NORMALIZED, digits).eqNullSafe(
        sparkenc.text(col, b, JsonMode.NORMALIZED, digits)
    )


@dataclass(frozen=True)
class RowDiff:
    counts: DiffCounts
    differences: DataFrame  # key + kind + differing columns + u_*/d_* values; cached


def diff_keyed(
    upstream: DataFrame, delta: DataFrame, comparison: Comparison, *, tolerance: float, sample_size: int
) -> RowDiff:
    """Full outer join on the key; classify each unmatched or unequal pair as missing/extra/changed."""
    from pyspark.sql import functions as F

    keys = comparison.key_names
    values = comparison.value_columns
    up = upstream.select(
        *[column(c.name).alias(UP + c.name) for c in comparison.columns], F.lit(True).alias("_u")
    )
    down = delta.select(
        *[column(c.name).alias(DELTA + c.name) for c in comparison.columns], F.lit(True).alias("_d")
    )
    on = reduce(
        lambda acc, k: acc & column(UP + k).eqNullSafe(column(DELTA + k)),
        keys[1:],
        column(UP + keys[0]).eqNullSafe(column(DELTA + keys[0])),
    )
    joined = up.join(down, on, "full_outer")
    equal = {c.name: values_equal(c, column(UP + c.name), column(DELTA + c.name), tolerance) for c in values}
    all_equal = reduce(lambda acc, e: acc & e, equal.values(), F.lit(True))
    kind = (
        F.when(column("_d").isNull(), F.lit("missing"))
        .when(column("_u").isNull(), F.lit("extra"))
        .when(~all_equal, F.lit("changed"))
    )
    no_columns = F.array().cast("array<string>")
    named = (
        F.array_compact(F.array(*[F.when(~e, F.lit(name)) for name, e in equal.items()]))
        if equal
        else no_columns
    )
    differing = F.when(kind == F.lit("changed"), named).otherwise(no_columns)
    out = (
        joined.select("*", kind.alias(KIND), differing.alias(COLUMNS)).where(column(KIND).isNotNull()).cache()
    )
    counts = _count(out, [c.name for c in values], comparison, sample_size)
    return RowDiff(counts, out)


def diff_multiset(
    upstream: DataFrame, delta: DataFrame, comparison: Comparison, *, sample_size: int
) -> RowDiff:
    """Tables without a key: rows are equal when every canonical text is; duplicates count."""
    from pyspark.sql import functions as F

    cols = comparison.columns

    def grouped(df: DataFrame, prefix: str, count: str) -> DataFrame:
        texts = [t.alias(f"_t{i}") for i, t in enumerate(whole_row_texts(cols))]
        firsts = [F.first(column(c.name)).alias(prefix + c.name) for c in cols]
        return df.groupBy(*texts).agg(F.count(F.lit(1)).alias(count), *firsts)

    up = grouped(upstream, UP, "_nu")
    down = grouped(delta, DELTA, "_nd").withColumnsRenamed({f"_t{i}": f"_s{i}" for i in range(len(cols))})
    on = reduce(
        lambda acc, i: acc & column(f"_t{i}").eqNullSafe(column(f"_s{i}")),
        range(1, len(cols)),
        column("_t0").eqNullSafe(column("_s0")),
    )
    joined = up.join(down, on, "full_outer").select(
        "*",
        (F.coalesce(column("_nu"), F.lit(0)) - F.coalesce(column("_nd"), F.lit(0))).alias("_surplus"),
    )
    out = (
        joined.where(column("_surplus") != 0)
        .select(
            "*",
            F.when(column("_surplus") > 0, F.lit("missing")).otherwise(F.lit("extra")).alias(KIND),
            F.array().cast("array<string>").alias(COLUMNS),
        )
        .cache()
    )
    (totals,) = out.agg(
        F.sum(F.when(column("_surplus") > 0, column("_surplus")).otherwise(0)).alias("missing"),
        F.sum(F.when(column("_surplus") < 0, -column("_surplus")).otherwise(0)).alias("extra"),
    ).collect()
    samples = _samples(out, comparison, sample_size)
    counts = DiffCounts(
        int(totals["missing"] or 0), int(totals["extra"] or 0), 0, MappingProxyType({}), samples
    )
    return RowDiff(counts, out)


def whole_row_texts(
    columns: Sequence[Column], values: Sequence[SparkColumn] | None = None
) -> list[SparkColumn]:
    """The canonical text of each column's value (all digits, JSON normalised; by default the column
    of that name): what makes two rows of a table without a key the same row, in `diff_multiset` and
    in the multiset repair."""
    digits = FloatDigits.for_tolerance(0)
    values = values if values is not None else [column(c.name) for c in columns]
    return [sparkenc.text(c, v, JsonMode.NORMALIZED, digits) for c, v in zip(columns, values, strict=True)]


def _count(
    out: DataFrame, value_names: Sequence[str], comparison: Comparison, sample_size: int
) -> DiffCounts:
    from pyspark.sql import functions as F

    aggregates = [
        F.sum(F.when(column(KIND) == k, 1).otherwise(0)).alias(k) for k in ("missing", "extra", "changed")
    ]
    aggregates += [
        F.sum(F.when(F.array_contains(column(COLUMNS), name), 1).otherwise(0)).alias(f"_col{i}")
        for i, name in enumerate(value_names)
    ]
    (row,) = out.agg(*aggregates).collect()  # a global aggregate: one row
    by_column = {name: int(row[f"_col{i}"] or 0) for i, name in enumerate(value_names) if row[f"_col{i}"]}
    return DiffCounts(
        int(row["missing"] or 0),
        int(row["extra"] or 0),
        int(row["changed"] or 0),
        MappingProxyType(by_column),
        _samples(out, comparison, sample_size),
    )


def _samples(out: DataFrame, comparison: Comparison, sample_size: int) -> tuple[RowSample, ...]:
    """Up to `sample_size` rows of each kind, smallest keys first, with printable values."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if sample_size <= 0:
        return ()
    cols = comparison.columns
    order_cols = [F.coalesce(column(UP + k), column(DELTA + k)) for k in comparison.key_names] or [F.lit(0)]
    ranked = out.select(
        column(KIND),
        column(COLUMNS),
        *[display(c, column(UP + c.name)).alias(UP + c.name) for c in cols],
        *[display(c, column(DELTA + c.name)).alias(DELTA + c.name) for c in cols],
        F.row_number().over(Window.partitionBy(KIND).orderBy(*order_cols)).alias("_rank"),
    ).where(column("_rank") <= sample_size)
    samples = []
    for r in sorted(ranked.collect(), key=lambda r: (r[KIND], r["_rank"])):
        kind = r[KIND]
        up = {c.name: _python(c, r[UP + c.name]) for c in cols}
        down = {c.name: _python(c, r[DELTA + c.name]) for c in cols}
        side = up if kind != "extra" else down
        key_names = comparison.key_names or tuple(c.name for c in cols)
        key = {k: side[k] for k in key_names}
        if kind == "changed":
            changed = tuple(r[COLUMNS])
            samples.append(RowSample(kind, key, changed, up, down))
        elif kind == "missing":
            samples.append(RowSample(kind, key, (), up, None))
        else:
            samples.append(RowSample(kind, key, (), None, down))
    return tuple(samples)


def display(col: Column, value: SparkColumn) -> SparkColumn:
    """A value as printable, JSON-safe data; TIMESTAMP as UTC micros, formatted in Python."""
    from pyspark.sql import functions as F

    if col.kind in (Kind.BINARY, Kind.BIT):
        return F.concat(F.lit("0x"), F.hex(value))
    if col.kind is Kind.TIMESTAMP:
        return F.unix_micros(value)
    if col.kind is Kind.DATETIME:
        return F.date_format(value, "yyyy-MM-dd HH:mm:ss.SSSSSS")
    if col.kind is Kind.DATE:
        return F.date_format(value, "yyyy-MM-dd")
    if col.kind is Kind.DECIMAL:
        return value.cast("string")
    return value


def _python(col: Column, value: Any) -> Any:
    if value is None:
        return None
    if col.kind is Kind.TIMESTAMP:
        moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(value))
        return moment.isoformat().replace("+00:00", "Z")
    if isinstance(value, float) and value != value:
        return "NaN"
    return value
