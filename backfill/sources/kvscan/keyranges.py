"""From raw events to one change per row key: key ranges, match, window, collapse.

Spark logic as functions from DataFrame to DataFrame; Python touches events per key range through
`mapInArrow`, where a region stream must be replayed in order and the last change per key kept. One
shuffle serves both: partition i of `by_key_range` holds every event of key range i. COMMITTED events
are self-contained and become changes without the matcher.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.sources.kvscan.eager_decode import EagerDecode
from backfill.sources.kvscan.matcher import (
    COMMITTED,
    EVENT_TYPES,
    ROW_OPS,
    MatchError,
    StreamArrays,
    match_stream_arrays,
)
from backfill.sources.kvscan.range_collapse import CollapsePlan, collapse_changes, match_errors

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MATCH_OUTPUT_DDL = (
    "kind STRING, scan_id STRING, region_id BIGINT, key BINARY, op STRING, value BINARY, old_value BINARY, "
    "start_ts BIGINT, commit_ts BIGINT, resolved_ts BIGINT, initialized BOOLEAN, open_locks BIGINT, "
    "message STRING"
)
_MATCH_FIELDS = [f.split() for f in MATCH_OUTPUT_DDL.split(", ")]
_ARROW_TYPES = {"STRING": pa.string(), "BIGINT": pa.int64(), "BINARY": pa.binary(), "BOOLEAN": pa.bool_()}
MATCH_OUTPUT_ARROW = pa.schema([pa.field(name, _ARROW_TYPES[kind]) for name, kind in _MATCH_FIELDS])
REGION_LEVEL_COLUMNS = ("scan_id", "scan_checkpoint_ts", "region_id", "seq", "type", "resolved_ts")
KEY_LEVEL_COLUMNS = (  # the matcher input columns only row events fill, with their types
    ("start_ts", "bigint"), ("commit_ts", "bigint"), ("op_type", "string"), ("key", "binary"), ("value", "binary"),
    ("old_value", "binary"), ("generation", "bigint"),
)  # fmt: skip
MATCHER_INPUT = (*REGION_LEVEL_COLUMNS, *(name for name, _ in KEY_LEVEL_COLUMNS))
CHANGE_COLUMNS = ("scan_id", "region_id", "key", "op", "value", "old_value", "start_ts", "commit_ts")


def match_region_stream(stream: pa.Table) -> pa.Table:
    """Replay one (capture, region) stream, in seq order, through the matcher.

    Emits one `change` row per committed change, then one `region` row (resolved ts, initialized, open
    locks), or an `error` row naming the region, key and ts: raising inside a Python worker would lose
    the message in a JVM stack trace. Only small columns enter Python; keys go in as dictionary codes and
    values never do: the output takes them from the matched rows with Arrow.
    """
    scan_id = stream.column("scan_id")[0].as_py()
    region_id = stream.column("region_id")[0].as_py()
    checkpoint_ts = stream.column("scan_checkpoint_ts")[0].as_py()
    keys = stream.column("key")
    types, ops = stream.column("type"), stream.column("op_type")
    start_ts, start_ts_null = _ints_and_nulls(stream.column("start_ts"))
    commit_ts, commit_ts_null = _ints_and_nulls(stream.column("commit_ts"))
    resolved_ts, resolved_ts_null = _ints_and_nulls(stream.column("resolved_ts"))
    arrays = StreamArrays(
        type=_codes(types, EVENT_TYPES),
        start_ts=start_ts,
        start_ts_null=start_ts_null,
        commit_ts=commit_ts,
        commit_ts_null=commit_ts_null,
        op_type=_codes(ops, ROW_OPS),
        key=pc.fill_null(pc.dictionary_encode(keys).combine_chunks().indices, -1).to_numpy().astype(np.int64),
        has_value=pc.fill_null(pc.greater(pc.binary_length(stream.column("value")), 0), False).to_numpy(
            zero_copy_only=False
        ),
        generation=pc.fill_null(stream.column("generation"), 0).to_numpy(),
        resolved_ts=resolved_ts,
        resolved_ts_null=resolved_ts_null,
        describe=lambda i: (
            stream.column("seq")[i].as_py(),
            types[i].as_py(),
            ops[i].as_py(),
            keys[i].as_py(),
        ),
    )
    try:
        found = match_stream_arrays(arrays, region_id, checkpoint_ts, where=f"scan {scan_id}")
    except MatchError as exc:
        return _single_row("error", scan_id, region_id, message=str(exc))
    result = found.outcome
    commits, prewrites = pa.array(found.commits, pa.int64()), pa.array(found.prewrites, pa.int64())
    ops = stream.column("op_type").take(prewrites)
    values = pc.if_else(
        pc.equal(ops, "PUT"), stream.column("value").take(prewrites), pa.scalar(b"", pa.binary())
    )
    changes = _change_rows(
        stream.select(["scan_id", "region_id", "key", "start_ts", "commit_ts"]).take(commits),
        ops,
        values,
        stream.column("old_value").take(prewrites),  # TiKV sends the old value with the prewrite
    )
    region = _single_row(
        "region", scan_id, region_id,
        resolved_ts=result.resolved_ts, initialized=result.initialized, open_locks=result.open_locks,
    )  # fmt: skip
    return pa.concat_tables([changes, region])


def region_state(
    scan_id: str, checkpoint_ts: int, region_id: int, events: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The `region` (or `error`) row the matcher gives for a region's INITIALIZED and RESOLVED events
    (`seq`, `type`, `resolved_ts` each); the other events do not change a region's state."""
    events = sorted(events, key=lambda e: e["seq"])
    n = len(events)
    stream = pa.table(
        {
            "scan_id": pa.array([scan_id] * n, pa.string()),
            "scan_checkpoint_ts": pa.array([checkpoint_ts] * n, pa.int64()),
            "region_id": pa.array([region_id] * n, pa.int64()),
            "seq": pa.array([e["seq"] for e in events], pa.int64()),
            "type": pa.array([e["type"] for e in events], pa.string()),
            "resolved_ts": pa.array([e["resolved_ts"] for e in events], pa.int64()),
            **{name: pa.nulls(n, _ARROW_TYPES[kind.upper()]) for name, kind in KEY_LEVEL_COLUMNS},
        }
    )
    return match_region_stream(stream).to_pylist()[-1]


