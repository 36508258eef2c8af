"""`backfill run`: captures → matched, windowed, collapsed changes → one Delta MERGE per table per segment.

The flow follows DESIGN.md "Backfill, as the data flows": plan (checkpoints, chain of captures), resolve
(region states from a light pass, then the chain), match and collapse (one shuffle by key range), decode
(all of it before the first commit), merge, report. Only plans, region states and counts reach the driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from backfill import changes as ch
from backfill.catalog import Catalog, TrackedTable, build_catalog, parse_ddl_jobs_jsonl, parse_tables_jsonl
from backfill.codec import SchemaVersion, TableSchema
from backfill.collapse import BAD_ROWS, MATCH_ERRORS, CollapsePlan
from backfill.ddl import migrate_rows
from backfill.decode import decode_changes, decode_error
from backfill.events import input_errors, read_events
from backfill.matcher import COMMITTED
from backfill.plan import ScanProgress, choose_chain, scan_progress
from backfill.report import RunResult, TableOutcome
from backfill.scans import ScanManifest, list_scans
from backfill.sink import create_table, has_no_rows, merge_changes, overwrite_table
from tidelake import delta, fs
from tidelake.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tidelake.config import TidelakeConfig


PARALLEL_JOBS = 4  # Spark jobs submitted at once in the decode and merge stages
EVENTS_PER_RANGE = 2_000_000  # at most, about: a key range's events are held in memory together


@dataclass
class StageClock:
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


@dataclass(frozen=True)
class CaptureSchema:
    """A capture's schema files, parsed."""

    scan: ScanManifest
    catalog: Catalog  # tables selected by the config
    known_ids: frozenset[int]  # every physical id the capture knows, selected or not


def load_capture_schema(
    spark: SparkSession, scan: ScanManifest, patterns: Sequence[str], jobs_from: Sequence[ScanManifest] = ()
) -> CaptureSchema:
    tables_uri = scan.file("schema", "tables.jsonl")
    if not fs.exists(spark, tables_uri):
        raise InputError(f"{tables_uri}: missing: a capture needs the TableInfo of its tables")
    tables = parse_tables_jsonl(fs.read_text(spark, tables_uri), tables_uri)
    jobs = []
    for source in (scan, *jobs_from):
        uri = source.file("schema", "ddl_jobs.jsonl")
        if fs.exists(spark, uri):
            jobs.extend(parse_ddl_jobs_jsonl(fs.read_text(spark, uri), uri))
    selected = build_catalog(tables, jobs, scan.checkpoint_ts, patterns, tables_uri)
    everything = build_catalog(tables, jobs, scan.checkpoint_ts, ["*.*"], tables_uri)
    known = frozenset(pid for t in everything.tables for pid in t.physical_ids())
    return CaptureSchema(scan, selected, known)


def table_path(warehouse: str, schema: TableSchema) -> str:
    return fs.join(warehouse, schema.schema_name or "default", schema.name)


def table_checkpoint(spark: SparkSession, table: TrackedTable, warehouse: str, app_id: str) -> int | None:
    """The highest transaction version recorded under any name the table has in the window."""
    recorded = []
    for version in table.versions:
        if version.schema is not None:
            found = delta.recorded_txn_version(spark, table_path(warehouse, version.schema), app_id)
            if found is not None:
                recorded.append(found)
    return max(recorded, default=None)


