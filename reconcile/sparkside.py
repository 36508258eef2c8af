"""One side of a comparison held as a Spark DataFrame (the Delta table, or an upstream read from files).

The DataFrame has the compared columns under their upstream names, in Delta types. Chunk checksums of
all ranges come from one aggregation: each row finds its range by a binary search over the ranges'
bounds (`with_range_index`), then rows are grouped by range. Upstream rows fetched through pymysql
become a DataFrame here too, via Arrow, so both sides of a row diff are Spark data.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel

from reconcile import sparkenc
from reconcile.chunks import Checksum, Key, KeyRange
from reconcile.encoding import FloatDigits, JsonMode
from reconcile.schema import Column, Comparison, Kind
from tidelake.sqlident import column, quote_ident
from tidelake.typemap import arrow_type

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession

RANGE_ID = "_range"
POSITION = "_pos"
BARRIER = "_barrier"
LOWERS, UPPERS = "_lowers", "_uppers"
BUCKET = "_bucket"
HIGH, LOW = "_h_hi", "_h_lo"


def key_struct(columns: Sequence[Column]) -> SparkColumn:
    """The key as one comparable value: the column itself, or a struct of a composite key's columns."""
    from pyspark.sql import functions as F

    if len(columns) == 1:
        return column(columns[0].name)
    return F.struct(*[column(c.name).alias(c.name) for c in columns])


def sql_literal(col: Column, value: Any) -> str:
    """A key value as Spark SQL literal text of the column's Delta type (typed literal syntax, so
    thousands of them analyse fast; a string with a quote or backslash goes as UTF-8 hex)."""
    if value is None:
        return "NULL"
    kind = col.delta_type
    suffix = {"tinyint": "Y", "smallint": "S", "int": "", "bigint": "L"}
    if kind in suffix:
        return f"{int(value)}{suffix[kind]}"
    if kind.startswith("decimal("):
        return f"{Decimal(value)}BD"
    if kind == "string":
        text = str(value)
        return f"CAST(X'{text.encode().hex()}' AS STRING)" if "'" in text or "\\" in text else f"'{text}'"
    if kind == "binary":
        return f"X'{bytes(value).hex()}'"
    if kind == "date":
        return f"DATE'{value.isoformat()}'"
    if kind == "timestamp_ntz":
        return f"TIMESTAMP_NTZ'{value.isoformat(sep=' ')}'"
    if kind == "timestamp":
        utc = value.astimezone(dt.UTC) if value.tzinfo else value
        return f"TIMESTAMP'{utc.replace(tzinfo=None).isoformat(sep=' ')}Z'"
    if kind in ("float", "double"):
        return f"CAST('{value!r}' AS {kind})"
    raise ValueError(f"no literal for a {kind} key")


def _key_sql(columns: Sequence[Column], key: Key | None) -> str:
    if len(columns) == 1:
        return sql_literal(columns[0], None if key is None else key[0])
    if key is None:
        key = (None,) * len(columns)
    if all(v is None for v in key):
        return "NULL"
    fields = ", ".join(
        f"{sql_literal(_NAME, c.name)}, {sql_literal(c, v)}" for c, v in zip(columns, key, strict=True)
    )
    return f"named_struct({fields})"


_NAME = Column("name", Kind.TEXT, "string", "name")


def _struct_type(columns: Sequence[Column]) -> str:
    return "struct<" + ",".join(f"{quote_ident(c.name)}:{c.delta_type}" for c in columns) + ">"


def array_literal(columns: Sequence[Column], keys: Sequence[Key | None]) -> SparkColumn:
    """Keys as one folded array literal, from one SQL text: one call, however many keys."""
    from pyspark.sql import functions as F

    element = columns[0].delta_type if len(columns) == 1 else _struct_type(columns)
    return F.expr(f"CAST(array({', '.join(_key_sql(columns, k) for k in keys)}) AS array<{element}>)")


