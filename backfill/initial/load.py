"""The first run of a job with `[source.initial]`: every tracked table of the export that has no Delta
checkpoint yet gets its first version from the export, committed at the export's TSO (txnVersion), so the
TiCDC source continues from there and skips every change at or below it (docs/architecture.md "Starting
from a snapshot").

All tables' rows are read and checked (Spark, a task per data file) before the first commit: bad input
leaves every table untouched. A table whose checkpoint exists already is left alone, so a rerun (or the
rest of a run killed between tables) loads only what is missing, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backfill import sink
from backfill.apply.merge import create_table
from backfill.codec import DecodeStats, TableSchema
from backfill.initial.export import decompressed, parse_csv, parse_sql, table_schema, typed_rows
from backfill.sources.base import CheckpointBook, StageClock
from backfill.sources.storage.source import local_file, read_local
from backfill.tables import identity_without_handle, table_matches
from tidelake import conventions, delta, fs
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
        frames = [_rows(spark, table, initial, tso) for table in tables]
        with input_errors("Dumpling export"):
            counts = [frame.persist().count() if frame is not None else 0 for frame in frames]
        try:
            for table, frame, count in zip(tables, frames, counts, strict=True):
                _commit(spark, config, table, frame, count, export, tso)
        finally:
            for frame in frames:
                if frame is not None:
                    frame.unpersist()
    return InitialLoad(
        export,
        tso,
        tuple((f"{t.schema.schema_name}.{t.schema.name}", n) for t, n in zip(tables, counts, strict=True)),
    )


def _tables_to_load(
    spark: SparkSession, export: str, patterns: tuple[str, ...], book: CheckpointBook
) -> list[ExportTable]:
    names = [status.name for status in fs.list_dir(spark, export) if not status.is_dir]
    found = []
    for db, table, file in schema_files(names):
        if not table_matches(patterns, db, table):
            continue  # the export holds it, the job does not track it
        path = book.path(db, table)
        if book.recorded_at(path) is not None:
            continue  # started already (this export, or its changes since)
        where = fs.join(export, file)
        schema = table_schema(fs.read_text(spark, where), db, table, where)
        files = tuple(fs.join(export, name) for name in data_files(names, db, table, ("csv", "sql")))
        found.append(ExportTable(schema, path, files))
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
    schema = table.schema
    identity = identity_without_handle(schema)
    create_table(
        spark, table.path, schema, identity, config.target.layout_of(schema.schema_name or "", schema.name)
    )
    metadata = conventions.commit_metadata(
        step=conventions.SNAPSHOT_STEP, checkpoint_ts=tso, resolved_ts=tso, run_resolved_ts=tso,
        upserted=count, extra=conventions.snapshot_metadata(kind, export, tso, schema.table_info),
    )  # fmt: skip
    change = sink.Advance() if rows is None else sink.Append(rows)
    sink.commit(spark, table.path, change, sink.Txn(config.job.app_id, tso, metadata))
