"""The apply stage every source shares: a window's row changes into Delta, exactly once.

All changes are materialized before the first commit (bad input leaves every table unchanged). Then each
table walks its schema versions: one tagged MERGE per segment (an append on a first load, a rewrite of the
whole table for a small one), then the DDL step to the next version as its own tagged commit. Tables go
side by side, each group of tables that hand a name to one another in its own session and in order. A rerun
skips what is already committed.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from backfill import sink
from backfill.apply.ddl import apply_ddl_step, finish_interrupted_rename
from backfill.apply.exchange import Exchange, apply_exchange_step, exchanges
from backfill.apply.merge import (
    arrow_key_bounds,
    create_table,
    has_no_rows,
    key_bound_aggregates,
    key_range_columns,
    merge_changes,
)
from backfill.apply.table_layout import apply_properties, merge_strategy
from backfill.apply.table_names import CatalogTarget, sync_names
from backfill.changes.collapse import with_moved_key_deletes, without_before_columns
from backfill.changes.contract import ComputedRows, DecodeParallelism, DriverRows, RowChanges, Window
from backfill.clock import StageClock
from backfill.report import TableOutcome
from backfill.tables import RowIdentity
from tidelake import conventions, delta
from tidelake.errors import InputError
from tidelake.faults import fault_point
from tidelake.spark import execution_conf
from tidelake.sparkerrors import input_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from backfill.codec import SchemaVersion, TableSchema
    from tidelake.config import TableLayout, TargetConfig

# Spark jobs submitted at once in the decode and merge stages. A small table's steps wait on the driver and
# on the log more than on the cores, so more jobs than cores pay (bench/NOTES.md "Spark jobs at once").
PARALLEL_JOBS = 8


@dataclass(frozen=True)
class ApplyTarget:
    """Where and as whom the stage writes."""

    warehouse: str
    app_id: str
    catalog: CatalogTarget | None = None  # where tables are registered by name (None: not at all)
    layouts: TargetConfig | None = None  # table layouts (`[target]`); None: Delta's defaults

    def layout(self, database: str | None, table: str) -> TableLayout | None:
        return None if self.layouts is None else self.layouts.layout_of(database or "", table)


@dataclass(frozen=True)
class SegmentRows:
    """One (table, segment)'s changes, persisted; `puts_only` when its DELETEs were left out."""

    rows: DataFrame
    puts_only: bool
    key_column: str | None = None  # the leading key column whose bounds prune the MERGE
    key_bounds: tuple[Any, Any] | None = None
    computed: bool = False  # a projection of rows the source has computed already: no job to run

    def materialize(self) -> SegmentRows:
        """Run the one job that computes (and caches) the rows; it also finds the key bounds."""
        if self.key_column is None:
            self.rows.count()
            return self
        (bounds,) = self.rows.agg(*key_bound_aggregates(self.key_column)).collect()
        return replace(self, key_bounds=(bounds["_key_lo"], bounds["_key_hi"]))


def apply_window(
    spark: SparkSession, target: ApplyTarget, window: Window, changes: RowChanges, clock: StageClock
) -> list[TableOutcome]:
    """Apply `changes` to every table of `window`; one outcome per table, in window order."""
    swaps = exchanges(window.tables, window.floors, window.resolved_ts)
    counts = changes.counts()
    per_segment: dict[tuple[int, int], int] = {}
    for (index, seg, _), rows in counts.items():
        per_segment[(index, seg)] = per_segment.get((index, seg), 0) + rows
    largest = max(per_segment.values(), default=0)
    with (
        clock.stage("decode"),
        input_errors("changes"),
        delta.session_conf_set(spark, execution_conf(largest)),
    ):
        segments = materialize(spark, target, window, changes)
    tasks = changes.tasks_per_table() if isinstance(changes, DecodeParallelism) else {}
    with clock.stage("merge"):

        def apply(session: SparkSession, index: int) -> Walk:
            outcome = yield from _apply_table(session, target, window, index, segments, counts, swaps)
            outcome.decode_tasks = tasks.get(index, 0)
            if target.catalog is not None:  # the table's names now follow its folders
                sync_names(session, target.catalog, window.tables[index].names())
            return outcome

        outcomes = _per_table_in_parallel(spark, window, apply, swaps)
    for segment in segments.values():
        segment.rows.unpersist()
    return outcomes