def with_range_index(df: DataFrame, key_columns: Sequence[Column], ranges: Sequence[KeyRange]) -> DataFrame:
    """Add `_range`: the index of the range holding each row's key, or -1 (ranges disjoint, sorted).

    A binary search over an array literal of the ranges' lower bounds, unrolled into log2(n) staged
    projections: O(log n) comparisons per row and O(log n) code however many ranges there are (a
    CASE tree grows with n, and past a few hundred ranges no longer compiles). The literal is made
    from one SQL text (`array_literal`): a Python call per bound would cost seconds for thousands.
    """
    from pyspark.sql import functions as F

    if not ranges:
        return df.withColumns({RANGE_ID: F.lit(-1), BARRIER: F.spark_partition_id()})
    key = key_struct(key_columns)
    unbounded_first = ranges[0].lower is None
    lowers = [r.lower for r in (ranges[1:] if unbounded_first else ranges)]
    n = len(lowers)
    # As columns, the literals are analysed once; the optimizer then folds them into every stage.
    out = df.withColumns(
        {
            LOWERS: array_literal(key_columns, lowers),
            UPPERS: array_literal(key_columns, [r.upper for r in ranges]),
            POSITION: F.lit(0),
        }
    )
    bounds, pos = F.col(LOWERS), F.col(POSITION)
    step = 1 << (n.bit_length() - 1) if n else 0
    while step:
        probe = F.try_element_at(bounds, pos + step)
        out = out.withColumn(POSITION, F.when((pos + step <= n) & (probe <= key), pos + step).otherwise(pos))
        step >>= 1
    index = pos if unbounded_first else pos - 1  # how many lower bounds are <= key, as a range index
    upper = F.try_element_at(F.col(UPPERS), F.greatest(index + 1, F.lit(1)))  # index 0 errs, even in try_
    inside = (index >= 0) & (upper.isNull() | (key < upper))
    indexed = {RANGE_ID: F.when(inside, index).otherwise(F.lit(-1)), BARRIER: F.spark_partition_id()}
    return out.withColumns(indexed).drop(LOWERS, UPPERS)


def in_ranges(indexed: DataFrame) -> DataFrame:
    """The rows of a `with_range_index` frame that fall in a range.

    The filter also reads the nondeterministic `_barrier` column, which stops Spark from pushing it
    down through the search stages: substituting each stage into the next would copy the position
    expression (used four times per stage) exponentially often.
    """
    from pyspark.sql import functions as F

    return indexed.where((F.col(RANGE_ID) >= 0) & (F.col(BARRIER) >= 0)).drop(POSITION, BARRIER, RANGE_ID)


def range_index(df: DataFrame, key_columns: Sequence[Column], ranges: Sequence[KeyRange]) -> list[int]:
    """The range index of every row, collected (for tests)."""
    return [r[RANGE_ID] for r in with_range_index(df, key_columns, ranges).select(RANGE_ID).collect()]


