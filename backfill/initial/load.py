"""The first run of a job with `[source.initial]`: every tracked table of the export that has no Delta
checkpoint yet gets its first version from the export, committed at the export's TSO (txnVersion), so the
TiCDC source continues from there and skips every change at or below it (docs/architecture.md "Starting
from a snapshot").

All tables' rows are read and checked (Spark, a task per data file) before the first commit: bad input
leaves every table untouched. The tables are decoded into Spark's cache and counted (the count goes into
each commit's metadata), except the largest, which is written straight from its decode into its own
transaction (`_commit_written`): over 20M rows, caching it and writing it from the cache took 1.6x the time
of Spark's own CSV-to-Parquet over the same files, writing it straight 1.26x (bench/NOTES.md). Its table is
created before its write, so that a killed write leaves a table at its creation only (data files no commit
lists, which VACUUM removes), which the rerun loads as any table without a checkpoint; data files written
before the create commit would leave a folder without a log, which `create_table` refuses. Bad input in its
write removes the table again (this run created it, no commit followed); only then are the others created
and committed from their caches. A table whose checkpoint exists already is left alone, so a rerun (or the
rest of a run killed between tables) loads only what is missing, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backfill import sink
from backfill.apply.merge import create_table
from backfill.codec import DecodeStats, TableSchema
from backfill.initial.export import decompressed, parse_csv, parse_sql, table_schema, typed_rows
from backfill.sources.base import CheckpointBook, StageClock
from backfill.sources.storage.source import local_file, read_local
from backfill.tables import identity_without_handle, table_matches
from tidelake import conventions, delta, delta_internals, fs
from tidelake.conventions import COMMIT_TS
from tidelake.dumpling import (
    METADATA,
    compression_of,
    data_files,
    file_type_of,
    schema_files,
    snapshot_tso,
)
from tidelake.errors import InputError
from tidelake.faults import fault_stage
from tidelake.sparkerrors import in_task, input_errors
from tidelake.sqlident import quote_ident

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from backfill.initial.jdbc import UpstreamTable
    from tidelake.config import InitialLoadConfig, TidelakeConfig


@dataclass(frozen=True)
class ExportTable:
    """One tracked table of the export: its schema and data files."""

    schema: TableSchema
    path: str  # the Delta table's
    files: tuple[str, ...]
    size: int = 0  # bytes of its data files


@dataclass(frozen=True)
class InitialLoad:
    """What the initial load did: the export's TSO and the tables it gave their first version."""

    export: str
    tso: int
    loaded: tuple[tuple[str, int], ...]  # (db.table, rows)


def started_from(spark: SparkSession, path: str) -> dict[str, object] | None:
    """The snapshot a table's first version came from (kind, path, tso), None for a table the changes
    built; read from the commit after the table's creation (its first tagged commit)."""
    found = conventions.snapshot_of(delta.json_object(delta.commit_user_metadata(spark, path, 1)))
    return found[0] if found is not None else None


def load_initial(spark: SparkSession, config: TidelakeConfig, clock: StageClock) -> InitialLoad | None:
    """Give every tracked table of the export without a checkpoint its first version (None: no
    `[source.initial]`). Raises InputError naming the file on bad input, with nothing committed."""
    initial = config.source.initial
    if initial is None:
        return None
    if initial.upstream_tso is not None:
        return _load_from_upstream(spark, config, clock)
    with clock.stage("snapshot"):
        export = fs.qualify(spark, initial.dumpling).rstrip("/")
        metadata = fs.join(export, METADATA)
        if not fs.exists(spark, metadata):
            raise InputError(f"{metadata}: the Dumpling export has no metadata file (check [source.initial])")
        tso = snapshot_tso(fs.read_text(spark, metadata), metadata)
        book = CheckpointBook(spark, config.target.warehouse, config.job.app_id)
        tables = _tables_to_load(spark, export, config.target.tables, book)
        if not tables:
            return InitialLoad(export, tso, ())
        counts = _load_tables(spark, config, initial, tables, export, tso)
    return InitialLoad(
        export,
        tso,
        tuple((f"{t.schema.schema_name}.{t.schema.name}", n) for t, n in zip(tables, counts, strict=True)),
    )