def materialize(
    spark: SparkSession, target: ApplyTarget, window: Window, changes: RowChanges
) -> dict[tuple[int, int], SegmentRows]:
    """Every non-empty segment's rows, persisted and counted, so that bad input fails here.

    One job per segment, each submitted as soon as its rows are planned: planning the next ones (a few
    hundredths of a second each, on the driver) goes on beside the jobs, and small tables decode beside the
    hot one instead of after it.
    """
    counts = changes.counts()
    ready, jobs = {}, {}
    with ThreadPoolExecutor(max_workers=PARALLEL_JOBS) as pool:
        for index, table in enumerate(window.tables):
            for seg, version in enumerate(table.versions):
                if version.schema is not None and (
                    counts.get((index, seg, "PUT")) or counts.get((index, seg, "DELETE"))
                ):
                    segment = _segment_rows(spark, target, window, changes, index, seg)
                    if segment.computed:
                        ready[(index, seg)] = segment
                    else:
                        jobs[(index, seg)] = pool.submit(segment.materialize)
        ready.update({key: job.result() for key, job in jobs.items()})
    return ready


def _segment_rows(
    spark: SparkSession, target: ApplyTarget, window: Window, changes: RowChanges, index: int, seg: int
) -> SegmentRows:
    """One segment's rows, planned: persisted (to be materialized), or a projection of rows the source has
    already computed. A table's first segment going into a table with no rows yet is appended, so its
    DELETEs (rows inserted and deleted again) need not be produced at all."""
    version = window.tables[index].versions[seg]
    schema = version.schema
    assert schema is not None
    path = conventions.table_path(target.warehouse, schema.schema_name, schema.name)
    if version.finished_ts <= window.floors[index]:
        _check_keys_exist(spark, path, schema, window.identity(index))
    puts_only = seg == 0 and bool(changes.counts().get((index, seg, "PUT"))) and has_no_rows(spark, path)
    keys = window.identity(index).columns(schema)
    local = changes.local_rows(index, seg, puts_only=puts_only) if isinstance(changes, DriverRows) else None
    frame = changes.rows(index, seg, puts_only=puts_only)
    # the before/after key rule (`with_moved_key_deletes`); a first load has no row to move
    frame = without_before_columns(frame) if puts_only else with_moved_key_deletes(frame, keys)
    if local is not None:  # rows on the driver: nothing to compute, and the key bounds are read there
        key = None if puts_only else key_range_columns(frame, keys)
        bounds = None if key is None else arrow_key_bounds(local, key)
        return SegmentRows(frame, puts_only, key, bounds, computed=True)
    if puts_only and isinstance(changes, ComputedRows) and changes.cached_rows(index, seg, puts_only=True):
        return SegmentRows(frame, puts_only, computed=True)
    frame = frame.persist()
    return SegmentRows(frame, puts_only, None if puts_only else key_range_columns(frame, keys))


def _check_keys_exist(spark: SparkSession, path: str, schema: TableSchema, identity: RowIdentity) -> None:
    """The table as it stands was written with the schema its checkpoint falls in: a schema that keys rows
    by columns the table does not have contradicts its history (before anything is committed)."""
    if not delta.is_delta_table(spark, path):
        return
    have = {name.lower() for name in delta.table_column_names(spark, path)}
    missing = [key for key in identity.columns(schema) if key.lower() not in have]
    if (
        schema.pk_kind == "rowid" and conventions.ROWID not in have
    ):  # a table without a key carries its row id
        missing.append(conventions.ROWID)
    if missing:
        raise InputError(
            f"table {schema.schema_name}.{schema.name} (id {schema.table_id}): its schema keys rows by "
            f"{', '.join(missing)}, which the Delta table at {path} does not have; the captured table info "
            "disagrees with the schema this table was written with"
        )