def run_backfill(spark: SparkSession, config: TidelakeConfig, *, until_ts: int | None = None) -> RunResult:
    """Apply every complete capture past the tables' checkpoints, up to the global resolved ts."""
    config = replace(
        config,
        source=replace(config.source, path=fs.qualify(spark, config.source.path)),
        target=replace(config.target, warehouse=fs.qualify(spark, config.target.warehouse)),
    )  # Delta wants absolute locations; relative config paths are relative to the working directory
    clock = StageClock()
    app_id = config.job.app_id
    warehouse = config.target.warehouse
    with clock.stage("plan"):
        scans = list_scans(spark, config.source.path)
        if not scans:
            return RunResult(config.job.name, None, None, [], [], clock.seconds, note="no complete captures")
        start = _run_start(spark, scans, config)
        candidates = [s for s in scans if s.current_ts > start]
        if not candidates:
            return RunResult(config.job.name, start, start, [], [], clock.seconds, note="nothing new")

    with clock.stage("resolve"), input_errors("events"):
        survey = survey_regions(spark, candidates)
        if survey.errors:
            raise InputError(survey.errors[0])
        schemas = {s.scan_id: load_capture_schema(spark, s, config.target.tables) for s in candidates}
        progress = {
            s.scan_id: scan_progress(
                s,
                survey.resolved.get(s.scan_id, {}),
                {t.label: sorted(t.physical_ids()) for t in schemas[s.scan_id].catalog.tables},
            )
            for s in candidates
        }
        chain = choose_chain(start, candidates, lambda s: progress[s.scan_id].resolved_ts)
        if not chain:
            # Nothing to apply, but a broken stream is still an error the user must hear about now.
            _match_and_collapse(spark, candidates, survey, CollapsePlan.nothing())[0].unpersist()
            blocked = _blocked_reason(progress.values())
            return RunResult(
                config.job.name, start, start, [], [], clock.seconds, blocked=blocked, note="nothing new"
            )
        resolved_ts = chain[-1].hi if until_ts is None else min(chain[-1].hi, until_ts)
        first = chain[0].scan
        schema = load_capture_schema(spark, first, config.target.tables, [link.scan for link in chain[1:]])

    tables = list(schema.catalog.tables)
    floors = {i: (table_checkpoint(spark, t, warehouse, app_id) or t.start_ts) for i, t in enumerate(tables)}
    with clock.stage("match+collapse"), input_errors("events"):
        plan = CollapsePlan(
            table_of_physical={pid: i for i, t in enumerate(tables) for pid in t.physical_ids()},
            known_ids=schema.known_ids,
            live={pid: t.live_intervals(pid) for t in tables for pid in t.physical_ids()},
            table_floor=floors,
            resolved_ts=resolved_ts,
            segment_bounds={i: [v.finished_ts for v in t.versions[1:]] for i, t in enumerate(tables)},
            windows={link.scan.scan_id: (link.lo, link.hi) for link in chain},
        )
        collapsed, counts = _match_and_collapse(spark, candidates, survey, plan)

    zero_dates = spark.sparkContext.accumulator(0)
    with clock.stage("decode"), _decode_errors():
        # Decode everything before the first commit: bad row bytes must leave every table unchanged.
        decoded, decode_tasks = _decode_all(spark, warehouse, tables, collapsed, counts, zero_dates)
    scans_used = [link.scan.scan_id for link in chain]
    with clock.stage("merge"):

        def apply(session: SparkSession, index: int) -> TableOutcome:
            outcome = _apply_table(
                session, config, tables[index], index, decoded, counts, floors[index], resolved_ts, scans_used
            )
            outcome.decode_tasks = decode_tasks.get(index, 0)
            return outcome

        outcomes = _per_table_in_parallel(spark, tables, apply)
    for frame in (*(d.rows for d in decoded.values()), collapsed):
        frame.unpersist()
    return RunResult(
        config.job.name, start, resolved_ts, scans_used, outcomes, clock.seconds,
        zero_dates=zero_dates.value, blocked=_blocked_reason(progress[link.scan.scan_id] for link in chain[-1:]),
    )  # fmt: skip


def _run_start(spark: SparkSession, scans: Sequence[ScanManifest], config: TidelakeConfig) -> int:
    """The lowest checkpoint among the tables: the Delta tables' recorded versions, lowered for tracked
    tables that have no Delta table yet (a run killed before it created them starts them over)."""
    from backfill.status import target_tables

    app_id, warehouse = config.job.app_id, config.target.warehouse
    recorded = [
        delta.recorded_txn_version(spark, uri, app_id) for _, _, uri in target_tables(spark, warehouse)
    ]
    if not recorded or None in recorded:
        return min(s.checkpoint_ts for s in scans)
    start = min(v for v in recorded if v is not None)
    covering = [s for s in scans if s.checkpoint_ts <= start]
    if not covering:
        return start  # choose_chain reports the gap
    first = max(covering, key=lambda s: s.checkpoint_ts)
    for table in load_capture_schema(spark, first, config.target.tables).catalog.tables:
        if table.schema_at(start) is not None and table_checkpoint(spark, table, warehouse, app_id) is None:
            start = min(start, max(first.checkpoint_ts, table.start_ts))
    return start


@dataclass(frozen=True)
class RegionSurvey:
    """What one light pass over the captures' events says per (capture, region)."""

    event_counts: Mapping[tuple[str, int], int]
    resolved: Mapping[
        str, Mapping[int, int | None]
    ]  # capture -> region -> resolved ts (None: not initialized)
    errors: Sequence[str]  # e.g. a resolved ts that goes back


