"""The Kafka source: a TiCDC changefeed's topic (open protocol or canal-json), one batch of offsets per run.

Plan: the partitions' offsets from the brokers, the start offsets from the tables' last commits
(`progress`), the records of [start, latest) read once by Spark's Kafka batch source and decoded in
`mapInArrow` (framing, keys, DDL and resolved events; row values kept as bytes) and persisted. Small
aggregates give the driver the plan: each partition's last resolved event (its watermark; the global
resolved ts is their minimum), the DDL events, the tables seen, and per partition the first message above
the resolved ts (where the next run reads from). A row or DDL event at or below a resolved ts its
partition carried before it is a re-send after a TiCDC restart: skipped and counted (`resent_changes`).
Changes: per (table, segment) the row events inside the window are typed in `mapInArrow` by `open_rows`
(canal-json: `canal_kafka`, the storage source's decoder); the shared collapse does the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.changes.collapse import LINE
from backfill.codec import DecodeStats, TableSchema
from backfill.codec.history import DROP_SCHEMA, EXCHANGE_PARTITION
from backfill.sources.base import (
    CheckpointBook,
    NoWindow,
    RowChanges,
    Source,
    SourceStatus,
    StageClock,
    Window,
)
from backfill.sources.decode_tasks import DecodeTally, DecodeTasks, decode_task_count
from backfill.sources.kafka import broker, progress
from backfill.sources.kafka.progress import RunRecord, TableRecord
from backfill.sources.kafka.text_schema import (
    DdlEvent,
    KnownTable,
    created_tables,
    rename_targets,
    schemas_at,
    text_histories,
)
from backfill.sources.ticdc.canal_kafka import canal_table_info, decode_canal_records, typed_canal_rows
from backfill.sources.ticdc.open_protocol import DDL, EVENT_SCHEMA, RESOLVED, ROW, decode_records, event_line
from backfill.sources.ticdc.open_rows import COMMIT_TS, INDEX, OFFSET, OP, rows_to_arrow
from backfill.sources.ticdc.open_schema import fake_table_id, schema_from_columns
from backfill.sources.ticdc.open_supersede import LatestPerKey
from backfill.sources.upstream_schema import upstream_table_infos
from backfill.tables import RowIdentity, TrackedTable, identity_without_handle, table_matches
from tidelake import conventions, delta, fs, output
from tidelake.errors import InputError
from tidelake.sparkerrors import in_task, input_errors
from tidelake.sqlident import quote_ident
from tidelake.tso import ts_to_datetime

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from backfill.sources.kafka.settings import KafkaSourceConfig
    from tidelake.config import SourceConfig, UpstreamConfig

TYPED_BATCH_ROWS = 10_000  # events typed at once: what a task holds twice over is its read events
_EVENTS_DDL = (
    "topic STRING, partition INT, offset BIGINT, index INT, type TINYINT, ts BIGINT, schema STRING, "
    "table STRING, row_id BIGINT, physical_id BIGINT, handle_only BOOLEAN, claim_check STRING, "
    "value BINARY, ddl_query STRING, ddl_type INT, floor_ts BIGINT, split BIGINT"
)
_SPARK_EVENTS = pa.schema(
    [
        *(f if f.name != "ts" else pa.field("ts", pa.int64()) for f in EVENT_SCHEMA),
        pa.field("floor_ts", pa.int64()),
        pa.field("split", pa.int64()),
    ]
)


def decode_events(records: DataFrame, compression: str, protocol: str = "open-protocol") -> DataFrame:
    """Kafka records -> events (one row per event; framing and JSON errors name topic, partition,
    offset).

    A task reads one offset range of one topic partition, in order (Spark's Kafka source). Each event gets
    `split`, the range's first offset, and `floor_ts`, the highest resolved ts among the range's events
    before it (0: none): what telling a re-sent change from a new one needs, without ordering the events
    again (`resent_changes`)."""
    decoder = decode_canal_records if protocol == "canal-json" else decode_records

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        floor, split = 0, None
        for batch in batches:
            if split is None and batch.num_rows:
                split = batch.column("offset")[0].as_py()
            try:
                events = decoder(batch, compression=compression)
            except InputError as exc:
                raise in_task(str(exc)) from None
            ts = pc.cast(events.column("ts"), pa.int64())
            kinds = events.column("type").to_numpy(zero_copy_only=False)
            resolved = np.where(kinds == RESOLVED, pc.fill_null(ts, 0).to_numpy(zero_copy_only=False), 0)
            seen = np.maximum.accumulate(np.concatenate([[floor], resolved]))
            floor = int(seen[-1])
            events = events.set_column(events.schema.get_field_index("ts"), "ts", ts)
            events = events.append_column("floor_ts", pa.array(seen[:-1], pa.int64()))
            events = events.append_column("split", pa.array(np.full(events.num_rows, split or 0), pa.int64()))
            yield from events.cast(_SPARK_EVENTS).to_batches()

    return records.mapInArrow(decode, _EVENTS_DDL)


@dataclass(frozen=True, kw_only=True)
class KafkaWindow(Window):
    """A window with the decoded events it is cut from."""

    events: Any  # DataFrame: the decoded events but the re-sent changes (None: nothing was read)
    cached: Any  # DataFrame: the persisted decoded events `events` filters
    time_zone: str = "UTC"
    protocol: str = "open-protocol"
    row_events: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (db, table) -> row events read
    without_rowid: frozenset[int] = frozenset()  # tables whose rows have no `_tidb_rowid` (a snapshot's)


@dataclass(frozen=True)
class _Plan:
    """The driver's view of the read range: small aggregates only."""

    seen_watermarks: dict[broker.TopicPartition, int]
    split_watermarks: dict[tuple[str, int, int], int]  # (topic, partition, split) -> its last resolved ts
    ddls: list[dict[str, Any]]
    samples: dict[tuple[str, str], dict[str, Any]]  # (db, table) -> a row event (value, row_id)
    row_events: dict[tuple[str, str], int]  # (db, table) -> row events read, over all partitions
    # per partition: re-sent changes read (skipped), and those of them no earlier run read
    resent: dict[broker.TopicPartition, tuple[int, int]] = field(default_factory=dict)
    # per partition: the offset and ts of its first resolved event read, and its lowest change ts read
    first_resolved: dict[broker.TopicPartition, tuple[int, int]] = field(default_factory=dict)
    first_change: dict[broker.TopicPartition, int] = field(default_factory=dict)


class KafkaSource(Source[KafkaWindow]):
    kind: ClassVar[str] = "ticdc-kafka"

    def __init__(
        self,
        config: SourceConfig,
        settings: KafkaSourceConfig,
        patterns: Sequence[str],
        upstream: UpstreamConfig | None = None,
    ) -> None:
        self.config = settings
        self.patterns = tuple(patterns)
        self.upstream = upstream  # the schema of tables that predate the changefeed, when given

    # ------------------------------------------------------------------------------------------ plan

    def plan(
        self, spark: SparkSession, checkpoints: CheckpointBook, clock: StageClock, until_ts: int | None
    ) -> KafkaWindow | NoWindow:
        kafka = f"Kafka at {self.config.bootstrap_servers}"
        topic = repr(self.config.topic) if self.config.topic is not None else f"/{self.config.topic_pattern}/"
        with clock.stage("plan"):
            with output.activity(f"plan: asking {kafka} for the offsets of topic {topic}"):
                partitions = broker.list_offsets(spark, self.config)
            existing = self._table_records(spark, checkpoints)
            start = progress.run_start(existing, partitions)
            progress.check_offsets(start.offsets, partitions)
            ends = {tp: p.latest for tp, p in partitions.items()}
            ranges = {tp: (start.offsets[tp], ends[tp]) for tp in partitions}
        with clock.stage("read"), broker.read_failures(self.config), input_errors("Kafka messages"):
            events = None
            if any(end > begin for begin, end in ranges.values()):
                messages = sum(end - begin for begin, end in ranges.values())
                with output.activity(f"read: reading {messages} messages of topic {topic} from {kafka}"):
                    records = broker.read_records(spark, self.config, ranges)
                    events = decode_events(records, self.config.compression, self.config.protocol).persist()
        try:
            return self._window(checkpoints, clock, until_ts, start, ranges, existing, events)
        except BaseException:
            if events is not None:
                events.unpersist()
            raise

    def _window(
        self,
        checkpoints: CheckpointBook,
        clock: StageClock,
        until_ts: int | None,
        start: progress.Start,
        ranges: Mapping[broker.TopicPartition, tuple[int, int]],
        existing: Sequence[TableRecord],
        events: DataFrame | None,
    ) -> KafkaWindow | NoWindow:
        """The window the read events allow: watermarks, resolved ts, tables, next offsets."""
        spark = checkpoints.spark
        partitions = list(ranges)
        ends = {tp: end for tp, (_, end) in ranges.items()}
        with clock.stage("read"), broker.read_failures(self.config), input_errors("Kafka messages"):
            plan = _survey(events, start.sent)
        _check_continuity_from_snapshot(existing, plan)
        kept = None if events is None else events.filter(~resent_changes(start.sent, plan.split_watermarks))
        skipped = tuple((t, p, plan.resent[(t, p)][0]) for t, p in sorted(plan.resent))
        watermarks, done = progress.completeness(partitions, start.watermarks, plan.seen_watermarks)
        resolved_ts = done.resolved_ts if until_ts is None else min(done.resolved_ts, until_ts)
        blocked = None
        if done.holding is not None and (until_ts is None or done.resolved_ts < until_ts):
            topic, partition = done.holding
            blocked = f"topic {topic!r} partition {partition} (watermark {done.resolved_ts})"
        with clock.stage("resolve"):
            first_above = _first_offsets_above(kept, resolved_ts)
            tables, identities, schemas, no_rowid = self._tables(
                spark, plan, existing, start.checkpoint_ts, resolved_ts
            )
        floors = tuple(
            v if (v := checkpoints.of_table(t)) is not None else start.checkpoint_ts for t in tables
        )
        if not tables or resolved_ts <= min(floors):
            if events is not None:
                events.unpersist()
            note = "nothing new" if resolved_ts else "no resolved event in some partition yet"
            return NoWindow(min(floors, default=start.checkpoint_ts) or None, note, blocked, skipped)
        record = RunRecord(
            from_offsets=start.offsets,
            next_offsets=progress.next_offsets(ends, first_above),
            watermarks=watermarks,
            tables=tuple(
                f"{schema.schema_name}.{schema.name}"
                for t in tables
                if (schema := t.schema_at(resolved_ts)) is not None
            ),
            run_checkpoint_ts=min(floors),
            run_resolved_ts=resolved_ts,
            schemas=schemas,
            read_ends=ends,
            resent_skipped={
                tp: start.skipped.get(tp, 0) + plan.resent.get(tp, (0, 0))[1]
                for tp in partitions
                if start.skipped.get(tp, 0) + plan.resent.get(tp, (0, 0))[1]
            },
            without_rowid=tuple(f"{db}.{name}" for i in sorted(no_rowid) for db, name in tables[i].names()),
        )
        inputs = tuple(f"{t}[{p}] {b}..{e}" for (t, p), (b, e) in sorted(ranges.items()))
        return KafkaWindow(
            checkpoint_ts=min(floors),
            resolved_ts=resolved_ts,
            tables=tuple(tables),
            floors=floors,
            blocked=blocked,
            inputs=inputs,
            commit_metadata=record.to_metadata(),
            identities=identities,
            resent_skipped=skipped,
            events=kept,
            cached=events,
            time_zone=self.config.time_zone,
            protocol=self.config.protocol,
            row_events=plan.row_events,
            without_rowid=no_rowid,
        )

    def _table_records(self, spark: SparkSession, checkpoints: CheckpointBook) -> list[TableRecord]:
        found = []
        for db, name, version in checkpoints.existing():
            commit = delta.last_commit(spark, checkpoints.path(db, name), checkpoints.app_id)
            metadata = commit.user_metadata if commit else None
            record = RunRecord.from_metadata(metadata)
            snapshot = conventions.snapshot_of(metadata) if record is None else None
            info = snapshot[1] if snapshot is not None else None
            found.append(TableRecord(f"{db}.{name}", version, record, info))
        return found

    def _tables(
        self,
        spark: SparkSession,
        plan: _Plan,
        existing: Sequence[TableRecord],
        start_ts: int,
        resolved_ts: int,
    ) -> tuple[list[TrackedTable], dict[int, RowIdentity], dict[str, Any], frozenset[int]]:
        """The tracked tables: from the schema folder when one is configured, else from the DDL text of the
        topic over what is known of each table before it (`_tables_from_text`). Also: how each table
        without a clustered key is merged, and which of them hold rows without `_tidb_rowid` (a
        snapshot's: never merged by the row ids the messages carry, in this run or a later one)."""
        if self.config.schema is not None:
            tables = self._tables_from_schema_folder(spark)
            _check_folder_covers_topic(tables, plan, self.patterns, start_ts, resolved_ts, self.config.schema)
            _refuse_exchange_partition(tables, start_ts, resolved_ts)
            schemas: dict[str, Any] = {}
        else:
            tables, schemas = self._tables_from_text(plan, existing, resolved_ts)
        no_rowid = {t.label for t in existing if t.record is None and t.snapshot_info is not None}
        no_rowid |= {t.label for t in existing if t.record is not None and t.label in t.record.without_rowid}
        identities = {}
        without_rowid = set()
        for i, table in enumerate(tables):
            labels = [f"{db}.{name}" for db, name in table.names()]
            # a row event under any of its names (a run may read none of a table renamed later in it)
            sample = next((plan.samples[n] for n in reversed(table.names()) if n in plan.samples), None)
            schema = table.versions[-1].schema or table.versions[0].schema
            if schema is None or schema.pk_kind != "rowid":
                continue
            if any(label in no_rowid for label in labels):
                without_rowid.add(i)
                identities[i] = identity_without_handle(schema)
            elif sample is None or sample["row_id"] is None:
                identities[i] = identity_without_handle(schema)
        return tables, identities, schemas, frozenset(without_rowid)

    def _tables_from_text(
        self, plan: _Plan, existing: Sequence[TableRecord], resolved_ts: int
    ) -> tuple[list[TrackedTable], dict[str, Any]]:
        """Without a schema folder: each table from the TableInfo its last commit recorded (a Kafka run's, or
        the snapshot's that `[source.initial]` loaded it from: exact, at the snapshot's TSO), a CREATE TABLE
        in the topic, the upstream's SHOW CREATE TABLE (when `[upstream]` is given) or one inferred from its
        first row event; later DDL events applied from their text
        (`text_schema`). Returns the tables and, per table, the TableInfo in force at `resolved_ts`."""
        ddls = [
            DdlEvent(
                int(d["ts"]),
                d["schema"] or "",
                d["table"] or "",
                d["ddl_query"] or "",
                f"{self.config.protocol}: topic {d['topic']!r} partition {d['partition']} offset {d['offset']}",
                drops_database=drops_database(d),
            )
            for d in plan.ddls
        ]
        known: dict[tuple[str, str], KnownTable] = {}
        for t in existing:
            db, name = t.label.split(".", 1)
            if t.record is not None and t.label in t.record.schemas:
                known[(db, name)] = KnownTable(db, name, t.record.schemas[t.label], t.record.run_resolved_ts)
            elif t.record is None and t.snapshot_info is not None and t.version is not None:
                # its snapshot's (no Kafka run yet): exact, valid from the snapshot's TSO
                known[(db, name)] = KnownTable(db, name, t.snapshot_info, t.version)
        created = created_tables(ddls)  # also those above the resolved ts: their rows wait for the CREATE
        window = [d for d in ddls if d.ts <= resolved_ts]
        renamed = rename_targets(window)
        while True:  # a table renamed in the window has rows under its new name too: not a table of its own
            tables = text_histories(list(known.values()), window, resolved_ts, self.patterns)
            names = {(db.lower(), name.lower()) for t in tables for db, name in t.names()} | created
            missing = [  # rows only above the resolved ts wait for a later run, and so does their schema
                (db, name, sample)
                for (db, name), sample in plan.samples.items()
                if table_matches(self.patterns, db, name)
                and (db.lower(), name.lower()) not in names
                and int(sample["ts"]) <= resolved_ts
            ]
            if not missing:
                break
            # a rename target waits: the table renamed to it may be missing too, and then covers it
            first = [m for m in missing if (m[0].lower(), m[1].lower()) not in renamed]
            missing = first or [min(missing, key=lambda m: int(m[2]["ts"]))]
            since = {(db, name): int(sample["ts"]) - 1 for db, name, sample in missing}
            if self.upstream is not None:  # exact: SHOW CREATE TABLE (on TiDB as of `since`)
                infos = upstream_table_infos(self.upstream, since)
            else:
                infos = {(db, n): _infer_table_info(db, n, s, self.config.protocol) for db, n, s in missing}
            for (db, name), info in infos.items():
                known[(db, name)] = KnownTable(db, name, info, since[(db, name)])
        return tables, schemas_at(tables, resolved_ts)

    def _tables_from_schema_folder(self, spark: SparkSession) -> list[TrackedTable]:
        from backfill.sources.kvscan.capture_tables import build_catalog
        from backfill.sources.kvscan.format import parse_ddl_jobs_jsonl, parse_tables_jsonl

        assert self.config.schema is not None
        folder = fs.qualify(spark, self.config.schema)
        tables_uri, jobs_uri = fs.join(folder, "tables.jsonl"), fs.join(folder, "ddl_jobs.jsonl")
        if not fs.exists(spark, tables_uri):
            raise InputError(f"{tables_uri}: missing: [source.kafka] schema needs the tables' TableInfo")
        tables = parse_tables_jsonl(fs.read_text(spark, tables_uri), tables_uri)
        jobs = (
            parse_ddl_jobs_jsonl(fs.read_text(spark, jobs_uri), jobs_uri)
            if fs.exists(spark, jobs_uri)
            else []
        )
        return list(build_catalog(tables, jobs, 0, self.patterns, tables_uri).tables)

    # --------------------------------------------------------------------------------------- changes

    def row_changes(self, spark: SparkSession, window: Window, clock: StageClock) -> RowChanges:
        from backfill.changes.typed import TypedRowChanges

        assert isinstance(window, KafkaWindow)
        zero_dates = spark.sparkContext.accumulator(0)
        tasks = DecodeTasks(spark)
        raw: dict[tuple[int, int], DataFrame] = {}
        if window.events is not None:
            for index, table in enumerate(window.tables):
                bounds = table.segment_bounds()
                for seg, version in enumerate(table.versions):
                    if version.schema is None:
                        continue
                    low = max(window.floors[index], bounds[seg - 1] if seg else 0)
                    high = min(window.resolved_ts, bounds[seg] if seg < len(bounds) else window.resolved_ts)
                    if high <= low:
                        continue
                    read = window.row_events.get((version.schema.schema_name or "", version.schema.name), 0)
                    rows = typed_rows(
                        window.events,
                        version.schema,
                        low,
                        high,
                        window.time_zone,
                        zero_dates,
                        window.protocol,
                        tally=tasks.tally(index),
                        tasks=decode_task_count(read),
                        keys=window.identity(index).columns(version.schema),
                        whole_rows=index in window.without_rowid,
                    )
                    if window.identity(index) is RowIdentity.WHOLE_ROW:
                        # No key: a re-sent change is told from the original by content, ts and op alone.
                        rows = rows.dropDuplicates([c for c in rows.columns if c != LINE])
                    raw[(index, seg)] = rows
        with clock.stage("collapse"), input_errors("Kafka messages"):
            changes = TypedRowChanges(
                window.segment_keys(raw),
                raw,
                zero_dates=lambda: int(zero_dates.value),
                decode_tasks=tasks.per_table,
            )
        if window.cached is not None:
            window.cached.unpersist()
        return changes

    # ---------------------------------------------------------------------------------------- status

    def status(self, spark: SparkSession) -> SourceStatus:
        partitions = broker.list_offsets(spark, self.config)
        where = self.config.topic if self.config.topic is not None else f"/{self.config.topic_pattern}/"
        return SourceStatus(
            f"Kafka {self.config.bootstrap_servers} topic {where}: {len(partitions)} partitions",
            None,
            {"partitions": len(partitions)},
        )

    def progress(self, spark: SparkSession, checkpoints: CheckpointBook) -> Mapping[str, Any]:
        """Per partition: the offsets the brokers keep, where the next run reads from, the messages
        waiting, the watermark the job recorded; and the partition whose watermark holds the job back."""
        partitions = broker.list_offsets(spark, self.config)
        start = progress.run_start(self._table_records(spark, checkpoints), partitions)
        _, done = progress.completeness(partitions, start.watermarks, {})
        rows = []
        for (topic, partition), kept in sorted(partitions.items()):
            mark = start.watermarks.get((topic, partition))
            sent = start.sent.get((topic, partition))
            rows.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "earliest_offset": kept.earliest,
                    "latest_offset": kept.latest,
                    "next_offset": start.offsets[(topic, partition)],
                    "waiting_messages": max(0, kept.latest - start.offsets[(topic, partition)]),
                    "watermark": mark,
                    "watermark_time": ts_to_datetime(mark).isoformat(timespec="milliseconds")
                    if mark
                    else None,
                    # re-sent changes (after a TiCDC restart) the job skipped in what it read so far
                    "resent_skipped": start.skipped.get((topic, partition), 0) if sent else None,
                }
            )
        held = None
        if done.holding is not None:
            topic, partition = done.holding
            held = f"topic {topic!r} partition {partition} (watermark {done.resolved_ts})"
        return {"partitions": rows, "resolved_ts": done.resolved_ts or None, "held_back_by": held}


