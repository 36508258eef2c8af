"""The kv-scan source: TiKV incremental-scan captures (docs/architecture.md "The kv-scan input").

Plan: chain the complete captures from the lowest table checkpoint (`chain`), each capture's resolved ts
from its regions (a light pass over the small columns: `survey_regions`). Changes: one shuffle by key
range for matching and collapsing (`keyranges`), then decoding of the TiDB row bytes per table and schema
version (`decode`). Only plans, region states and counts reach the driver.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from backfill.changes.contract import ComputedRows, DecodeParallelism, DriverRows
from backfill.codec.keys import key_columns_need_row, table_prefix
from backfill.sources.base import (
    CheckpointBook,
    NoWindow,
    RowChanges,
    Source,
    SourceStatus,
    StageClock,
    Window,
)
from backfill.sources.decode_tasks import DecodeTasks, decode_task_count
from backfill.sources.kvscan import keyranges as kr
from backfill.sources.kvscan.capture_tables import Catalog, build_catalog
from backfill.sources.kvscan.captures import list_scans
from backfill.sources.kvscan.chain import ScanProgress, TableProgress, choose_chain, scan_progress
from backfill.sources.kvscan.eager_decode import EagerDecode, eager_segments, events_per_table
from backfill.sources.kvscan.events import read_events
from backfill.sources.kvscan.format import (
    DDL_JOBS_FILE,
    TABLES_FILE,
    ScanManifest,
    parse_ddl_jobs_jsonl,
    parse_tables_jsonl,
)
from backfill.sources.kvscan.matcher import COMMITTED
from backfill.sources.kvscan.range_collapse import BAD_ROWS, MATCH_ERRORS, CollapsePlan
from backfill.sources.kvscan.row_decode import decode_changes, decoded_spark_ddl
from backfill.sources.kvscan.small_tables import decode_on_driver, fetch_segments, small_tables
from backfill.tables import TrackedTable
from tidelake import fs
from tidelake.errors import InputError
from tidelake.sparkerrors import input_errors

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from tidelake.config import SourceConfig

EVENTS_PER_RANGE = 2_000_000  # at most, about: a key range's events are held in memory together


@dataclass(frozen=True)
class CaptureSchema:
    """A capture's schema files, parsed."""

    scan: ScanManifest
    catalog: Catalog  # tables selected by the config
    known_ids: frozenset[int]  # every physical id the capture knows, selected or not


def load_capture_schema(
    spark: SparkSession, scan: ScanManifest, patterns: Sequence[str], jobs_from: Sequence[ScanManifest] = ()
) -> CaptureSchema:
    tables_uri = scan.file(*TABLES_FILE)
    if not fs.exists(spark, tables_uri):
        raise InputError(f"{tables_uri}: missing: a capture needs the TableInfo of its tables")
    tables = parse_tables_jsonl(fs.read_text(spark, tables_uri), tables_uri)
    jobs = []
    for source in (scan, *jobs_from):
        uri = source.file(*DDL_JOBS_FILE)
        if fs.exists(spark, uri):
            jobs.extend(parse_ddl_jobs_jsonl(fs.read_text(spark, uri), uri))
    selected = build_catalog(tables, jobs, scan.checkpoint_ts, patterns, tables_uri)
    everything = build_catalog(tables, jobs, scan.checkpoint_ts, ["*.*"], tables_uri)
    known = frozenset(pid for t in everything.tables for pid in t.physical_ids())
    return CaptureSchema(scan, selected, known)


def id_owners(tables: Sequence[TrackedTable]) -> dict[int, list[tuple[int, int | None, int]]]:
    """Physical id -> its live (after, until] intervals, each with the index of the table it belongs to
    then, in ts order. An id has one table unless an EXCHANGE PARTITION handed it to another."""
    owners: dict[int, list[tuple[int, int | None, int]]] = {}
    for index, table in enumerate(tables):
        for pid in table.physical_ids():
            owners.setdefault(pid, []).extend((a, u, index) for a, u in table.live_intervals(pid))
    for spans in owners.values():
        spans.sort(key=lambda span: span[0])
    return owners


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
        state = kr.region_state(scan_id, checkpoints[scan_id], region_id, events) if events else None
        if state is not None and state["kind"] == "error":
            errors.append(state["message"])
        elif state is not None and state["initialized"]:
            resolved.setdefault(scan_id, {})[region_id] = state["resolved_ts"]
        else:
            resolved.setdefault(scan_id, {})[region_id] = None
    counts = {(row["scan_id"], row["region_id"]): row["events"] for row in rows}
    return RegionSurvey(counts, resolved, sorted(errors))


