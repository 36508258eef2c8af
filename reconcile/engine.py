"""Reconcile one table after another: plan chunks, compare checksums, bisect, row-diff, repair.

Two strategies, chosen per table:

range   (SQL upstream, primary key of range-comparable types) Chunk boundaries are upstream keys, one
        every `chunk_size` rows. Each chunk's (count, checksum) is computed upstream in SQL (parallel,
        bounded by `parallelism`) and for the Delta table in one Spark aggregation. Differing chunks are
        bisected at their upstream median (each round one batch of queries per side, Delta rows of the
        differing chunks cached) until a range holds at most `leaf_rows` upstream rows; only those
        ranges' rows are read upstream and diffed by key in Spark.
bucket  (no primary key, a key whose order differs between MySQL and Spark, or an upstream in files)
        Rows go to hash buckets by the MD5 of their key encoding (or of the whole row without a key):
        one GROUP BY upstream, one aggregation in Spark; the rows of differing buckets are diffed, by
        key when there is one, as multisets when not.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from reconcile import repair as repairing
from reconcile.chunks import Checksum, KeyRange, effective_chunk_size, narrow, ranges_from_boundaries
from reconcile.diff import RowDiff, diff_keyed, diff_multiset
from reconcile.downstream import DeltaSnapshot, open_snapshot
from reconcile.encoding import FloatDigits, JsonMode
from reconcile.errors import SchemaMismatch, TableNotFound, UpstreamError
from reconcile.options import RunOptions, ignored_columns
from reconcile.result import ChunkStatus, DiffCounts, ReconcileResult, TableResult
from reconcile.schema import TIDB_ROWID, Column, Comparison, TableSchema, compare_schemas
from reconcile.sparkside import SparkSide, bucket_checksums_of_both, rows_to_frame
from tidelake import delta
from tidelake.conventions import table_path
from tidelake.errors import InputError
from tidelake.output import SILENT, Tracker
from tidelake.spark import execution_conf
from tidelake.sqlident import column
from tidelake.upstream import with_retries

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tidelake.config import TidelakeConfig, UpstreamConfig

T = TypeVar("T")
U = TypeVar("U")


class TableReader(Protocol):
    """Upstream reads of one table (SQL through pymysql, or files through Spark)."""

    notes: list[str]

    def checksums(self, ranges: Sequence[KeyRange]) -> list[Checksum]: ...

    def bucket_checksums(self, width: int, by: Sequence[Column]) -> dict[str, Checksum]: ...

    def bucket_rows(self, width: int, by: Sequence[Column], buckets: Sequence[str]) -> Any: ...


class Upstream(Protocol):
    json_mode: JsonMode
    supports_ranges: bool
    reads_at_ts: bool  # TiDB: every read is at one ts

    @property
    def bytes_received(self) -> int: ...

    def describe(self) -> str: ...

    def list_tables(self, patterns: Sequence[str]) -> list[tuple[str, str]]: ...

    def fixed_ts(self) -> int | None: ...

    def upstream_ts(self, at_ts: int | None, delta_ts: int | None) -> int | None: ...

    def schema(self, db: str, table: str, ts: int | None) -> TableSchema: ...

    def open_table(
        self, schema: TableSchema, columns: Sequence[Column], digits: FloatDigits, ts: int | None
    ) -> AbstractContextManager[TableReader]: ...

    def row_estimate(self, db: str, table: str) -> int | None: ...

    def close(self) -> None: ...

    def reconnect(self) -> None: ...


@dataclass
class _Outcome:
    strategy: str
    chunks: int
    chunks_differing: int
    upstream_rows: int
    delta_rows: int
    diff: RowDiff | None
    notes: list[str] = field(default_factory=list)
    chunk_map: list[ChunkStatus] = field(default_factory=list)
    narrowed: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def run(
    spark: SparkSession,
    config: TidelakeConfig,
    options: RunOptions,
    upstream: Upstream,
    tracker: Tracker | None = None,
) -> ReconcileResult:
    """Reconcile every table the options select, `tables_at_once` side by side (a small table's time is
    mostly Spark's and the upstream's latency, which overlap); per-table problems become error results."""
    started = time.monotonic()
    tracker = tracker or SILENT
    names = upstream.list_tables(options.tables)
    workers = max(1, min(options.tables_at_once, len(names)))
    sessions = threading.local()

    def one(name: tuple[str, str]) -> TableResult:
        db, table = name
        table_started = time.monotonic()
        if not hasattr(sessions, "spark"):  # a session per thread: a table's settings are set on its session
            sessions.spark = spark if workers == 1 else spark.newSession()
        try:
            return _with_retries(
                lambda: reconcile_table(sessions.spark, config, options, upstream, db, table, tracker),
                config.reconcile.upstream, upstream, f"{db}.{table}", tracker,
            )  # fmt: skip
        except (TableNotFound, SchemaMismatch, InputError, UpstreamError) as exc:
            return TableResult.failed(f"{db}.{table}", str(exc), time.monotonic() - table_started)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, names))
    return ReconcileResult(
        upstream.describe(),
        tuple(results),
        max_diff=options.max_diff,
        seconds=time.monotonic() - started,
        upstream_bytes=upstream.bytes_received,
    )


def _with_retries(
    attempt: Callable[[], TableResult],
    settings: UpstreamConfig,
    upstream: Upstream,
    name: str,
    tracker: Tracker,
) -> TableResult:
    """One table's reconcile, started again from new connections after a network failure (a chunk's
    query cut off, a reset, a timeout), at most `retries` times, `retry_wait` seconds first and doubling.
    Nothing is half-done by a failed attempt: a repair commits only after all its upstream reads.
    Gives up with an UpstreamError that names the server and the attempts."""
    attempts = 0

    def again() -> TableResult:
        nonlocal attempts
        attempts += 1
        if attempts > 1:
            upstream.reconnect()
        return attempt()

    result, failures = with_retries(again, settings, lambda retry: tracker.stage(f"{name}: {retry}", 0))
    if not failures:
        return result
    retried = f"read again after {len(failures)} network failure(s), the last: {failures[-1]}"
    return replace(result, notes=(*result.notes, retried))


def reconcile_table(
    spark: SparkSession,
    config: TidelakeConfig,
    options: RunOptions,
    upstream: Upstream,
    db: str,
    table: str,
    tracker: Tracker,
) -> TableResult:
    started = time.monotonic()
    fixed = upstream.fixed_ts()
    wanted = options.at_ts if options.at_ts is not None else fixed
    snapshot = open_snapshot(
        spark, table_path(config.target.warehouse, db, table), config.job.app_id, wanted, exact=fixed is None
    )
    ts = upstream.upstream_ts(options.at_ts, snapshot.resolved_ts)
    schema = upstream.schema(db, table, ts)
    comparison = _comparison(schema, snapshot, ignored_columns(options.ignore_columns, db, table))
    digits = FloatDigits.for_tolerance(options.float_tolerance)
    delta_df = _project(snapshot.df, comparison)
    delta_side = SparkSide(delta_df, comparison, upstream.json_mode, digits)
    notes: list[str] = []
    if ts is None and upstream.reads_at_ts:
        notes.append("the Delta table records no resolved ts: TiDB was read at its latest state")
    if fixed is not None and snapshot.resolved_ts != fixed:
        notes.append(
            f"upstream export is at ts {fixed}, the closest Delta version is at {snapshot.resolved_ts}"
        )
    small = execution_conf(upstream.row_estimate(db, table) or 0, delta.table_bytes(spark, snapshot.path))
    with (
        delta.session_conf_set(spark, small),
        upstream.open_table(schema, comparison.columns, digits, ts) as reader,
    ):
        if upstream.supports_ranges and comparison.range_keyed:
            outcome = _by_ranges(spark, options, upstream, reader, delta_side, comparison, tracker)
        else:
            outcome = _by_buckets(spark, options, upstream, reader, delta_side, comparison, tracker)
        notes += reader.notes + outcome.notes
        repair = None
        repair_started = time.monotonic()
        if options.repair and outcome.diff is not None and outcome.diff.counts.total:
            how = repairing.repair if comparison.key else repairing.repair_multiset
            refused = repairing.refusal(snapshot, comparison)
            if refused:
                notes.append(f"not repaired: {refused}")
            else:
                repair = how(
                    spark, config, snapshot, comparison, outcome.diff,
                    tolerance=options.float_tolerance, sample_size=options.sample_size, upstream_ts=ts,
                )  # fmt: skip
        if repair is not None:
            outcome.seconds["repair"] = time.monotonic() - repair_started
        queries = getattr(reader, "queries", 0)
        upstream_snapshot = getattr(reader, "snapshot", None)
    diff = outcome.diff
    counts = diff.counts if diff is not None else None
    within = 0
    if counts is not None and counts.total == 0 and outcome.chunks_differing:
        within = outcome.chunks_differing
    if diff is not None:
        diff.differences.unpersist()
    return TableResult(
        f"{db}.{table}",
        "different" if counts is not None and counts.total else "equal",
        strategy=outcome.strategy,
        upstream_rows=outcome.upstream_rows,
        delta_rows=outcome.delta_rows,
        chunks=outcome.chunks,
        chunks_differing=outcome.chunks_differing,
        chunks_within_tolerance=within,
        diff=counts or DiffCounts(),
        repair=repair,
        upstream_ts=ts,
        upstream_snapshot=upstream_snapshot,
        delta_version=snapshot.version,
        delta_resolved_ts=snapshot.resolved_ts,
        upstream_queries=queries,
        seconds=time.monotonic() - started,
        notes=tuple(notes),
        chunk_map=tuple(outcome.chunk_map),
        narrowed=tuple(outcome.narrowed),
        stage_seconds=MappingProxyType(outcome.seconds),
    )


def _comparison(schema: TableSchema, snapshot: DeltaSnapshot, ignored: Sequence[str]) -> Comparison:
    """Check the schemas. A table keyed by TiDB's hidden row id (TiDB, or a replica that keeps it) is
    compared by it when the Delta table holds it on every row (a kv-scan backfill does; TiCDC's outputs
    do not carry it), else as a multiset of whole rows."""
    if tuple(k.lower() for k in schema.primary_key) == (TIDB_ROWID,) and not _has_rowids(snapshot.df):
        schema = TableSchema(schema.db, schema.table, schema.columns, ())
    delta_types = {f.name: f.dataType.simpleString() for f in snapshot.df.schema.fields}
    return compare_schemas(schema, delta_types, ignored)


def _has_rowids(df: DataFrame) -> bool:
    """True when the Delta table has a `_tidb_rowid` column and no row leaves it NULL."""

    name = next((f.name for f in df.schema.fields if f.name.lower() == TIDB_ROWID), None)
    return name is not None and not df.where(column(name).isNull()).limit(1).count()


def _project(df: DataFrame, comparison: Comparison) -> DataFrame:
    """The Delta columns that are compared, under their upstream names."""

    by_lower = {f.name.lower(): f.name for f in df.schema.fields}
    return df.select(*[column(by_lower[c.name.lower()]).alias(c.name) for c in comparison.columns])


def _frame(spark: SparkSession, comparison: Comparison, rows: Any) -> DataFrame:
    if isinstance(rows, list):
        return rows_to_frame(spark, comparison.columns, rows)
    return _project(rows, comparison)


def _by_ranges(
    spark: SparkSession,
    options: RunOptions,
    upstream: Upstream,
    reader: Any,
    delta_side: SparkSide,
    comparison: Comparison,
    tracker: Tracker,
) -> _Outcome:
    schema = comparison.schema
    size = effective_chunk_size(
        upstream.row_estimate(schema.db, schema.table), options.chunk_size, options.max_chunks
    )
    clock = _Clock()
    ranges = ranges_from_boundaries(reader.boundaries(size))
    tick = tracker.stage(f"{schema.name}: checksums", len(ranges))
    try:
        upstream_sums, delta_sums = _both(
            lambda: reader.checksums(ranges, tick), lambda: delta_side.checksums(ranges, keep=True)
        )
        differing = [(r, u) for r, u, d in zip(ranges, upstream_sums, delta_sums, strict=True) if u != d]
        outcome = _Outcome(
            "range",
            len(ranges),
            len(differing),
            sum(u[0] for u in upstream_sums),
            sum(d[0] for d in delta_sums),
            None,
            chunk_map=[
                ChunkStatus(r.describe(), u[0], d[0], u == d)
                for r, u, d in zip(ranges, upstream_sums, delta_sums, strict=True)
            ],
        )
        outcome.seconds["checksums"] = clock.lap()
        if not differing:
            return outcome
        narrowed = delta_side.narrowed([r for r, _ in differing])
        try:
            rounds = tracker.stage(f"{schema.name}: bisecting {len(differing)} chunks", 0)

            def split(
                parts: Sequence[tuple[KeyRange, Checksum]],
            ) -> Sequence[Sequence[tuple[KeyRange, Checksum]]]:
                rounds(1)
                return reader.split(parts, options.bisection_factor)

            leaves = narrow(differing, split, narrowed.checksums, leaf_rows=options.leaf_rows)
        finally:
            narrowed.release()
        outcome.narrowed = [r.describe() for r in leaves]
        outcome.seconds["bisection"] = clock.lap()
        tracker.stage(f"{schema.name}: row diff of {len(leaves)} ranges", 0)
        up_frame = _frame(spark, comparison, reader.rows(leaves))
        outcome.diff = diff_keyed(
            up_frame, delta_side.rows(leaves), comparison,
            tolerance=options.float_tolerance, sample_size=options.sample_size,
        )  # fmt: skip
        outcome.seconds["row diff"] = clock.lap()
        return outcome
    finally:
        delta_side.release()


def _both(upstream: Callable[[], T], downstream: Callable[[], U]) -> tuple[T, U]:
    """Run the upstream queries in a thread while Spark computes the Delta side: they overlap."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(upstream)
        down = downstream()
        return pending.result(), down