def _load_tables(
    spark: SparkSession, config: TidelakeConfig, initial: InitialLoadConfig, tables: list[ExportTable],
    export: str, tso: int,
) -> list[int]:  # fmt: skip
    """Give `tables` their first versions; the rows of each. Every table but the one `_written_directly` is
    decoded into the cache and counted first, so bad input in any of them stops the load with nothing
    created; then that one is written and committed, then the others from their caches."""
    direct = _written_directly(spark, tables)
    cached = {table: _rows(spark, table, initial, tso) for table in tables if table is not direct}
    try:
        with input_errors("Dumpling export"):
            counts = {t: frame.persist().count() if frame is not None else 0 for t, frame in cached.items()}
        if direct is not None:
            counts[direct] = _commit_written(spark, config, direct, initial, export, tso)
        for table, frame in cached.items():
            _commit(spark, config, table, frame, counts[table], export, tso)
    finally:
        for frame in cached.values():
            if frame is not None:
                frame.unpersist()
    return [counts[table] for table in tables]


def _written_directly(spark: SparkSession, tables: list[ExportTable]) -> ExportTable | None:
    """The table whose rows go straight from their decode into its commit: the largest (by data-file
    bytes), where commits go through the table's own transaction, which counts the rows it wrote before
    it commits. None elsewhere (Delta's public writer takes the commit's metadata, the count with it,
    before it writes: every table is cached and counted first) and when no table has a data file."""
    if not delta_internals.commits_usable(spark):
        return None
    largest = max(tables, key=lambda table: table.size)
    return largest if largest.files else None


def _tables_to_load(
    spark: SparkSession, export: str, patterns: tuple[str, ...], book: CheckpointBook
) -> list[ExportTable]:
    sizes = {status.name: status.size for status in fs.list_dir(spark, export) if not status.is_dir}
    found = []
    for db, table, file in schema_files(list(sizes)):
        if not table_matches(patterns, db, table):
            continue  # the export holds it, the job does not track it
        path = book.path(db, table)
        if book.recorded_at(path) is not None:
            continue  # started already (this export, or its changes since)
        where = fs.join(export, file)
        schema = table_schema(fs.read_text(spark, where), db, table, where)
        names_of_data = data_files(list(sizes), db, table, ("csv", "sql"))
        files = tuple(fs.join(export, name) for name in names_of_data)
        found.append(ExportTable(schema, path, files, sum(sizes[name] for name in names_of_data)))
    return found


def _rows(spark: SparkSession, table: ExportTable, initial: InitialLoadConfig, tso: int) -> DataFrame | None:
    """The table's rows, typed as its Delta columns, one Spark task per data file (CSV or INSERT
    statements, decoded on the executors); None when the export holds no data file for it (an empty
    table). A local file is read by its task itself (no trip through the JVM's binaryFile reader and a
    shuffle, as the storage source does); other file systems go through binaryFile."""
    if not table.files:
        return None
    schema = table.schema
    ddl = f"{schema.spark_ddl.replace(' NOT NULL', '')}, {quote_ident(COMMIT_TS)} BIGINT"

    def typed(path: str, content: bytes, stats: DecodeStats) -> Iterator[pa.RecordBatch]:
        try:
            text = decompressed(content, compression_of(path), path)
            parse = parse_sql if file_type_of(path) == "sql" else parse_csv  # --filetype
            yield from typed_rows(parse(text, schema, initial, path), schema, tso, path, stats).to_batches()
        except InputError as exc:
            raise in_task(str(exc)) from None

    files = table.files
    if all(local_file(path) is not None for path in files):

        def read_and_decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            stats = DecodeStats()
            for batch in batches:
                for index in batch.column("id").to_pylist():
                    yield from typed(files[index], read_local(files[index]), stats)

        return spark.range(len(files), numPartitions=len(files)).mapInArrow(read_and_decode, ddl)

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stats = DecodeStats()
        for batch in batches:
            for path, content in zip(
                batch.column("path").to_pylist(), batch.column("content").to_pylist(), strict=True
            ):
                yield from typed(path, content, stats)

    raw = spark.read.format("binaryFile").load(list(table.files))
    return raw.repartition(max(1, len(table.files))).select("path", "content").mapInArrow(decode, ddl)