@dataclass(frozen=True, kw_only=True)
class KvScanWindow(Window):
    """A window with what the kv-scan source needs to produce its changes."""

    candidates: tuple[ScanManifest, ...] = ()
    survey: RegionSurvey
    windows: Mapping[str, tuple[int, int]]  # capture id -> the (lo, hi] commit ts taken from it
    known_ids: frozenset[int] = frozenset()


class KvScanSource(Source[KvScanWindow]):
    kind: ClassVar[str] = "kv-scan"

    def __init__(self, config: SourceConfig, patterns: Sequence[str]) -> None:
        self.path = config.path
        self.patterns = tuple(patterns)
        self.verify_checksums = config.verify_checksums

    # ------------------------------------------------------------------------------------------ plan

    def plan(
        self, spark: SparkSession, checkpoints: CheckpointBook, clock: StageClock, until_ts: int | None
    ) -> KvScanWindow | NoWindow:
        with clock.stage("plan"):
            scans = list_scans(spark, self.path)
            if not scans:
                return NoWindow(None, "no complete captures")
            start = self._run_start(spark, scans, checkpoints)
            candidates = [s for s in scans if s.current_ts > start]
            if not candidates:
                return NoWindow(start, "nothing new")

        with clock.stage("resolve"), input_errors("events"):
            survey = survey_regions(spark, candidates)
            if survey.errors:
                raise InputError(survey.errors[0])
            schemas = {s.scan_id: load_capture_schema(spark, s, self.patterns) for s in candidates}
            progress = {
                s.scan_id: scan_progress(
                    s,
                    survey.resolved.get(s.scan_id, {}),
                    {
                        t.label: {pid: t.retired_at(pid) for pid in t.physical_ids()}
                        for t in schemas[s.scan_id].catalog.tables
                    },
                )
                for s in candidates
            }
            chain = choose_chain(start, candidates, lambda s: progress[s.scan_id].resolved_ts)
            if not chain:
                # Nothing to apply, but a broken stream is still an error the user must hear about now.
                _match_and_collapse(spark, candidates, survey, CollapsePlan.nothing())[0].unpersist()
                return NoWindow(start, "nothing new", _blocked_reason(progress.values()))
            resolved_ts = chain[-1].hi if until_ts is None else min(chain[-1].hi, until_ts)
            first = chain[0].scan
            schema = load_capture_schema(spark, first, self.patterns, [link.scan for link in chain[1:]])

        tables = schema.catalog.tables
        scans_used = tuple(link.scan.scan_id for link in chain)
        return KvScanWindow(
            checkpoint_ts=start,
            resolved_ts=resolved_ts,
            tables=tables,
            floors=tuple(checkpoints.of_table(t) or t.start_ts for t in tables),
            blocked=_blocked_reason(progress[link.scan.scan_id] for link in chain[-1:]),
            inputs=scans_used,
            commit_metadata={"scans": list(scans_used)},
            candidates=tuple(candidates),
            survey=survey,
            windows={link.scan.scan_id: (link.lo, link.hi) for link in chain},
            known_ids=schema.known_ids,
        )

    def _run_start(
        self, spark: SparkSession, scans: Sequence[ScanManifest], checkpoints: CheckpointBook
    ) -> int:
        """The lowest checkpoint among the tables: the Delta tables' recorded versions, or the oldest
        capture's checkpoint while a tracked table has no Delta table yet (a first run, or a run killed
        before it created that table: its rows go back to the initial snapshot, so it starts over)."""
        oldest = min(s.checkpoint_ts for s in scans)
        recorded = [version for _, _, version in checkpoints.existing()]
        if not recorded or None in recorded:
            return oldest
        start = min(v for v in recorded if v is not None)
        covering = [s for s in scans if s.checkpoint_ts <= start]
        if not covering:
            return start  # choose_chain reports the gap
        first = max(covering, key=lambda s: s.checkpoint_ts)
        for table in load_capture_schema(spark, first, self.patterns).catalog.tables:
            if table.schema_at(start) is not None and checkpoints.of_table(table) is None:
                return oldest
        return start

    # --------------------------------------------------------------------------------------- changes

    def row_changes(self, spark: SparkSession, window: KvScanWindow, clock: StageClock) -> RowChanges:
        tables = window.tables
        with clock.stage("match+collapse"), input_errors("events"):
            owners = id_owners(tables)
            plan = CollapsePlan(
                table_of_physical={pid: spans[0][2] for pid, spans in owners.items()},
                known_ids=window.known_ids,
                live={pid: [(after, until) for after, until, _ in spans] for pid, spans in owners.items()},
                table_floor=dict(enumerate(window.floors)),
                resolved_ts=window.resolved_ts,
                segment_bounds={i: t.segment_bounds() for i, t in enumerate(tables)},
                windows=window.windows,
                old_values_of=frozenset(
                    pid
                    for t in tables
                    if any(v.schema is not None and key_columns_need_row(v.schema) for v in t.versions)
                    for pid in t.physical_ids()
                ),
                handover={pid: spans for pid, spans in owners.items() if len({s[2] for s in spans}) > 1},
            )
            tasks = DecodeTasks(spark)
            events = window.survey.event_counts
            segments = eager_segments(
                tables, events_per_table(tables, window.candidates, events), sum(events.values())
            )
            eager = EagerDecode(
                segments,
                verify_checksums=self.verify_checksums,
                zero_dates=spark.sparkContext.accumulator(0),
                tallies={index: tasks.tally(index) for index, _ in segments},
            )
            collapsed, counts = _match_and_collapse(spark, window.candidates, window.survey, plan, eager)
        return DecodedKvChanges(spark, window, collapsed, counts, eager, tasks)

    # ---------------------------------------------------------------------------------------- status

    def status(self, spark: SparkSession) -> SourceStatus:
        """The captures, and in the newest one which region and physical id hold each table back."""
        scans = list_scans(spark, self.path)
        newest = max((s.current_ts for s in scans), default=None)
        details: dict[str, Any] = {"complete_scans": len(scans)}
        if scans:
            last = max(scans, key=lambda s: (s.current_ts, s.scan_id))
            with input_errors("events"):
                details["held_back"] = [
                    _held_back(table) for table in self._progress(spark, last).tables
                    if table.resolved_ts < last.current_ts
                ]  # fmt: skip
            details["newest_scan"] = last.scan_id
        return SourceStatus(f"{len(scans)} complete captures", newest, details)

    def _progress(self, spark: SparkSession, scan: ScanManifest) -> ScanProgress:
        survey = survey_regions(spark, [scan])
        catalog = load_capture_schema(spark, scan, self.patterns).catalog
        retired = {t.label: {pid: t.retired_at(pid) for pid in t.physical_ids()} for t in catalog.tables}
        return scan_progress(scan, survey.resolved.get(scan.scan_id, {}), retired)