def bucket_width(rows: int | None, chunk_size: int) -> int:
    """Hex digits of the hash bucket: about `chunk_size` rows per bucket, 1..4 digits."""
    wanted = max(1, (rows or 0) // max(chunk_size, 1))
    return max(1, min(4, math.ceil(math.log(wanted, 16)) if wanted > 1 else 1))


def _by_buckets(
    spark: SparkSession,
    options: RunOptions,
    upstream: Upstream,
    reader: Any,
    delta_side: SparkSide,
    comparison: Comparison,
    tracker: Tracker,
) -> _Outcome:
    schema = comparison.schema
    by = comparison.key or comparison.columns
    width = bucket_width(upstream.row_estimate(schema.db, schema.table), options.chunk_size)
    clock = _Clock()
    tick = tracker.stage(f"{schema.name}: bucket checksums", 1)
    if isinstance(reader, SparkSide):  # an upstream in files: both sides in one Spark job
        up, down = bucket_checksums_of_both(reader, delta_side, width, by)
    else:
        up, down = _both(
            lambda: reader.bucket_checksums(width, by), lambda: delta_side.bucket_checksums(width, by)
        )
    tick(1)
    names = sorted(set(up) | set(down))
    differing = [b for b in names if up.get(b, (0, 0)) != down.get(b, (0, 0))]
    unequal = set(differing)
    outcome = _Outcome(
        "bucket",
        len(names),
        len(differing),
        sum(c for c, _ in up.values()),
        sum(c for c, _ in down.values()),
        None,
        chunk_map=[
            ChunkStatus(f"bucket {b}", up.get(b, (0, 0))[0], down.get(b, (0, 0))[0], b not in unequal)
            for b in names
        ],
    )
    outcome.seconds["checksums"] = clock.lap()
    if not differing:
        return outcome
    up_frame = _frame(spark, comparison, reader.bucket_rows(width, by, differing))
    down_frame = delta_side.bucket_rows(width, by, differing)
    if comparison.key:
        outcome.diff = diff_keyed(
            up_frame,
            down_frame,
            comparison,
            tolerance=options.float_tolerance,
            sample_size=options.sample_size,
        )
    else:
        outcome.diff = diff_multiset(up_frame, down_frame, comparison, sample_size=options.sample_size)
    outcome.seconds["row diff"] = clock.lap()
    return outcome


class _Clock:
    """Seconds since the last lap: the time of each stage of one table."""

    def __init__(self) -> None:
        self._last = time.monotonic()

    def lap(self) -> float:
        now = time.monotonic()
        elapsed, self._last = now - self._last, now
        return elapsed
