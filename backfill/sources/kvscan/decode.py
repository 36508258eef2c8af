"""Decode collapsed changes of one table and schema version into typed rows, on the executors.

`mapInArrow` hands whole Arrow batches to the codec's vectorized `decode_batch`; a DELETE carries no
value, so only its primary key is taken from the record key. Each output row carries `_tidb_commit_ts`
and `_tidb_op` for the MERGE.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import AccumulatorParam

from backfill.codec import CodecError, TableSchema, decode_batch, decode_keys
from backfill.codec.arrow import ZERO_DATES_METADATA_KEY
from backfill.codec.checksum import checksum_failures
from tidelake.conventions import COMMIT_TS, OP
from tidelake.sparkerrors import in_task
from tidelake.sqlident import quote_ident

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame


def output_schema(schema: TableSchema) -> pa.Schema:
    return schema.arrow_schema.append(pa.field(COMMIT_TS, pa.int64())).append(pa.field(OP, pa.string()))


def spark_ddl(schema: TableSchema, *, nullable: bool = False) -> str:
    """Spark DDL of the decoded rows; `nullable` drops NOT NULL (DELETE rows carry only the key)."""
    ddl = f"{schema.spark_ddl}, {quote_ident(COMMIT_TS)} BIGINT, {quote_ident(OP)} STRING"
    return ddl.replace(" NOT NULL", "") if nullable else ddl


def decode_changes_batch(
    schema: TableSchema, batch: pa.RecordBatch, *, verify_checksums: bool = True
) -> tuple[pa.RecordBatch, int]:
    """(key, value, op, commit_ts) → the table's columns + commit ts + op; also the zero dates turned NULL.

    With `verify_checksums`, a row value that carries TiDB's row checksum must match it (CodecError)."""
    target = output_schema(schema)
    is_put = pc.equal(batch.column("op"), "PUT")
    puts = batch.filter(is_put)
    deletes = batch.filter(pc.invert(is_put))
    parts = []
    zero_dates = 0
    if puts.num_rows and verify_checksums:
        bad, _ = checksum_failures(puts.column("key"), puts.column("value"))
        if len(bad):
            first = int(bad[0])
            raise CodecError(
                f"row checksum mismatch: key {puts.column('key')[first].as_py().hex()}, "
                f"commit_ts {puts.column('commit_ts')[first].as_py()} ({len(bad)} such rows in the batch)",
                table_id=schema.table_id,
            )
    if puts.num_rows:
        decoded = decode_batch(schema, puts.select(["key", "value"]))
        zero_dates = int((decoded.schema.metadata or {}).get(ZERO_DATES_METADATA_KEY, b"0"))
        columns = [*decoded.columns, puts.column("commit_ts"), puts.column("op")]
        parts.append(pa.RecordBatch.from_arrays(columns, schema=target))
    if deletes.num_rows:
        keys = decode_keys(schema, deletes.column("key"))
        key_columns = {name: keys.column(name) for name in keys.schema.names}
        nulls = {f.name: pa.nulls(deletes.num_rows, f.type) for f in schema.arrow_schema}
        arrays = [key_columns.get(f.name, nulls[f.name]) for f in schema.arrow_schema]
        arrays += [deletes.column("commit_ts"), deletes.column("op")]
        parts.append(pa.RecordBatch.from_arrays(arrays, schema=_nullable(target)))
    # DELETE rows hold only the key columns: every other column is NULL, so the output is all nullable.
    table = pa.Table.from_batches([part.cast(_nullable(target)) for part in parts], schema=_nullable(target))
    return table.combine_chunks().to_batches(max_chunksize=None)[0] if table.num_rows else _empty(
        target
    ), zero_dates


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([field.with_nullable(True) for field in schema])


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=_nullable(schema))


class TaskSet(AccumulatorParam):
    """Accumulates sets: which (table, task) pairs decoded rows."""

    def zero(self, value: set) -> set:
        return set()

    def addInPlace(self, value1: set, value2: set) -> set:
        value1 |= value2
        return value1


def decode_changes(
    changes: DataFrame,
    schema: TableSchema,
    zero_dates: Accumulator[int] | None = None,
    tasks: Accumulator[set] | None = None,
    tag: object = None,
    *,
    verify_checksums: bool = True,
) -> DataFrame:
    """Typed rows (`schema` + `_tidb_commit_ts` + `_tidb_op`) from collapsed changes of one schema version.

    `zero_dates` counts zero dates written as NULL; `tasks` collects `(tag, partition)` for every task
    that decoded rows, which shows key-range parallelism at work without another Spark job.
    """

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            try:
                out, zeros = decode_changes_batch(schema, batch, verify_checksums=verify_checksums)
            except CodecError as exc:
                raise in_task(f"cannot decode a row: {schema.schema_name}.{schema.name}: {exc}") from None
            if zero_dates is not None and zeros:
                zero_dates.add(zeros)
            if tasks is not None and out.num_rows:
                from pyspark import TaskContext

                context = TaskContext.get()
                if context is not None:
                    tasks.add({(tag, context.partitionId())})
            yield out

    return changes.select("key", "value", "op", "commit_ts").mapInArrow(
        decode, spark_ddl(schema, nullable=True)
    )