class SparkSide:
    """Checksums and row reads over a DataFrame of the compared columns."""

    def __init__(
        self, df: DataFrame, comparison: Comparison, json_mode: JsonMode, digits: FloatDigits
    ) -> None:
        self.df = df
        self.comparison = comparison
        self.json_mode = json_mode
        self.digits = digits
        self.notes: list[str] = []
        self._slim: DataFrame | None = None

    def _hashed(self, bucket_by: Sequence[Column] = (), width: int = 0) -> DataFrame:
        """The frame with the two row-hash halves (and a `_bucket` of `bucket_by` when asked)."""
        from pyspark.sql import functions as F

        if HIGH in self.df.columns and not bucket_by:
            return self.df
        columns = self.comparison.columns
        encoded, names = sparkenc.encode(self.df, columns, self.json_mode, self.digits)
        digest = {"_digest": F.md5(sparkenc.fields(names))}
        if bucket_by:
            text_of = {c.name: n for c, n in zip(columns, names, strict=True)}
            digest[BUCKET] = sparkenc.bucket([text_of[c.name] for c in bucket_by], width)
        staged = encoded.withColumns(digest)
        high, low = sparkenc.hash_halves("_digest")
        return staged.withColumns({HIGH: high, LOW: low}).drop("_digest", *names)

    def checksums(self, ranges: Sequence[KeyRange], *, keep: bool = False) -> list[Checksum]:
        """(count, checksum) per range. `keep` caches each row's key and hash on the way (a few dozen
        bytes a row), so a bisection that follows never encodes a row again."""
        hashed = self._hashed()
        if keep:
            keys = [column(c.name) for c in self.comparison.key]
            self._slim = hashed.select(*keys, column(HIGH), column(LOW)).persist(StorageLevel.MEMORY_AND_DISK)
            hashed = self._slim
        indexed = with_range_index(hashed, self.comparison.key, ranges)
        found = _sums(indexed, column(RANGE_ID))  # rows in no range are grouped under -1 and ignored
        return [found.get(i, (0, 0)) for i in range(len(ranges))]

    def rows(self, ranges: Sequence[KeyRange]) -> DataFrame:
        indexed = with_range_index(self.df, self.comparison.key, ranges)
        return in_ranges(indexed).select(*[column(c.name) for c in self.comparison.columns])

    def bucket_checksums(self, width: int, by: Sequence[Column]) -> dict[str, Checksum]:
        return {str(k): v for k, v in _sums(self._hashed(by, width), column(BUCKET)).items()}

    def bucket_rows(self, width: int, by: Sequence[Column], buckets: Sequence[str]) -> DataFrame:
        hashed = self._hashed(by, width)
        return hashed.where(column(BUCKET).isin(list(buckets))).select(
            *[column(c.name) for c in self.comparison.columns]
        )

    def narrowed(self, ranges: Sequence[KeyRange]) -> SparkSide:
        """Keys and row hashes of the rows in some ranges, cached: what bisection rounds aggregate.

        Taken from the rows `checksums(keep=True)` kept when there are any, else hashed here."""
        base = self._slim if self._slim is not None else self._hashed()
        indexed = with_range_index(base, self.comparison.key, ranges)
        restricted = in_ranges(indexed).persist(StorageLevel.MEMORY_AND_DISK)
        return SparkSide(restricted, self.comparison, self.json_mode, self.digits)

    def release(self) -> None:
        """Drop what this side cached."""
        for df in (self._slim, self.df):
            if df is not None and df.is_cached:
                df.unpersist()
        self._slim = None


def bucket_checksums_of_both(
    upstream: SparkSide, downstream: SparkSide, width: int, by: Sequence[Column]
) -> tuple[dict[str, Checksum], dict[str, Checksum]]:
    """`bucket_checksums` of two Spark sides (an upstream in files and the Delta table) in one
    aggregation over both: one Spark job where two would each pay their planning and scheduling."""
    from pyspark.sql import functions as F

    def tagged(side: SparkSide, tag: str) -> DataFrame:
        return side._hashed(by, width).select(F.lit(tag).alias("_side"), BUCKET, HIGH, LOW)

    # the Delta side first: the job runs in its session (the one that holds this table's settings)
    both = tagged(downstream, "d").unionByName(tagged(upstream, "u"))
    sums = _sums(both, F.concat(F.col("_side"), F.lit(":"), F.col(BUCKET)))
    found: dict[str, dict[str, Checksum]] = {"u": {}, "d": {}}
    for group, value in sums.items():
        tag, _, bucket = str(group).partition(":")
        found[tag][bucket] = value
    return found["u"], found["d"]


def _sums(df: DataFrame, group: SparkColumn) -> dict[Any, Checksum]:
    """(count, exact sum of 64-bit row hashes) per group, from the two 32-bit half sums."""
    from pyspark.sql import functions as F

    rows = (
        df.groupBy(group.alias("_g"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum(HIGH).alias("hi"), F.sum(LOW).alias("lo"))
        .collect()
    )
    return {r["_g"]: (int(r["n"]), (int(r["hi"] or 0) << 32) + int(r["lo"] or 0)) for r in rows}


def rows_to_frame(
    spark: SparkSession, columns: Sequence[Column], rows: Sequence[tuple[Any, ...]]
) -> DataFrame:
    """Upstream rows (already in the Delta value domain) as a DataFrame with the Delta types."""
    import pyarrow as pa
    from pyspark.sql import types as T

    arrays = []
    for i, col in enumerate(columns):
        values = [r[i] for r in rows]
        if col.delta_type.startswith("decimal("):
            values = [None if v is None else Decimal(v) for v in values]
        arrays.append(pa.array(values, type=arrow_type(col.delta_type)))
    table = pa.Table.from_arrays(arrays, names=[c.name for c in columns])
    schema = T.StructType([T.StructField(c.name, T._parse_datatype_string(c.delta_type)) for c in columns])
    if not rows:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(table).select(*[column(c.name).cast(c.delta_type) for c in columns])