def survey_regions(spark: SparkSession, scans: Sequence[ScanManifest]) -> RegionSurvey:
    """Event counts and resolved ts per region, from the small columns only. A region's state depends on
    its INITIALIZED and RESOLVED events alone, so the driver replays just those through the matcher."""
    from pyspark.sql import functions as F

    region_level = F.when(
        F.col("type").isin("INITIALIZED", "RESOLVED"), F.struct("seq", "type", "resolved_ts")
    )
    rows = (
        read_events(spark, scans)
        .groupBy("scan_id", "region_id")
        .agg(F.count(F.lit(1)).alias("events"), F.collect_list(region_level).alias("region_level"))
        .collect()
    )
    checkpoints = {scan.scan_id: scan.checkpoint_ts for scan in scans}
    resolved: dict[str, dict[int, int | None]] = {}
    errors = []
    for row in rows:
        scan_id, region_id = row["scan_id"], row["region_id"]
        events = [r.asDict() for r in row["region_level"]]
        state = ch.region_state(scan_id, checkpoints[scan_id], region_id, events) if events else None
        if state is not None and state["kind"] == "error":
            errors.append(state["message"])
        elif state is not None and state["initialized"]:
            resolved.setdefault(scan_id, {})[region_id] = state["resolved_ts"]
        else:
            resolved.setdefault(scan_id, {})[region_id] = None
    counts = {(row["scan_id"], row["region_id"]): row["events"] for row in rows}
    return RegionSurvey(counts, resolved, sorted(errors))


def _blocked_reason(progress: Any) -> str | None:
    for scan in progress:
        slow = scan.blocked_by if isinstance(scan, ScanProgress) else None
        if slow is None:
            continue
        if slow.holes:
            start, end = slow.holes[0]
            return f"{slow.label}: no region covers keys [{start.hex()}, {end.hex() or '+inf'}) in {scan.scan.scan_id}"
        return f"{slow.label}, region {slow.lagging_region} in {scan.scan.scan_id}"
    return None