def sharing_groups(names: Sequence[Sequence[Hashable]]) -> list[list[int]]:
    """Indexes grouped so that items sharing a name (directly or through others) are in one group, each
    group in index order, groups ordered by their first index."""
    parent = list(range(len(names)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[Hashable, int] = {}
    for index, item_names in enumerate(names):
        for name in item_names:
            if name in first:
                a, b = sorted((root(first[name]), root(index)))
                parent[b] = a
            else:
                first[name] = index
    groups: dict[int, list[int]] = {}
    for index in range(len(names)):
        groups.setdefault(root(index), []).append(index)
    return list(groups.values())


Walk = Generator[tuple[str, int], None, TableOutcome]
"""One table's walk: pauses ("before"/"after", job id) around each EXCHANGE PARTITION step, returns the
table's outcome."""


def _per_table_in_parallel(
    spark: SparkSession,
    window: Window,
    walk: Callable[[SparkSession, int], Walk],
    swaps: Mapping[tuple[int, int], Exchange],
) -> list[TableOutcome]:
    """`walk(session, index)` for every table, in table order within groups of tables that share a name
    (a rename or re-create hands a path from one table to another) or an EXCHANGE PARTITION, the groups
    side by side on threads.

    Each group gets its own session: a MERGE takes its transaction id from the session conf, so two
    tables committing at once must not share one.
    """
    names = [
        [*table.names(), *(("exchange", job) for i, job in swaps if i == index)]
        for index, table in enumerate(window.tables)
    ]
    outcomes: dict[int, TableOutcome] = {}

    def run_group(group: list[int]) -> None:
        session = spark.newSession()
        outcomes.update(_walk_group(group, lambda index: walk(session, index), swaps, window.floors))

    with ThreadPoolExecutor(max_workers=PARALLEL_JOBS) as pool:
        for _ in pool.map(run_group, sharing_groups(names)):
            pass
    return [outcomes[index] for index in range(len(window.tables))]


def _walk_group(
    group: Sequence[int],
    start: Callable[[int], Walk],
    swaps: Mapping[tuple[int, int], Exchange],
    floors: Sequence[int],
) -> dict[int, TableOutcome]:
    """Walk the group's tables one at a time, in order. A table pauses before an exchange step until the
    other table has merged every row up to the job's ts (or committed its side in an earlier run), and
    after it until the other side is committed too, so that the two commits follow each other."""
    walks: dict[int, Walk] = {}
    at: dict[int, tuple[str, int]] = {}
    passed: set[tuple[int, int]] = set()
    outcomes: dict[int, TableOutcome] = {}

    def may_go_on(index: int) -> bool:
        if index not in at:
            return True
        phase, job = at[index]
        swap = swaps[(index, job)]
        other = swap.partner
        if other in outcomes or (other, job) in passed or floors[other] >= swap.finished_ts:
            return True
        return at.get(other) in ({("before", job), ("after", job)} if phase == "before" else {("after", job)})

    while len(outcomes) < len(group):
        index = next((i for i in group if i not in outcomes and may_go_on(i)), None)
        if index is None:
            raise RuntimeError(f"exchange steps wait on each other: {at}")
        if index in at and at[index][0] == "after":
            passed.add((index, at[index][1]))
        try:
            if index not in walks:
                walks[index] = start(index)
            at[index] = next(walks[index])
        except StopIteration as stop:
            outcomes[index] = stop.value
            at.pop(index, None)
    return outcomes


def _apply_table(
    spark: SparkSession,
    target: ApplyTarget,
    window: Window,
    index: int,
    segments: dict[tuple[int, int], SegmentRows],
    counts: Mapping[tuple[int, int, str], int],
    swaps: Mapping[tuple[int, int], Exchange],
) -> Walk:
    """Walk one table through its segments and DDL steps, each a tagged commit."""
    table, floor, resolved_ts = window.tables[index], window.floors[index], window.resolved_ts
    versions = table.versions
    outcome = TableOutcome(table.label)
    for seg, version in enumerate(versions):
        seg_end = versions[seg + 1].finished_ts if seg + 1 < len(versions) else None
        if seg_end is not None and seg_end <= floor:
            if seg_end == floor:  # the table's last step: a rename killed halfway is finished here
                finish_interrupted_rename(
                    spark, target.warehouse, version, versions[seg + 1], app_id=target.app_id
                )
            continue  # this segment and its DDL are already in the table
        if version.finished_ts >= resolved_ts:
            break  # this segment starts after the run's resolved ts: the next run's work
        schema = version.schema
        if schema is not None:
            upserts = counts.get((index, seg, "PUT"), 0)
            deletes = counts.get((index, seg, "DELETE"), 0)
            path = conventions.table_path(target.warehouse, schema.schema_name, schema.name)
            layout = target.layout(schema.schema_name, schema.name)
            if not create_table(spark, path, schema, window.identity(index), layout) and layout is not None:
                apply_properties(spark, path, layout, app_id=target.app_id, metadata={"table": table.label})
            merge_version = resolved_ts if seg_end is None or seg_end > resolved_ts else seg_end - 1
            metadata = _metadata(window, floor, merge_version, "merge", upserts, deletes)
            if (index, seg) in segments:
                segment = segments[(index, seg)]
                with delta.session_conf_set(spark, _execution_conf(spark, path, upserts + deletes)):
                    merged = merge_changes(
                        spark,
                        path,
                        schema,
                        segment.rows,
                        app_id=target.app_id,
                        txn_version=merge_version,
                        metadata=metadata,
                        puts_only=segment.puts_only,
                        identity=window.identity(index),
                        key_bounds=segment.key_bounds,
                        strategy=merge_strategy(
                            spark, path, layout, keyed=bool(window.identity(index).columns(schema))
                        ),
                        puts=upserts,
                    )
                if merged.committed:
                    outcome.upserted += upserts
                    outcome.deleted += deletes
                outcome.delta_version = merged.table_version
            elif merge_version == resolved_ts:
                advanced = sink.commit(
                    spark, path, sink.Advance(), sink.Txn(target.app_id, resolved_ts, metadata)
                )
                outcome.delta_version = advanced.table_version
            else:
                outcome.delta_version = delta.table_version(spark, path)
            outcome.path, outcome.resolved_ts = path, merge_version
            fault_point("apply.after_merge")
        if seg_end is not None and seg_end <= resolved_ts:
            after = versions[seg + 1]
            metadata = _metadata(window, floor, after.finished_ts, "ddl") | {
                "ddl_job_id": after.job_id,
                "ddl_type": after.job_type,
            }
            outcome.ddl_steps += 1
            fault_point("apply.before_ddl")
            swap = swaps.get((index, after.job_id or 0))
            before_path = (
                None
                if schema is None
                else conventions.table_path(target.warehouse, schema.schema_name, schema.name)
            )
            if swap is not None:
                yield ("before", swap.job_id)
                outcome.path = apply_exchange_step(
                    spark, target.warehouse, version, after, swap, app_id=target.app_id, metadata=metadata
                )
                yield ("after", swap.job_id)
            else:
                with delta.session_conf_set(spark, _execution_conf(spark, before_path, 0)):
                    outcome.path = apply_ddl_step(
                        spark, target.warehouse, version, after, app_id=target.app_id, metadata=metadata,
                        identity=window.identity(index),
                        layout=_layout_after(target, after),
                    )  # fmt: skip
            outcome.resolved_ts = after.finished_ts if outcome.path is not None else None
            outcome.delta_version = delta.table_version(spark, outcome.path) if outcome.path else None
    if outcome.resolved_ts is None:
        final = table.schema_at(resolved_ts)
        outcome.reason = "dropped" if final is None and table.start_ts < resolved_ts else "created later"
    return outcome


def _layout_after(target: ApplyTarget, after: SchemaVersion) -> TableLayout | None:
    """The layout of the table a DDL step leaves (a rename's new name, a created table)."""
    return None if after.schema is None else target.layout(after.schema.schema_name, after.schema.name)


def _execution_conf(spark: SparkSession, path: str | None, changes: int) -> Mapping[str, str] | None:
    """Interpreted execution for a step of few changes on a small table (`tidelake.spark.execution_conf`):
    each table's schema would otherwise have Spark compile new code for a few thousand rows."""
    if path is None or not delta.is_delta_table(spark, path):
        return execution_conf(changes)
    return execution_conf(changes, delta.table_bytes(spark, path))


def _metadata(
    window: Window, floor: int, version: int, step: str, upserted: int = 0, deleted: int = 0
) -> dict[str, object]:
    return conventions.commit_metadata(
        step=step,
        checkpoint_ts=floor,
        resolved_ts=version,
        run_resolved_ts=window.resolved_ts,
        upserted=upserted,
        deleted=deleted,
        source=window.commit_metadata,
    )