def _load_from_upstream(spark: SparkSession, config: TidelakeConfig, clock: StageClock) -> InitialLoad:
    """`upstream_tso`: the tables read from `[upstream]` over JDBC (backfill/initial/jdbc.py), then
    committed here like an export's."""
    from backfill.initial.jdbc import load_from_upstream

    with clock.stage("snapshot"):
        name, tso, read = load_from_upstream(spark, config)
        try:
            for table, frame, count in read:
                _commit(spark, config, table, frame, count, name, tso, kind="upstream")
        finally:
            for _, frame, _ in read:
                frame.unpersist()
    return InitialLoad(name, tso, tuple((f"{t.schema.schema_name}.{t.schema.name}", n) for t, _, n in read))


def _commit(
    spark: SparkSession,
    config: TidelakeConfig,
    table: ExportTable | UpstreamTable,
    rows: DataFrame | None,
    count: int,
    export: str,
    tso: int,
    kind: str = "dumpling",
) -> None:
    """Create the table and commit its counted (cached) rows at the TSO."""
    _create(spark, config, table)
    change = sink.Advance() if rows is None else sink.Append(rows)
    metadata = _snapshot_metadata(table, kind, export, tso, count)
    sink.commit(spark, table.path, change, sink.Txn(config.job.app_id, tso, metadata))


def _commit_written(
    spark: SparkSession, config: TidelakeConfig, table: ExportTable, initial: InitialLoadConfig, export: str,
    tso: int,
) -> int:  # fmt: skip
    """Create the table, then write its rows straight from their decode into its commit at the TSO, whose
    metadata records the rows the written files hold; that count. Bad input fails the write before the
    commit: the table is removed again where this run created it (`_remove_created`). Where the data files
    are big (`DIRECT_FILE_BYTES`), each one's task writes its own Delta files: the optimized write the
    table asks for would shuffle the whole table to make files of a size these have already."""
    rows = _rows(spark, table, initial, tso)
    assert rows is not None  # `_written_directly` takes a table with data files
    rows = fault_stage(rows, "initial.write")
    created = _create(spark, config, table)
    optimize_write = False if table.size >= DIRECT_FILE_BYTES * len(table.files) else None
    change = sink.Append(
        rows, optimize_write, lambda count: _snapshot_metadata(table, "dumpling", export, tso, count)
    )
    try:
        with input_errors("Dumpling export"):
            done = sink.commit(spark, table.path, change, sink.Txn(config.job.app_id, tso))
    except InputError:
        if created:
            _remove_created(spark, table.path)
        raise
    return conventions.upserted_of(done.user_metadata)


# data files this big on average are written as a Delta file each: bench/NOTES.md "Optimized write on a
# first load" (merge.py's FILE_PER_PARTITION_ROWS, by bytes, since the rows are counted only as they write)
DIRECT_FILE_BYTES = 4 * 1024 * 1024


def _remove_created(spark: SparkSession, path: str) -> None:
    """Remove a table this run created for a write that failed on bad input, with the files the write left,
    unless another writer committed to it since (it is past version 0): the rerun then finds the folder as
    before this run."""
    if delta.table_version(spark, path) == 0:
        fs.delete(spark, path)


def _create(spark: SparkSession, config: TidelakeConfig, table: ExportTable | UpstreamTable) -> bool:
    """Create the table (with the job's layout) if it is not there; True if this call created it."""
    schema = table.schema
    layout = config.target.layout_of(schema.schema_name or "", schema.name)
    return create_table(spark, table.path, schema, identity_without_handle(schema), layout)


def _snapshot_metadata(
    table: ExportTable | UpstreamTable, kind: str, export: str, tso: int, count: int
) -> dict[str, Any]:
    """The userMetadata of a table's snapshot commit (`started_from` reads it), with its row count."""
    return conventions.commit_metadata(
        step=conventions.SNAPSHOT_STEP, checkpoint_ts=tso, resolved_ts=tso, run_resolved_ts=tso,
        upserted=count, extra=conventions.snapshot_metadata(kind, export, tso, table.schema.table_info),
    )  # fmt: skip
