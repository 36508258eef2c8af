"""The TiCDC storage-sink source (`source.kind = "ticdc-storage"`): CSV or canal-json files in the folder
layout of `layout`, read up to the sink's `metadata` checkpoint (`plan`).

Plan (driver): one recursive listing, the root checkpoint, and the schema files of the tracked tables
(checksums verified); each table version with a query is a DDL barrier. Changes (executors): per (table,
segment) one Spark job over its files, packed into tasks, decoded file by file in `mapInArrow` (`decode`;
a local file is read by the task itself, others through binaryFile), then the shared collapse
(`TypedRowChanges`) shuffles by key. Tables without a primary key are multisets: repeated deliveries of a
transaction (a changefeed restart writes it again into a later file) are dropped first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote

from backfill.changes.collapse import LINE
from backfill.changes.typed import TypedRowChanges
from backfill.codec import SchemaVersion, TableSchema
from backfill.codec.errors import CodecError
from backfill.sources.base import (
    CheckpointBook,
    NoWindow,
    RowChanges,
    Source,
    SourceStatus,
    StageClock,
    Window,
)
from backfill.sources.storage import layout
from backfill.sources.storage.decode import FileFormat, decode_file
from backfill.sources.storage.elements import lacks_elements, text_table_infos_from, with_text_elements
from backfill.sources.storage.plan import (
    FileToRead,
    Piece,
    SinkListing,
    TableListing,
    files_to_read,
    group_listing,
    lineages,
    pack_files,
    segment_starts,
)
from backfill.sources.ticdc.change_rows import LINE_BITS, output_schema
from backfill.sources.ticdc.open_schema import fake_table_id
from backfill.sources.ticdc.schema_file import (
    ACTION_DROP_SCHEMA,
    ACTION_DROP_TABLE,
    ACTION_TRUNCATE_TABLE,
    ROW_REMOVING_PARTITION_DDL,
    TableDefinition,
    read_schema_file,
    renamed_columns,
    schema_file_name,
)
from backfill.sources.upstream_schema import upstream_table_infos
from backfill.tables import RowIdentity, TrackedTable, identity_without_handle, table_matches
from tidelake import dumpling, fs
from tidelake.conventions import COMMIT_TS, OP
from tidelake.errors import InputError
from tidelake.sparkerrors import in_task, input_errors
from tidelake.sqlident import quote_ident

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from backfill.sources.storage.settings import StorageSourceConfig
    from tidelake.config import SourceConfig, UpstreamConfig


@dataclass(frozen=True, kw_only=True)
class StorageWindow(Window):
    """A window with the files of each (table, segment) to read."""

    files: Mapping[tuple[int, int], tuple[FileToRead, ...]]


@dataclass(frozen=True)
class PlannedTable:
    table: TrackedTable
    floor: int  # changes at or below it are in the Delta table already
    files: Mapping[int, Sequence[FileToRead]]  # per segment
    identity: RowIdentity


class StorageSource(Source[StorageWindow]):
    kind: ClassVar[str] = "ticdc-storage"

    def __init__(
        self,
        config: SourceConfig,
        options: StorageSourceConfig,
        patterns: Sequence[str],
        upstream: UpstreamConfig | None = None,
    ) -> None:
        self.path = config.path
        self.initial = config.initial  # the snapshot every table that predates the changefeed starts from
        self.patterns = tuple(patterns)
        self.upstream = upstream  # ENUM/SET names of tables that predate the changefeed, when given
        self.format = FileFormat(
            protocol=options.protocol,
            terminator=options.terminator,
            csv=options.csv_options() if options.protocol == "csv" else None,
            time_zone=options.time_zone,
        )
        self.extension = layout.EXTENSIONS[options.protocol]
        self.date_separator = options.date_separator

    # ------------------------------------------------------------------------------------------ plan

    def _checkpoint(self, spark: SparkSession) -> int | None:
        """The sink's checkpoint ts from its metadata file; None while an existing folder has none yet. A
        folder (or bucket) that does not exist is an InputError: a typo would make a scheduled job do
        nothing forever without failing."""
        uri = fs.join(self.path, layout.METADATA)
        if not fs.exists(spark, uri):
            if not fs.exists(spark, self.path):
                raise InputError(
                    f"{self.path}: the storage sink's folder does not exist (check [source] path: the sink "
                    "URI's bucket and prefix)"
                )
            return None
        return layout.parse_metadata(fs.read_text(spark, uri), uri)

    def _snapshot_tso(self, spark: SparkSession) -> int | None:
        """The TSO of the `[source.initial]` export (None without one)."""
        if self.initial is None:
            return None
        if self.initial.upstream_tso is not None:
            return self.initial.upstream_tso
        metadata = fs.join(self.initial.dumpling, dumpling.METADATA)
        return dumpling.snapshot_tso(fs.read_text(spark, metadata), metadata)

    def _listing(self, spark: SparkSession) -> SinkListing:
        root = fs.qualify(spark, self.path).rstrip("/") + "/"
        entries = []
        for status in fs.list_files(spark, root):
            if not status.path.startswith(root):
                continue
            entry = layout.classify(
                status.path[len(root) :], status.path, self.extension, self.date_separator, status.size
            )
            if entry is not None:
                entries.append(entry)
        return group_listing(entries)

    def plan(
        self, spark: SparkSession, checkpoints: CheckpointBook, clock: StageClock, until_ts: int | None
    ) -> StorageWindow | NoWindow:
        with clock.stage("plan"):
            storage_ts = self._checkpoint(spark)
            if storage_ts is None:
                return NoWindow(None, "no metadata file: the storage sink has not written a checkpoint yet")
            resolved = storage_ts if until_ts is None else min(storage_ts, until_ts)
            listing = self._listing(spark)
            snapshot_ts = self._snapshot_tso(spark)
            drops = self._database_drops(spark, listing, resolved)
            for table_listing in listing.tables.values():
                self._check_data_folders(
                    table_listing, [f.version for f in table_listing.schema_files], resolved
                )
            definitions = {
                f.path: self._definition(spark, f)
                for t in listing.tables.values()
                for f in t.versions_up_to(resolved)
            }
            planned = []
            for chain in lineages(listing, definitions, resolved):
                if not any(table_matches(self.patterns, t.schema, t.table) for t, _ in chain):
                    continue
                recorded = [checkpoints.recorded_at(checkpoints.path(t.schema, t.table)) for t, _ in chain]
                floor = max((r for r in recorded if r is not None), default=None)
                found = self._plan_table(spark, chain, definitions, floor, drops, snapshot_ts)
                if found is not None:
                    planned.append(found)
            if not planned:
                return NoWindow(None, "no tracked tables in the storage sink")
            live = [p for p in planned if p.floor < resolved]
            if not live:
                return NoWindow(min(p.floor for p in planned), "nothing new")

        files = {(i, seg): tuple(f) for i, p in enumerate(live) for seg, f in p.files.items()}
        count = sum(len(v) for v in files.values())
        return StorageWindow(
            checkpoint_ts=min(p.floor for p in live),
            resolved_ts=resolved,
            tables=tuple(p.table for p in live),
            floors=tuple(p.floor for p in live),
            blocked=f"storage sink checkpoint-ts {storage_ts}" if until_ts is None else None,
            inputs=(f"{count} files",),
            commit_metadata={"storage_checkpoint_ts": storage_ts, "storage_files": count},
            identities={i: p.identity for i, p in enumerate(live)},
            files=files,
        )

    def _database_drops(
        self, spark: SparkSession, listing: SinkListing, resolved: int
    ) -> dict[str, list[int]]:
        """Per database, the ts of each DROP DATABASE at or below `resolved`, in order (files verified;
        CREATE / ALTER DATABASE change no table)."""
        drops: dict[str, list[int]] = {}
        for file in listing.database_files:
            if file.version > resolved:
                continue
            definition = self._definition(spark, file)
            if definition.type == ACTION_DROP_SCHEMA:
                drops.setdefault(definition.schema, []).append(file.version)
        return {db: sorted(ts) for db, ts in drops.items()}

    def _definition(self, spark: SparkSession, file: layout.SchemaFile) -> TableDefinition:
        """The schema file, which must name the schema and table of its folder (TiCDC builds the path
        from them): one naming another would define, or create, some other table."""
        definition = read_schema_file(fs.read_text(spark, file.path), file.path.rsplit("/", 1)[-1], file.path)
        named = (definition.schema, definition.table)
        if named not in {(file.schema, file.table), (unquote(file.schema), unquote(file.table))}:
            raise InputError(
                f"{file.path}: the schema file names {definition.schema!r}.{definition.table!r}, "
                f"its folder {file.schema!r}.{file.table!r}"
            )
        return definition

    def _plan_table(
        self,
        spark: SparkSession,
        chain: Sequence[Piece],
        definitions: Mapping[str, TableDefinition],
        recorded: int | None,
        drops: Mapping[str, Sequence[int]],
        snapshot_ts: int | None,
    ) -> PlannedTable | None:
        """One logical table (names joined by renames): its versions in the window and files to read."""
        schema_files = [f for _, files in chain for f in files]
        if not schema_files:
            return None
        where = " → ".join(f"{t.schema}.{t.table}" for t, _ in chain)
        defs = [definitions[f.path] for f in schema_files]
        starts = segment_starts(defs)
        floor = recorded if recorded is not None else schema_files[0].version
        _check_changefeed_start(where, floor, schema_files[0].version, defs[0])
        # Versions at or below the checkpoint matter only from the newest barrier among them, and the
        # version before it: the walk finishes a rename that a killed run left at the checkpoint.
        first = max((s for s in starts if schema_files[s].version <= floor), default=0)
        since = max((s for s in starts if s < first), default=first)
        texts = self._text_table_infos(defs, since, where)
        versions, segment_of = self._versions(
            chain[0][0], defs[since:], [s - since for s in starts if s >= since], texts, where
        )
        versions, moved = _with_database_drops(versions, drops)
        segment_of = [moved[s] for s in segment_of[first - since :]]
        defs, schema_files = defs[first:], schema_files[first:]
        _check_no_partition_rows_removed(where, defs, floor)
        per_segment = self._files_per_segment(
            spark, chain, [f.version for f in schema_files], segment_of, floor
        )
        table = TrackedTable(tuple(versions), versions[0].finished_ts)
        if recorded is None and snapshot_ts is not None:
            self._check_in_snapshot(where, table, defs[0], schema_files[0].version, snapshot_ts)
        return PlannedTable(table, floor, per_segment, _identity(versions))

    def _check_in_snapshot(
        self, where: str, table: TrackedTable, first: TableDefinition, first_version: int, snapshot_ts: int
    ) -> None:
        """A table new to the job that predates the changefeed must come from the initial snapshot."""
        if not first.query and table.schema_at(snapshot_ts):
            assert self.initial is not None
            raise InputError(
                f"{where}: a tracked table that predates the changefeed (table version "
                f"{first_version} has no CREATE TABLE) and exists at the snapshot's TSO {snapshot_ts} "
                f"is not in the snapshot of [source.initial] ({self.initial.described}): its rows from before "
                "the changefeed are in neither"
            )

    def _files_per_segment(
        self,
        spark: SparkSession,
        chain: Sequence[Piece],
        version_ts: Sequence[int],
        segment_of: Sequence[int],
        floor: int,
    ) -> dict[int, list[FileToRead]]:
        """Per segment the data files to read, in order across the chain's names (each file's ordinal
        above those of the names before)."""
        per_segment: dict[int, list[FileToRead]] = {}
        ordinal = 0
        for table_listing, files in chain:
            own = [f.version for f in files if f.version in version_ts]
            if not own:
                continue
            per_version = files_to_read(
                table_listing, version_ts, self._indexed(spark, table_listing), floor, ordinal
            )
            for version, to_read in per_version.items():
                if version in own:
                    per_segment.setdefault(segment_of[version_ts.index(version)], []).extend(to_read)
                    ordinal = max(ordinal, *(f.ordinal for f in to_read))
        return per_segment

    def _versions(
        self,
        origin: TableListing,
        definitions: Sequence[TableDefinition],
        starts: Sequence[int],
        texts: Sequence[Mapping[str, Any] | None],
        where: str,
    ) -> tuple[list[SchemaVersion], list[int]]:
        """The segments' schema versions, and per table version its segment (`texts`: per definition what its
        DDL text says). The table keeps one id through renames (so a rename moves its rows) and gets a new
        one at each TRUNCATE TABLE."""
        versions: list[SchemaVersion] = []
        table_id = fake_table_id(origin.schema, origin.table)
        segment_of = []
        column_ids: dict[str, int] = {}  # by name, so that a dropped column does not shift the others
        for i, definition in enumerate(definitions):
            for old, new in renamed_columns(definition.query):
                if old.lower() in column_ids:
                    column_ids[new.lower()] = column_ids.pop(old.lower())
            for column in definition.columns:
                column_ids.setdefault(column.name.lower(), max(column_ids.values(), default=0) + 1)
            if i in starts:
                if definition.type == ACTION_TRUNCATE_TABLE:
                    table_id = fake_table_id(
                        definition.schema, f"{definition.table}#{definition.table_version}"
                    )
                schema: TableSchema | None = None
                if definition.type != ACTION_DROP_TABLE:
                    try:
                        info = with_text_elements(definition.table_info(table_id, column_ids), texts[i])
                        schema = TableSchema.from_table_info(info, schema_name=definition.schema)
                    except (ValueError, CodecError) as exc:
                        raise InputError(
                            f"{where}: schema version {definition.table_version} "
                            f"({schema_file_name(definition)}): {exc}"
                        ) from None
                versions.append(
                    SchemaVersion(definition.table_version, schema, None, definition.type or None)
                )
            segment_of.append(len(versions) - 1)
        return versions, segment_of

    def _text_table_infos(
        self, definitions: Sequence[TableDefinition], since: int, where: str
    ) -> list[dict[str, Any] | None]:
        """Per definition from `since` on, what its DDL text (and the upstream, for a table that predates the
        changefeed) says, needed only when some ENUM/SET column lacks its element names (`elements`)."""
        if not any(lacks_elements(d) for d in definitions[since:]):
            return [None] * (len(definitions) - since)
        upstream_at = partial(_upstream_table_info, self.upstream) if self.upstream is not None else None
        return text_table_infos_from(definitions, since, upstream_at, where)

    def _check_data_folders(self, listing: TableListing, versions: Sequence[int], resolved: int) -> None:
        for folder in listing.data:
            if folder.version <= resolved and folder.version not in versions:
                raise InputError(
                    f"{fs.join(self.path, folder.schema, folder.table, 'meta')}: no schema file for table "
                    f"version {folder.version}, which has data files"
                )

    def _indexed(self, spark: SparkSession, listing: TableListing) -> dict[layout.DataDir, int | None]:
        return {
            folder: layout.parse_index(fs.read_text(spark, index.path), index.path)
            for folder, index in listing.indexes.items()
        }

    # --------------------------------------------------------------------------------------- changes

    def row_changes(self, spark: SparkSession, window: StorageWindow, clock: StageClock) -> RowChanges:
        zero_dates = spark.sparkContext.accumulator(0)
        frames: dict[tuple[int, int], DataFrame] = {}
        for (index, segment), files in window.files.items():
            schema = window.tables[index].versions[segment].schema
            if schema is None or not files:
                continue
            frame = read_files(
                spark, files, self.format, schema, (window.floors[index], window.resolved_ts), zero_dates
            )
            if window.identity(index) is RowIdentity.WHOLE_ROW:
                frame = one_delivery_per_transaction(frame)
            frames[(index, segment)] = frame
        with clock.stage("decode+collapse"), input_errors("storage sink files"):
            return TypedRowChanges(
                window.segment_keys(frames), frames, zero_dates=lambda: int(zero_dates.value)
            )

    # ---------------------------------------------------------------------------------------- status

    def status(self, spark: SparkSession) -> SourceStatus:
        storage_ts = self._checkpoint(spark)
        listing = self._listing(spark)
        tables = [f"{s}.{t}" for s, t in listing.tables if table_matches(self.patterns, s, t)]
        files = sum(len(v) for t in listing.tables.values() for v in t.data.values())
        description = (
            f"TiCDC storage sink: checkpoint-ts {storage_ts}, {len(tables)} tables, {files} data files"
            if storage_ts is not None
            else "TiCDC storage sink without a metadata file yet"
        )
        return SourceStatus(description, storage_ts, {"storage_checkpoint_ts": storage_ts, "tables": len(tables),
                                                      "data_files": files})  # fmt: skip


def read_files(
    spark: SparkSession,
    files: Sequence[FileToRead],
    fmt: FileFormat,
    schema: TableSchema,
    window: tuple[int, int],
    zero_dates: Any = None,
) -> DataFrame:
    """The typed changes of `files` (one segment of one table) within `window`, decoded on the executors.

    Files on a local (or mounted) file system are read by the decoding Python task itself, in groups packed
    like Spark packs a file source: shipping their bytes through the JVM's binaryFile reader cost more than
    decoding them (2 GB of canal-json: 12.9 s against 3.9 s). Other file systems (s3a, hdfs) go through
    binaryFile, which only the JVM can read."""
    import pyarrow as pa

    from backfill.codec import DecodeStats

    target = output_schema(schema)
    ddl = (
        f"{schema.spark_ddl.replace(' NOT NULL', '')}, {quote_ident(OP)} STRING, "
        f"{quote_ident(COMMIT_TS)} BIGINT, {quote_ident(LINE)} BIGINT"
    )

    def typed(file: FileToRead, content: bytes, stats: DecodeStats) -> Iterator[pa.RecordBatch]:
        try:
            table = decode_file(content, file.path, fmt, schema, ordinal=file.ordinal, newest=file.newest,
                                window=window, stats=stats)  # fmt: skip
        except InputError as exc:
            raise in_task(str(exc)) from None
        yield from table.cast(target).to_batches()

    def counted(stats: DecodeStats) -> None:
        if zero_dates is not None and stats.zero_dates:
            zero_dates.add(stats.zero_dates)

    if all(local_file(f.path) is not None for f in files):
        conf = spark._jsparkSession.sessionState().conf()  # Spark's own file-packing settings
        groups = pack_files(
            files,
            max_bytes=conf.filesMaxPartitionBytes(),
            open_cost=conf.filesOpenCostInBytes(),
            min_tasks=spark.sparkContext.defaultParallelism,
        )

        def read_and_decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            stats = DecodeStats()
            for batch in batches:
                for group in batch.column("id").to_pylist():
                    for file in groups[group]:
                        yield from typed(file, read_local(file.path), stats)
            counted(stats)

        return spark.range(len(groups), numPartitions=max(1, len(groups))).mapInArrow(read_and_decode, ddl)

    by_path = {f.path: f for f in files}
    by_name = {_tail(f.path): f for f in files}

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stats = DecodeStats()
        for batch in batches:
            for path, content in zip(
                batch.column("path").to_pylist(), batch.column("content").to_pylist(), strict=True
            ):
                yield from typed(by_path.get(path) or by_name[_tail(path)], content, stats)
        counted(stats)

    raw = spark.read.format("binaryFile").load([f.path for f in files])
    return raw.select("path", "content").mapInArrow(decode, ddl)


def local_file(path: str) -> str | None:
    """The local file system path of a ``file:`` (or scheme-less) path; None for any other file system."""
    found = re.match(r"^file:(//[^/]*)?(/.*)$", path)
    if found:
        return found.group(2)
    return path if path.startswith("/") else None


def read_local(path: str) -> bytes:
    """A local data file's bytes; a file gone since the listing is an error that names it."""
    local = local_file(path)
    assert local is not None
    try:
        with open(local, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise in_task(f"{path}: cannot read the data file: {exc.strerror or exc}") from None


def one_delivery_per_transaction(changes: DataFrame) -> DataFrame:
    """A multiset's changes with repeated deliveries dropped: per (row, op, commit ts) as many copies as the
    file that holds the most of them (a restart writes a transaction again into a later file)."""
    from pyspark.sql import functions as F

    content = [c for c in changes.columns if c != LINE]
    quoted = [F.col(quote_ident(c)) for c in content]
    per_file = changes.groupBy(*quoted, F.shiftright(F.col(LINE), LINE_BITS).alias("_file")).agg(
        F.count(F.lit(1)).alias("_n"), F.min(LINE).alias(LINE)
    )
    most = per_file.groupBy(*quoted).agg(F.max("_n").alias("_n"), F.min(LINE).alias(LINE))
    return most.select(
        *quoted, F.col(LINE), F.explode(F.sequence(F.lit(1), F.col("_n"))).alias("_copy")
    ).drop("_copy")


def _tail(path: str) -> str:
    """The path without its scheme and authority, percent-decoded (Spark's binaryFile reader and Hadoop's
    listing spell URIs differently: `file:///` or `file:/`, `%20` or a space)."""
    return unquote(re.sub(r"^[a-z0-9]+:(//[^/]*)?", "", path))


def _upstream_table_info(upstream: UpstreamConfig, definition: TableDefinition) -> dict[str, Any] | None:
    """The upstream's TableInfo of `definition`'s table, in force at its version (on TiDB)."""
    key = (definition.schema, definition.table)
    return upstream_table_infos(upstream, {key: definition.table_version}).get(key)


def _check_changefeed_start(where: str, floor: int, first_version: int, first: TableDefinition) -> None:
    """A first table version without a query is where the changefeed started (or its oldest files kept):
    the changes between the table's checkpoint and it are in no file."""
    if floor < first_version and not first.query:
        raise InputError(
            f"{where}: the storage sink begins at table version {first_version} (the "
            f"changefeed's start-ts), above the table's checkpoint {floor}: the changes between are in "
            f"no file. Create the changefeed with --start-ts at or below {floor} (a Dumpling export's TSO)"
        )


def _check_no_partition_rows_removed(where: str, defs: Sequence[TableDefinition], floor: int) -> None:
    """A partition DDL above the checkpoint that takes rows away cannot be replayed from schema files."""
    for definition in defs:
        if definition.type in ROW_REMOVING_PARTITION_DDL and definition.table_version > floor:
            raise InputError(
                f"{where}: DDL {definition.query!r} (table version {definition.table_version}) removes the "
                "rows of partitions, which a storage sink's schema files cannot identify; apply it to "
                "the Delta table by hand and restart from a new checkpoint"
            )


def _identity(versions: Sequence[SchemaVersion]) -> RowIdentity:
    """How the table's rows are identified: by its newest schema's handle, else by the whole row."""
    newest = next((v.schema for v in reversed(versions) if v.schema is not None), None)
    return identity_without_handle(newest) if newest is not None else RowIdentity.WHOLE_ROW


def _with_database_drops(
    versions: Sequence[SchemaVersion], drops: Mapping[str, Sequence[int]]
) -> tuple[list[SchemaVersion], list[int]]:
    """`versions` with a version without table at each DROP DATABASE of the table's database while the
    table exists (the storage sink writes it to `<db>/meta/` only), and each old index's new index."""
    out: list[SchemaVersion] = []
    moved = []
    for i, version in enumerate(versions):
        moved.append(len(out))
        out.append(version)
        until = versions[i + 1].finished_ts if i + 1 < len(versions) else None
        if version.schema is None:
            continue
        db = version.schema.schema_name or ""
        dropped = [d for d in drops.get(db, ()) if d > version.finished_ts and (until is None or d < until)]
        if dropped:
            out.append(SchemaVersion(dropped[0], None, None, ACTION_DROP_SCHEMA))
    return out, moved