def _ints_and_nulls(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """An integer column as numpy values (0 for nulls) and its null mask."""
    return pc.fill_null(column, 0).to_numpy(), pc.is_null(column).to_numpy(zero_copy_only=False)


def _codes(column: pa.ChunkedArray, choices: tuple[str, ...]) -> np.ndarray:
    """Small integer codes of a string column (-1 for anything not in `choices`)."""
    return pc.fill_null(pc.index_in(column, value_set=pa.array(choices)), -1).to_numpy().astype(np.int64)


def _single_row(kind: str, scan_id: str, region_id: int, **values: object) -> pa.Table:
    row = {name: None for name in MATCH_OUTPUT_ARROW.names} | values
    row.update(kind=kind, scan_id=scan_id, region_id=region_id)
    return pa.Table.from_pylist([row], schema=MATCH_OUTPUT_ARROW)


def match_key_range(events: pa.Table) -> pa.Table:
    """One key range's events as matcher output: COMMITTED events (incremental scan, 1PC) become changes
    directly (stale ones, at or below their capture's checkpoint, dropped); every (capture, region)
    stream piece goes through the matcher. A region's keyless events (INITIALIZED, RESOLVED) are in
    every range its keys span, so each piece sees them in order and reports the same region state.
    """
    is_committed = pc.fill_null(pc.equal(events.column("type"), COMMITTED), False)
    fresh = pc.fill_null(pc.greater(events.column("commit_ts"), events.column("scan_checkpoint_ts")), False)
    committed = events.filter(pc.and_(is_committed, fresh))
    parts = [
        _change_rows(
            committed, committed.column("op_type"), committed.column("value"), committed.column("old_value")
        )
    ]
    backwards = pc.fill_null(
        pc.less_equal(committed.column("commit_ts"), committed.column("start_ts")), False
    )
    if pc.any(backwards).as_py():
        bad = committed.filter(backwards).slice(0, 1).to_pylist()[0]
        message = (
            f"scan {bad['scan_id']}: region {bad['region_id']}, seq {bad['seq']}, key {(bad['key'] or b'').hex()}, "
            f"start_ts {bad['start_ts']}, commit_ts {bad['commit_ts']}: commit_ts {bad['commit_ts']} is not after "
            f"its start_ts {bad['start_ts']}"
        )
        parts.append(_single_row("error", bad["scan_id"], bad["region_id"], message=message))
    streams = events.filter(pc.invert(is_committed))
    if streams.num_rows:
        order = [("scan_id", "ascending"), ("region_id", "ascending"), ("seq", "ascending")]
        streams = streams.take(pc.sort_indices(streams, sort_keys=order))
        scan = pc.dictionary_encode(streams.column("scan_id")).combine_chunks().indices
        stream_of = np.stack(
            [pc.fill_null(scan, -1).to_numpy(), pc.fill_null(streams.column("region_id"), -1).to_numpy()]
        )
        starts = np.flatnonzero((stream_of[:, 1:] != stream_of[:, :-1]).any(axis=0)) + 1
        bounds = [0, *starts.tolist(), streams.num_rows]
        parts += [match_region_stream(streams.slice(lo, hi - lo)) for lo, hi in itertools.pairwise(bounds)]
    return pa.concat_tables(parts)


def _change_rows(
    events: pa.Table,
    ops: pa.ChunkedArray | pa.Array,
    values: pa.ChunkedArray | pa.Array,
    old_values: pa.ChunkedArray | pa.Array,
) -> pa.Table:
    """`change` rows: key, ts and place from `events`, op, value and old value as given."""
    n = events.num_rows
    return pa.table(
        {
            "kind": pa.array(["change"] * n, pa.string()),
            "scan_id": events.column("scan_id"),
            "region_id": events.column("region_id"),
            "key": events.column("key"),
            "op": ops,
            "value": values,
            "old_value": old_values,
            "start_ts": events.column("start_ts"),
            "commit_ts": events.column("commit_ts"),
            "resolved_ts": pa.nulls(n, pa.int64()),
            "initialized": pa.nulls(n, pa.bool_()),
            "open_locks": pa.nulls(n, pa.int64()),
            "message": pa.nulls(n, pa.string()),
        },
        schema=MATCH_OUTPUT_ARROW,
    )


@dataclass(frozen=True)
class KeyRanges:
    """Key ranges cut at `splits` (range i is [splits[i-1], splits[i])), range i sent to shuffle
    partition i by its hash tag `tags[i]` (see `partition_tags`)."""

    splits: tuple[bytes, ...]
    tags: tuple[int, ...]

    def covering(self, start: bytes, end: bytes) -> list[int]:
        """The ranges a region [start, end) overlaps (end b"" = unbounded)."""
        first = bisect.bisect_right(self.splits, start)
        last = bisect.bisect_left(self.splits, end) if end else len(self.splits)
        return list(range(first, max(first, last) + 1))


def by_key_range(
    events: DataFrame, ranges: KeyRanges, regions: Mapping[tuple[str, int], tuple[bytes, bytes]]
) -> DataFrame:
    """The events (matcher columns) shuffled so that partition i holds every event of key range i.

    A keyed event goes to its key's range, a keyless one (INITIALIZED, RESOLVED) to every range its
    region's [start, end) from `regions` spans (every range, for a region the manifest does not list).
    One shuffle then serves matching and collapsing, and a hot region is matched by several tasks.
    """
    from pyspark.sql import functions as F

    spans = {f"{scan}/{region}": ranges.covering(*span) for (scan, region), span in regions.items()}
    pairs = [
        x for name, covered in sorted(spans.items()) for x in (F.lit(name), F.array(*map(F.lit, covered)))
    ]
    everywhere = F.array(*(F.lit(i) for i in range(len(ranges.tags))))
    region_name = F.concat_ws("/", F.col("scan_id"), F.col("region_id").cast("string"))
    keyless = (
        F.coalesce(F.try_element_at(F.create_map(*pairs), region_name), everywhere) if pairs else everywhere
    )
    index = F.when(F.col("key").isNotNull(), F.array(key_range_index("key", ranges.splits))).otherwise(
        keyless
    )
    ranged = events.select(*MATCHER_INPUT, F.explode(index).alias("range"))
    tagged = ranged.select(*MATCHER_INPUT, lookup_tag(F.col("range"), ranges.tags).alias("bucket"))
    return tagged.repartition(len(ranges.tags), "bucket")


def match_and_collapse(events: DataFrame, plan: CollapsePlan, eager: EagerDecode | None = None) -> DataFrame:
    """Per key range (`by_key_range` output): match the region stream pieces, then keep the last change
    per (table, row handle) with `range_collapse.collapse_changes`, and decode the PUTs of `eager`'s segments
    (`eager_decode`). Matcher errors come out as rows under table_idx `MATCH_ERRORS`, bad changes under
    `BAD_ROWS`."""
    eager = EagerDecode() if eager is None else eager
    return events.mapInArrow(partial(_match_and_collapse, plan=plan, eager=eager), eager.spark_schema())


def _match_and_collapse(
    batches: Iterator[pa.RecordBatch], plan: CollapsePlan, eager: EagerDecode
) -> Iterator[pa.RecordBatch]:
    collected = list(batches)
    if not collected:
        return
    matched = match_key_range(pa.Table.from_batches(collected))
    kind = matched.column("kind")
    errors = matched.filter(pc.equal(kind, "error")).column("message").to_pylist()
    if errors:
        yield from eager.widen(match_errors(sorted(set(errors)))).to_batches()
        return
    is_change = pc.equal(kind, "change").to_numpy(zero_copy_only=False)
    yield from eager.decode(collapse_changes(matched, plan, among=is_change)).to_batches()


def matched_changes(events: DataFrame) -> DataFrame:
    """The matched changes (CHANGE_COLUMNS) of `by_key_range` output, uncollapsed."""
    return (
        events.mapInArrow(_matched_changes, MATCH_OUTPUT_DDL)
        .filter("kind = 'change'")
        .select(*CHANGE_COLUMNS)
    )


def _matched_changes(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    collected = list(batches)
    if collected:
        yield from match_key_range(pa.Table.from_batches(collected)).to_batches()


def in_windows(windows: Mapping[str, tuple[int, int]]) -> Column:
    """commit_ts inside the (lo, hi] window of the row's capture."""
    from pyspark.sql import functions as F

    condition = F.lit(False)
    for scan_id, (lo, hi) in windows.items():
        condition = condition | (
            (F.col("scan_id") == scan_id)
            & (F.col("commit_ts") > F.lit(lo))
            & (F.col("commit_ts") <= F.lit(hi))
        )
    return condition


def key_range_index(column: str, splits: Sequence[bytes]) -> Column:
    """The key range a binary column falls in: how many split keys are at or below it."""
    from pyspark.sql import functions as F

    total = F.lit(0)
    for split in splits:
        total = total + F.when(F.col(column) >= F.lit(bytearray(split)), 1).otherwise(0)
    return total


def key_range_splits(region_counts: Sequence[tuple[bytes, int]], buckets: int) -> list[bytes]:
    """Split keys, chosen among region start keys, that cut the events into `buckets` even parts.

    `region_counts` holds (start key, events) per region. This is seed 003's balancing: ranges follow
    region boundaries and carry about the same number of events, so one hot table with many regions is
    spread over many tasks while small tables share one.
    """
    ordered = sorted((key, count) for key, count in region_counts if count > 0)
    total = sum(count for _, count in ordered)
    if buckets <= 1 or total == 0:
        return []
    target = total / buckets
    splits: list[bytes] = []
    running = 0
    for key, count in ordered:
        if running >= target * (len(splits) + 1) and key and (not splits or key > splits[-1]):
            splits.append(key)
            if len(splits) == buckets - 1:
                break
        running += count
    return splits


def partition_tags(spark: SparkSession, partitions: int) -> list[int]:
    """For each shuffle partition i, a BIGINT that Spark's hash partitioning sends to partition i.

    `repartition(n, col)` places a row by `pmod(hash(col), n)`; tagging key range i with tag i puts
    exactly one key range in each partition, without the sampling pass of `repartitionByRange`.
    """
    from pyspark.sql import functions as F

    probe = spark.range(0, 64 * partitions).select(
        "id", F.pmod(F.hash(F.col("id")), F.lit(partitions)).alias("p")
    )
    first: dict[int, int] = {}
    for row in probe.collect():
        first.setdefault(row["p"], row["id"])
    if len(first) < partitions:
        raise RuntimeError(f"no hash tag found for some of {partitions} partitions")
    return [first[p] for p in range(partitions)]


def lookup_tag(index: Column, tags: Sequence[int]) -> Column:
    """`tags[index]` as a Spark expression."""
    from pyspark.sql import functions as F

    return F.element_at(F.array(*(F.lit(t).cast("bigint") for t in tags)), index + 1)