def typed_rows(
    events: DataFrame,
    schema: TableSchema,
    low: int,
    high: int,
    time_zone: str,
    zero_dates: Any,
    protocol: str = "open-protocol",
    tally: DecodeTally | None = None,
    tasks: int | None = None,
    keys: Sequence[str] = (),
    whole_rows: bool = False,
) -> DataFrame:
    """The row events of `schema`'s table committed in (low, high], typed (`open_rows`, or `canal_kafka`
    for canal-json), with `_tidb_line` (position in the partition) for the collapse.

    `tasks`: the rows are typed by that many Python tasks (`sources.decode_tasks`), not one per topic
    partition; `tally` records the tasks that ran. `keys`: the table's merge key; an open-protocol task
    types only the events no other event of its own supersedes (`open_supersede`). `whole_rows`: the
    table's stored rows have no row id (`open_rows.rows_to_arrow`)."""
    from pyspark.sql import functions as F

    from backfill.sources.kvscan.row_decode import spark_ddl

    mine = events.filter(
        (F.col("type") == ROW)
        & (F.col("schema") == (schema.schema_name or ""))
        & (F.col("table") == schema.name)
        & (F.col("ts") > low)
        & (F.col("ts") <= high)
    )

    if tasks is not None:
        mine = mine.coalesce(tasks)

    def noted(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        if tally is not None:
            tally.note()
        return batches

    def decode_canal(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        names = [*schema.output_names, COMMIT_TS, OP, LINE]
        for batch in noted(batches):
            stats = DecodeStats()
            try:
                typed = typed_canal_rows(
                    pa.Table.from_batches([batch]), schema, time_zone=time_zone, stats=stats
                )
            except InputError as exc:
                raise in_task(str(exc)) from None
            if stats.zero_dates:
                zero_dates.add(stats.zero_dates)
            yield from typed.select(names).replace_schema_metadata(None).to_batches()

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = list(noted(batches))
        if not task:
            return
        stats = DecodeStats()
        try:
            for typed in typed_open_task(
                pa.Table.from_batches(task), schema, time_zone, keys, stats, whole_rows=whole_rows
            ):
                yield from typed.to_batches()
        except InputError as exc:
            raise in_task(str(exc)) from None
        if stats.zero_dates:
            zero_dates.add(stats.zero_dates)

    if protocol == "canal-json":
        mine = mine.select("value", "topic", "partition", "offset")
    return mine.mapInArrow(
        decode_canal if protocol == "canal-json" else decode,
        f"{spark_ddl(schema, nullable=True)}, {quote_ident(LINE)} BIGINT",
    )


def typed_open_task(
    events: pa.Table,
    schema: TableSchema,
    time_zone: str,
    keys: Sequence[str],
    stats: DecodeStats,
    whole_rows: bool = False,
) -> Iterator[pa.Table]:
    """One task's open-protocol row events of one table, typed as `typed_rows` gives them (`rows_to_arrow`
    per `TYPED_BATCH_ROWS`, with `_tidb_line`), the events another of the task's supersedes dropped first
    (`open_supersede`, by `keys`); zero dates are counted in `stats`. `whole_rows`: the table's stored rows
    have no row id (a snapshot's), so an update's old row counts too and nothing is superseded first.
    Pure: bench/kafka_typing.py times it."""
    kept = LatestPerKey(keys).kept(events) if keys and not whole_rows else None
    names = [*schema.output_names, COMMIT_TS, OP]
    for batch in _kept_batches(events, kept):
        table = pa.Table.from_batches([batch])
        table = table.set_column(
            table.schema.get_field_index("ts"), "ts", table.column("ts").cast(pa.uint64())
        )
        typed = rows_to_arrow(
            table, schema, time_zone=time_zone, incomplete="fail", stats=stats, whole_rows=whole_rows
        )
        line = event_line(typed.column(OFFSET), typed.column(INDEX))
        yield typed.select(names).append_column(LINE, line).replace_schema_metadata(None)


def _kept_batches(events: pa.Table, kept: np.ndarray | None) -> Iterator[pa.RecordBatch]:
    """`events` in batches of at most `TYPED_BATCH_ROWS`, the ones not `kept` left out a slice at a time
    (not one copy of every kept event)."""
    step = TYPED_BATCH_ROWS * 8
    for at in range(0, events.num_rows, step):
        part = events.slice(at, step)
        if kept is not None:
            part = part.filter(pa.array(kept[at : at + step]))
        yield from part.to_batches(max_chunksize=TYPED_BATCH_ROWS)


def _survey(events: DataFrame | None, sent: Mapping[broker.TopicPartition, tuple[int, int]]) -> _Plan:
    """Two Spark jobs over the decoded events for the driver: per partition (and offset range read by one
    task) its highest resolved ts; then, re-sent changes (`resent_changes`) apart and only counted, the
    DDL events and a row event per table."""
    if events is None:
        return _Plan({}, {}, [], {}, {})
    from pyspark.sql import functions as F

    kind = F.col("type")
    marks = (
        events.filter(kind == RESOLVED)
        .groupBy("topic", "partition", "split")
        .agg(
            F.max("ts").alias("ts"),
            F.min("offset").alias("first"),
            F.min_by("ts", "offset").alias("first_ts"),
        )
        .collect()
    )
    splits = {(r["topic"], r["partition"], int(r["split"])): int(r["ts"]) for r in marks}
    seen: dict[broker.TopicPartition, int] = {}
    first_resolved: dict[broker.TopicPartition, tuple[int, int]] = {}
    for r in marks:
        tp = (r["topic"], r["partition"])
        seen[tp] = max(seen.get(tp, 0), int(r["ts"]))
        head = (int(r["first"]), int(r["first_ts"]))  # the range's first resolved event: (offset, ts)
        first_resolved[tp] = min(first_resolved.get(tp, head), head)
    ddl = F.struct("topic", "partition", "offset", "ts", "schema", "table", "ddl_query", "ddl_type")
    # a re-sent change beyond every earlier run's read is counted for the job's total (`Start.skipped`)
    first_read = F.col("offset") >= _by_partition(
        {tp: end for tp, (end, _) in sent.items()}, (F.col("topic"), F.col("partition"), F.lit(0))
    )
    groups = (
        events.filter(kind != RESOLVED)
        .withColumn("_resent", resent_changes(sent, splits))
        .withColumn("_first_read", first_read)
        .groupBy("type", "topic", "partition", "schema", "table", "_resent", "_first_read")
        .agg(
            F.max("ts").alias("ts"),
            F.min("ts").alias("first_ts"),
            F.min_by(F.when(kind == ROW, F.struct("value", "row_id", "offset")), "ts").alias("sample"),
            F.collect_list(F.when(kind == DDL, ddl)).alias("ddls"),
            F.count(F.lit(1)).alias("events"),
        )
        .collect()
    )
    ddls: list[dict[str, Any]] = []
    samples: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    row_events: dict[tuple[str, str], int] = {}
    resent: dict[broker.TopicPartition, tuple[int, int]] = {}
    first_change: dict[broker.TopicPartition, int] = {}
    for r in groups:
        tp = (r["topic"], r["partition"])
        first_change[tp] = min(first_change.get(tp, int(r["first_ts"])), int(r["first_ts"]))
        if r["_resent"]:
            tp = (r["topic"], r["partition"])
            read, first = resent.get(tp, (0, 0))
            resent[tp] = (read + int(r["events"]), first + (int(r["events"]) if r["_first_read"] else 0))
        elif r["type"] == DDL:
            ddls += [d.asDict() for d in r["ddls"]]
        elif r["type"] == ROW and r["sample"] is not None:
            key, ts = (r["schema"], r["table"]), int(r["first_ts"])
            row_events[key] = row_events.get(key, 0) + int(r["events"])
            if key not in samples or ts < samples[key][0]:  # the table's first row event over partitions
                sample = {
                    "value": bytes(r["sample"]["value"]),
                    "row_id": r["sample"]["row_id"],
                    "ts": ts,
                    "where": f"topic {r['topic']!r} partition {r['partition']} offset {r['sample']['offset']}",
                }
                samples[key] = (ts, sample)
    ddls.sort(key=lambda d: (d["ts"], d["topic"], d["partition"], d["offset"]))
    once: dict[tuple[Any, ...], dict[str, Any]] = {}
    for d in ddls:  # broadcast to every partition, or sent again before a resolved event: one DDL
        once.setdefault((d["ts"], d["schema"], d["table"], d["ddl_query"]), d)
    return _Plan(
        seen, splits, list(once.values()), {k: v for k, (_, v) in samples.items()}, row_events, resent,
        first_resolved, first_change,
    )  # fmt: skip


def _check_continuity_from_snapshot(existing: Sequence[TableRecord], plan: _Plan) -> None:
    """No silent gap between a snapshot and the changefeed: on the job's first read of the topic, tables
    with a checkpoint but no Kafka run (`[source.initial]` gave their first version at the snapshot's TSO)
    need every partition to show the changefeed started at or below that TSO. TiCDC records its start-ts
    in no message; what proves it: the partition's first resolved event (TiCDC broadcasts the changefeed's
    checkpoint, the start-ts first) or a change at or below the TSO (a change is above the start-ts).
    Partitions not read yet (no resolved event) wait with the window."""
    if any(t.record is not None for t in existing):
        return  # a run read the topic already, and checked it then
    started = sorted((t.version, t.label) for t in existing if t.version is not None)
    if not started:
        return
    tso = started[0][0]
    for (topic, partition), (offset, first_ts) in sorted(plan.first_resolved.items()):
        if min(first_ts, plan.first_change.get((topic, partition), first_ts)) <= tso:
            continue
        raise InputError(
            f"Kafka topic {topic!r} partition {partition}: its first resolved event (offset {offset}) is at "
            f"ts {first_ts}, above the snapshot's TSO {tso} that {', '.join(label for _, label in started)} "
            "start from, and no change read is at or below it: the changefeed started above the TSO (or the "
            "partition's first messages were deleted), so the changes between are in no message. Create the "
            f"changefeed with --start-ts at or below {tso} (a Dumpling export's TSO) into a new topic"
        )


def _by_partition(values: Mapping[broker.TopicPartition, int], at: tuple[Any, Any, Any]) -> Any:
    """A column: the value of the event's partition (`at`: topic, partition, default column)."""
    from pyspark.sql import functions as F

    out = at[2].cast("bigint")
    for (topic, partition), value in sorted(values.items()):
        out = F.when((at[0] == topic) & (at[1] == partition), F.lit(value)).otherwise(out)
    return out


def resent_changes(
    sent: Mapping[broker.TopicPartition, tuple[int, int]],
    split_watermarks: Mapping[tuple[str, int, int], int],
) -> Any:
    """A column, true for a row or DDL event at or below a resolved ts its partition carried before it.

    TiCDC sends such a change again after a restart: a restarted owner or processor resumes from the
    checkpoint it persisted, which can be older than the last resolved event it had sent, so the change
    was sent before that resolved event, in the same partition (tiflow's kafka-consumer: "fallback row,
    ignore it"). The resolved events before an event: those of its own offset range (`floor_ts`), those of
    earlier ranges of its partition (`split_watermarks`), and the watermark an earlier run's read ended
    at (`Start.sent`). Columnar: no event goes to the driver."""
    from pyspark.sql import functions as F

    at = (F.col("topic"), F.col("partition"))
    # after each range with a resolved event: the highest resolved ts of its partition up to that range
    earlier = F.lit(0).cast("bigint")
    marks: dict[broker.TopicPartition, int] = {}
    for topic, partition, split in sorted(split_watermarks):
        mark = max(marks.get((topic, partition), 0), split_watermarks[(topic, partition, split)])
        marks[(topic, partition)] = mark
        here = (at[0] == topic) & (at[1] == partition) & (F.col("split") > split)
        earlier = F.when(here, F.lit(mark)).otherwise(earlier)
    recorded = F.lit(0).cast("bigint")
    for (topic, partition), (end, mark) in sorted(sent.items()):
        here = (at[0] == topic) & (at[1] == partition) & (F.col("offset") >= end)
        recorded = F.when(here, F.lit(mark)).otherwise(recorded)
    floor = F.greatest(F.col("floor_ts"), earlier, recorded)
    return (F.col("type") != RESOLVED) & (F.col("ts") <= floor) & (floor > 0)


def _first_offsets_above(events: DataFrame | None, resolved_ts: int) -> dict[broker.TopicPartition, int]:
    """Per partition the first message holding a row or DDL event above `resolved_ts`."""
    if events is None:
        return {}
    from pyspark.sql import functions as F

    above = events.filter((F.col("type") != RESOLVED) & (F.col("ts") > resolved_ts))
    rows = above.groupBy("topic", "partition").agg(F.min("offset").alias("offset")).collect()
    return {(r["topic"], r["partition"]): int(r["offset"]) for r in rows}


def _infer_table_info(db: str, name: str, sample: Mapping[str, Any], protocol: str) -> dict[str, Any]:
    """A best-effort TableInfo from one row event (`open_schema`, `canal_kafka`)."""
    doc = msgspec.json.decode(sample["value"])
    if protocol == "canal-json":
        return canal_table_info(db, name, doc, fake_table_id(db, name))
    columns = doc.get("u") or doc.get("d") or {}
    return schema_from_columns(db, name, columns, row_id=sample["row_id"], table_id=fake_table_id(db, name))


__all__ = ["KafkaSource", "decode_events", "typed_rows"]


def _refuse_exchange_partition(tables: Sequence[TrackedTable], start_ts: int, resolved_ts: int) -> None:
    """EXCHANGE PARTITION is applied for kv-scan captures only so far: stop before any commit."""
    for table in tables:
        for version in table.versions[1:]:
            if version.job_type == EXCHANGE_PARTITION and start_ts < version.finished_ts <= resolved_ts:
                raise InputError(
                    f"table {table.label}: DDL job {version.job_id} (EXCHANGE PARTITION, finished at ts "
                    f"{version.finished_ts}: {version.query or 'no query text'}) swaps rows between a "
                    "partition and another table; the Kafka source does not apply it yet (the kv-scan source "
                    "does): apply it to both Delta tables by hand and restart from a checkpoint after it"
                )


_DROP_DATABASE = re.compile(r"\s*(?:/\*.*?\*/\s*)*DROP\s+(?:DATABASE|SCHEMA)\b", re.IGNORECASE | re.DOTALL)


def drops_database(ddl: Mapping[str, Any]) -> bool:
    """A database-level DDL event (no table) that drops its database: DROP DATABASE / SCHEMA (open protocol
    gives its ActionType, canal-json only the query)."""
    return not ddl["table"] and (
        ddl.get("ddl_type") == DROP_SCHEMA or _DROP_DATABASE.match(ddl["ddl_query"] or "") is not None
    )


def _dropped_tables(tables: Sequence[TrackedTable], ddl: Mapping[str, Any]) -> list[str]:
    """The tables a DROP DATABASE event leaves in place at its ts (none if it is no DROP DATABASE)."""
    if not drops_database(ddl):
        return []
    db = str(ddl["schema"]).lower()
    return [
        f"{schema.schema_name}.{schema.name}"
        for t in tables
        if (schema := t.schema_at(ddl["ts"])) is not None and (schema.schema_name or "").lower() == db
    ]


def _check_folder_covers_topic(
    tables: Sequence[TrackedTable],
    plan: _Plan,
    patterns: Sequence[str],
    start_ts: int,
    resolved_ts: int,
    folder: str,
) -> None:
    """The schema folder must know every DDL and every table of the window that the job tracks: a DDL
    event it lacks would be passed over (rows after a RENAME or TRUNCATE applied to the wrong table or
    schema), a table it lacks would lose its rows. TiCDC gives a DDL event the job's finished ts."""
    names = {f"{db}.{name}" for t in tables for db, name in t.names()}
    barriers = {v.finished_ts for t in tables for v in t.versions}
    for ddl in plan.ddls:
        if not ddl["table"]:  # a database's DDL: CREATE / ALTER DATABASE leave every table as it is
            left = _dropped_tables(tables, ddl) if start_ts < ddl["ts"] <= resolved_ts else []
            if left:
                raise InputError(
                    f"topic {ddl['topic']!r} partition {ddl['partition']} offset {ddl['offset']}: "
                    f"{ddl['ddl_query']!r} at ts {ddl['ts']} drops {', '.join(left)}, which the schema folder "
                    f"{folder} still has after it: add the DDL jobs of the upstream up to this ts "
                    "(ddl_jobs.jsonl)"
                )
            continue
        label = f"{ddl['schema']}.{ddl['table']}"
        tracked = label in names or table_matches(patterns, ddl["schema"], ddl["table"])
        if tracked and start_ts < ddl["ts"] <= resolved_ts and ddl["ts"] not in barriers:
            raise InputError(
                f"topic {ddl['topic']!r} partition {ddl['partition']} offset {ddl['offset']}: DDL of {label} "
                f"at ts {ddl['ts']} ({ddl['ddl_query']!r}) is not in the schema folder {folder} "
                "(ddl_jobs.jsonl): add the DDL jobs of the upstream up to this ts"
            )
    for (db, name), sample in plan.samples.items():
        if table_matches(patterns, db, name) and f"{db}.{name}" not in names:
            raise InputError(
                f"rows of {db}.{name} are in the topic ({sample['where']}) but the table is not in the "
                f"schema folder {folder} (tables.jsonl, or a CREATE TABLE in ddl_jobs.jsonl)"
            )