def events_by_key_range(
    spark: SparkSession,
    scans: Sequence[ScanManifest],
    event_counts: Mapping[tuple[str, int], int],
    windows: Mapping[str, tuple[int, int]] | None = None,
) -> DataFrame:
    """The captures' events shuffled by key ranges cut at region boundaries and balanced by the regions'
    `event_counts` (seed 003). COMMITTED events at or below their capture's checkpoint, or outside its
    (lo, hi] window in `windows`, are left out before the shuffle: overlapping captures repeat many."""
    from pyspark.sql import functions as F

    read = read_events(spark, scans)
    committed = (F.col("type") == COMMITTED) & (F.col("commit_ts") > F.col("scan_checkpoint_ts"))
    if windows is not None:
        committed = committed & ch.in_windows(windows)
    events = read.filter((F.col("type") != COMMITTED) | committed)
    spans = {(scan.scan_id, r.region_id): (r.start_key, r.end_key) for scan in scans for r in scan.regions}
    region_counts = [(spans.get(region, (b"",))[0], count) for region, count in event_counts.items()]
    # A key range is matched and collapsed in one Python worker's memory: more ranges for big inputs.
    total = sum(event_counts.values())
    partitions = max(int(spark.conf.get("spark.sql.shuffle.partitions")), -(-total // EVENTS_PER_RANGE))
    ranges = ch.KeyRanges(
        tuple(ch.key_range_splits(region_counts, partitions)), tuple(ch.partition_tags(spark, partitions))
    )
    return ch.by_key_range(events, ranges, spans)


def _match_and_collapse(
    spark: SparkSession, scans: Sequence[ScanManifest], survey: RegionSurvey, plan: CollapsePlan
) -> tuple[DataFrame, dict[tuple[int, int, str], int]]:
    """Collapsed changes (persisted) and their counts per (table, segment, op); raises on bad input."""
    from pyspark.sql import functions as F

    events = events_by_key_range(spark, scans, survey.event_counts, plan.windows)
    collapsed = ch.match_and_collapse(events, plan).persist()
    counts = {
        (r["table_idx"], r["segment"], r["op"]): r["count"]
        for r in collapsed.groupBy("table_idx", "segment", "op").count().collect()
    }
    failed = [index for index, _, _ in counts if index in (MATCH_ERRORS, BAD_ROWS)]
    if failed:
        rows = collapsed.filter(F.col("table_idx") == min(failed)).limit(1).collect()
        collapsed.unpersist()
        if min(failed) == MATCH_ERRORS:
            raise InputError(rows[0]["message"])
        raise _bad_row_error(rows[0], plan.known_ids)
    return collapsed, counts


def _bad_row_error(row: Any, known_ids: frozenset[int]) -> InputError:
    if not row["is_record"]:
        what = "is not a record key"
    elif row["physical_id"] not in known_ids:
        what = f"belongs to table id {row['physical_id']}, which no TableInfo in the capture describes"
    elif row["op"] not in ("PUT", "DELETE") or row["commit_ts"] is None:
        what = f"has op {row['op']!r} or no commit ts"
    else:
        what = "is a PUT without row bytes"
    return InputError(
        f"capture {row['scan_id']}, region {row['region_id']}, key {bytes(row['key']).hex()}, "
        f"commit_ts {row['commit_ts']}: the change {what}"
    )


@dataclass(frozen=True)
class DecodedRows:
    """One (table, segment)'s decoded changes, persisted; `puts_only` when its DELETEs were left out."""

    rows: DataFrame
    puts_only: bool


def _decode_all(
    spark: SparkSession,
    warehouse: str,
    tables: Sequence[TrackedTable],
    collapsed: DataFrame,
    counts: dict[tuple[int, int, str], int],
    zero_dates: Any,
) -> tuple[dict[tuple[int, int], DecodedRows], dict[int, int]]:
    """Decoded rows per (table, segment), materialized so decode errors surface before any commit; and per
    table the number of tasks that decoded its rows (key-range parallelism at work).

    A table's first segment going into a table with no rows yet is appended, so its DELETEs (rows
    inserted and deleted again) are not decoded at all.
    """
    from pyspark.sql import functions as F

    from backfill.decode import TaskSet

    decoded = {}
    tasks = spark.sparkContext.accumulator(set(), TaskSet())
    for index, table in enumerate(tables):
        for seg, version in enumerate(table.versions):
            if version.schema is None or not (
                counts.get((index, seg, "PUT")) or counts.get((index, seg, "DELETE"))
            ):
                continue
            rows = collapsed.filter((F.col("table_idx") == index) & (F.col("segment") == seg))
            puts_only = seg == 0 and bool(counts.get((index, seg, "PUT")))
            puts_only = puts_only and has_no_rows(spark, table_path(warehouse, version.schema))
            if puts_only:
                rows = rows.filter(F.col("op") == "PUT")
            frame = decode_changes(rows, version.schema, zero_dates, tasks, tag=index).persist()
            decoded[(index, seg)] = DecodedRows(frame, puts_only)
    # One job per frame, submitted together: small tables decode beside the hot one instead of after it.
    with ThreadPoolExecutor(max_workers=PARALLEL_JOBS) as pool:
        for _ in pool.map(lambda d: d.rows.count(), decoded.values()):
            pass
    per_table: dict[int, set[int]] = {}
    for index, partition in tasks.value:
        per_table.setdefault(index, set()).add(partition)
    return decoded, {index: len(parts) for index, parts in per_table.items()}


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


def _per_table_in_parallel(
    spark: SparkSession, tables: Sequence[TrackedTable], apply: Callable[[SparkSession, int], TableOutcome]
) -> list[TableOutcome]:
    """`apply(session, index)` for every table, in table order within groups of tables that share a name
    (a rename or re-create hands a path from one table to another), the groups side by side on threads.

    Each group gets its own session: a MERGE takes its transaction id from the session conf, so two
    tables committing at once must not share one.
    """
    groups = sharing_groups([table.names() for table in tables])
    outcomes: dict[int, TableOutcome] = {}

    def run_group(group: list[int]) -> None:
        session = spark.newSession()
        for index in group:
            outcomes[index] = apply(session, index)

    with ThreadPoolExecutor(max_workers=PARALLEL_JOBS) as pool:
        for _ in pool.map(run_group, groups):
            pass
    return [outcomes[index] for index in range(len(tables))]


def _apply_table(
    spark: SparkSession,
    config: TidelakeConfig,
    table: TrackedTable,
    index: int,
    decoded: dict[tuple[int, int], DecodedRows],
    counts: dict[tuple[int, int, str], int],
    floor: int,
    resolved_ts: int,
    scans: list[str],
) -> TableOutcome:
    """Walk one table through its segments and DDL steps, each a tagged commit."""
    app_id, warehouse = config.job.app_id, config.target.warehouse
    versions = table.versions
    outcome = TableOutcome(table.label)
    for seg, version in enumerate(versions):
        seg_end = versions[seg + 1].finished_ts if seg + 1 < len(versions) else None
        if seg_end is not None and seg_end <= floor:
            continue  # this segment and its DDL are already in the table
        schema = version.schema
        upserts = counts.get((index, seg, "PUT"), 0)
        deletes = counts.get((index, seg, "DELETE"), 0)
        if version.finished_ts >= resolved_ts:
            break  # this segment starts after the run's resolved ts: the next run's work
        if schema is not None:
            path = table_path(warehouse, schema)
            create_table(spark, path, schema)
            merge_version = resolved_ts if seg_end is None or seg_end > resolved_ts else seg_end - 1
            metadata = _metadata(floor, merge_version, resolved_ts, scans, upserts, deletes, "merge")
            if (index, seg) in decoded:
                segment = decoded[(index, seg)]
                if merge_changes(
                    spark,
                    path,
                    schema,
                    segment.rows,
                    app_id=app_id,
                    txn_version=merge_version,
                    metadata=metadata,
                    puts_only=segment.puts_only,
                ):
                    outcome.upserted += upserts
                    outcome.deleted += deletes
            elif merge_version == resolved_ts:
                delta.advance_txn(spark, path, spark.read.format("delta").load(path).schema, app_id=app_id,
                                  txn_version=resolved_ts, metadata=metadata)  # fmt: skip
            outcome.path, outcome.resolved_ts = path, merge_version
            outcome.delta_version = delta.table_version(spark, path)
        if seg_end is not None and seg_end <= resolved_ts:
            _apply_ddl(spark, config, version, versions[seg + 1], floor, resolved_ts, scans, outcome)
    if outcome.resolved_ts is None:
        final = table.schema_at(resolved_ts)
        outcome.reason = "dropped" if final is None and table.start_ts < resolved_ts else "created later"
    return outcome


def _apply_ddl(
    spark: SparkSession,
    config: TidelakeConfig,
    before: SchemaVersion,
    after: SchemaVersion,
    floor: int,
    resolved_ts: int,
    scans: list[str],
    outcome: TableOutcome,
) -> None:
    """One DDL step, tagged with the DDL's finished ts: drop, create, truncate, rename, or migrate rows."""
    app_id, warehouse = config.job.app_id, config.target.warehouse
    ts = after.finished_ts
    metadata = _metadata(floor, ts, resolved_ts, scans, 0, 0, "ddl") | {
        "ddl_job_id": after.job_id,
        "ddl_type": after.job_type,
    }
    old, new = before.schema, after.schema
    outcome.ddl_steps += 1
    if new is None:
        if old is not None:
            fs.delete(spark, table_path(warehouse, old))
        outcome.path, outcome.resolved_ts, outcome.delta_version = None, None, None
        return
    new_path = table_path(warehouse, new)
    if old is None:
        create_table(spark, new_path, new)
        delta.advance_txn(spark, new_path, spark.read.format("delta").load(new_path).schema, app_id=app_id,
                          txn_version=ts, metadata=metadata)  # fmt: skip
    else:
        old_path = table_path(warehouse, old)
        if not delta.is_delta_table(spark, old_path):
            return  # a crashed rename already moved it: the new path carries the step
        current = spark.read.format("delta").load(old_path)
        rows = (
            current.limit(0)
            if new.table_id != old.table_id and not new.partition_names
            else migrate_rows(current, old, new)
        )
        overwrite_table(spark, new_path, rows, new, app_id=app_id, txn_version=ts, metadata=metadata)
        if new_path != old_path:
            fs.delete(spark, old_path)
    outcome.path, outcome.resolved_ts = new_path, ts
    outcome.delta_version = delta.table_version(spark, new_path)


def _metadata(
    checkpoint: int, version: int, resolved: int, scans: list[str], up: int, down: int, step: str
) -> dict[str, Any]:
    return {
        "checkpoint_ts": checkpoint,
        "resolved_ts": version,
        "run_resolved_ts": resolved,
        "rows": {"upserted": up, "deleted": down},
        "scans": scans,
        "step": step,
    }


@contextmanager
def _decode_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        error = decode_error(exc)
        if error is None:
            raise
        raise error from None