class DecodedKvChanges(RowChanges, ComputedRows, DriverRows, DecodeParallelism):
    """Collapsed changes still as TiDB key/value bytes, decoded per (table, segment) on the executors, a
    small table's on the driver (`small_tables`); a big table's PUTs come decoded already (`eager_decode`)."""

    def __init__(
        self,
        spark: SparkSession,
        window: Window,
        collapsed: DataFrame,
        counts: dict[tuple[int, int, str], int],
        eager: EagerDecode,
        tasks: DecodeTasks,
    ) -> None:
        self._spark = spark
        self._window = window
        self._collapsed = collapsed
        self._counts = counts
        self._eager = eager
        self._zero_dates = spark.sparkContext.accumulator(0) if eager.zero_dates is None else eager.zero_dates
        self._tasks = tasks
        self._fetched: dict[tuple[int, int], pa.Table] | None = None  # small tables' changes, on first use
        self._on_driver: dict[tuple[int, int, bool], pa.Table] = {}

    def counts(self) -> Mapping[tuple[int, int, str], int]:
        return self._counts

    def rows(self, table: int, segment: int, *, puts_only: bool) -> DataFrame:
        from pyspark.sql import functions as F

        schema = self._window.tables[table].versions[segment].schema
        assert schema is not None, "a segment without a table has no rows"
        local = self.local_rows(table, segment, puts_only=puts_only)
        if local is not None:
            return self._spark.createDataFrame(local, decoded_spark_ddl(schema))
        ops: tuple[str, ...] = ("PUT",) if puts_only else ("PUT", "DELETE")
        decoded = None
        if (table, segment) in self._eager.schemas:
            puts = self._counts.get((table, segment, "PUT"), 0)
            decoded = self._eager.rows(self._collapsed, table, segment).coalesce(decode_task_count(puts))
            ops = tuple(op for op in ops if op != "PUT")
            if not ops:
                return decoded
        rows = self._collapsed.filter((F.col("table_idx") == table) & (F.col("segment") == segment))
        if len(ops) == 1:
            rows = rows.filter(F.col("op") == ops[0])  # a first load never decodes its DELETEs
        changes = sum(self._counts.get((table, segment, op), 0) for op in ops)
        rows = rows.coalesce(decode_task_count(changes))  # never more than the key ranges
        raw = decode_changes(
            rows,
            schema,
            self._zero_dates,
            self._tasks.tally(table),
            verify_checksums=self._eager.verify_checksums,
        )
        return raw if decoded is None else decoded.unionByName(raw)

    def cached_rows(self, table: int, segment: int, *, puts_only: bool) -> bool:
        return puts_only and (table, segment) in self._eager.schemas

    def local_rows(self, table: int, segment: int, *, puts_only: bool) -> pa.Table | None:
        """A small table's segment, decoded on the driver (`small_tables`); None for the others."""
        if self._fetched is None:
            eager = {table for table, _ in self._eager.schemas}
            self._fetched = fetch_segments(
                self._collapsed, [t for t in small_tables(self._counts) if t not in eager]
            )
        if (table, segment) not in self._fetched:
            return None
        if (table, segment, puts_only) not in self._on_driver:
            schema = self._window.tables[table].versions[segment].schema
            assert schema is not None, "a segment without a table has no rows"
            decoded, zeros = decode_on_driver(
                self._fetched[(table, segment)], schema, puts_only=puts_only,
                verify_checksums=self._eager.verify_checksums,
            )  # fmt: skip
            self._zero_dates.add(zeros)
            self._on_driver[(table, segment, puts_only)] = decoded
        return self._on_driver[(table, segment, puts_only)]

    def zero_dates(self) -> int:
        return int(self._zero_dates.value)

    def tasks_per_table(self) -> Mapping[int, int]:
        return self._tasks.per_table()

    def release(self) -> None:
        self._collapsed.unpersist()
        self._fetched, self._on_driver = None, {}


def _held_back(table: TableProgress) -> dict[str, Any]:
    return {
        "table": table.label,
        "resolved_ts": table.resolved_ts,
        "region": table.lagging_region,
        "physical_id": table.lagging_id,
        "retired_at": table.lagging_id_retired_at,
        "reason": table.describe(),
    }


def _blocked_reason(progress: Any) -> str | None:
    for scan in progress:
        slow = scan.blocked_by if isinstance(scan, ScanProgress) else None
        if slow is not None:
            return f"{slow.describe()} in {scan.scan.scan_id}"
    return None


def events_by_key_range(
    spark: SparkSession,
    scans: Sequence[ScanManifest],
    event_counts: Mapping[tuple[str, int], int],
    windows: Mapping[str, tuple[int, int]] | None = None,
    old_values_of: Collection[int] | None = None,
) -> DataFrame:
    """The captures' events shuffled by key ranges cut at region boundaries and balanced by the regions'
    `event_counts` (seed 003). COMMITTED events at or below their capture's checkpoint, or outside its
    (lo, hi] window in `windows`, are left out before the shuffle: overlapping captures repeat many. Old
    values are kept only for the physical ids in `old_values_of` (None: all): only tables whose key needs
    the row use them, and they would double what the shuffle moves."""
    from pyspark.sql import functions as F

    read = read_events(spark, scans)
    if old_values_of is not None:
        prefixes = [F.lit(bytearray(table_prefix(pid))) for pid in sorted(old_values_of)]
        kept = F.substring(F.col("key"), 1, 9).isin(*prefixes) if prefixes else F.lit(False)
        read = read.withColumn("old_value", F.when(kept, F.col("old_value")))
    committed = (F.col("type") == COMMITTED) & (F.col("commit_ts") > F.col("scan_checkpoint_ts"))
    if windows is not None:
        committed = committed & kr.in_windows(windows)
    events = read.filter((F.col("type") != COMMITTED) | committed)
    spans = {(scan.scan_id, r.region_id): (r.start_key, r.end_key) for scan in scans for r in scan.regions}
    region_counts = [(spans.get(region, (b"",))[0], count) for region, count in event_counts.items()]
    # A key range is matched and collapsed in one Python worker's memory: more ranges for big inputs.
    total = sum(event_counts.values())
    partitions = max(
        int(spark.conf.get("spark.sql.shuffle.partitions") or 200), -(-total // EVENTS_PER_RANGE)
    )
    ranges = kr.KeyRanges(
        tuple(kr.key_range_splits(region_counts, partitions)), tuple(kr.partition_tags(spark, partitions))
    )
    return kr.by_key_range(events, ranges, spans)


def _match_and_collapse(
    spark: SparkSession,
    scans: Sequence[ScanManifest],
    survey: RegionSurvey,
    plan: CollapsePlan,
    eager: EagerDecode | None = None,
) -> tuple[DataFrame, dict[tuple[int, int, str], int]]:
    """Collapsed changes (persisted) and their counts per (table, segment, op); raises on bad input."""
    from pyspark.sql import functions as F

    events = events_by_key_range(spark, scans, survey.event_counts, plan.windows, plan.old_values_of)
    collapsed = kr.match_and_collapse(events, plan, eager).persist()
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
