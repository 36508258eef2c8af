"""Decode collapsed changes of one table and schema version into typed rows, on the executors.

`mapInArrow` hands whole Arrow batches to the codec's vectorized `decode_batch`; a DELETE carries no
value, so only its primary key is taken: from the record key, or from the row it deleted where the key
holds collation sort keys. Each output row carries `_tidb_commit_ts` and `_tidb_op` for the MERGE.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import CodecError, TableSchema, decode_batch, decode_keys
from backfill.codec.arrow import ZERO_DATES_METADATA_KEY
from backfill.codec.checksum import checksum_failures
from backfill.codec.keys import key_columns_need_row, key_gives_value
from backfill.sources.decode_tasks import DecodeTally
from tidelake.conventions import BEFORE_PREFIX, COMMIT_TS, OP
from tidelake.sparkerrors import in_task
from tidelake.sqlident import quote_ident

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame


def output_schema(schema: TableSchema) -> pa.Schema:
    """Decoded changes: the table's columns, commit ts, op, and for a table whose key needs the row
    (`key_columns_need_row`) the key as it stood at the window's start (`BEFORE_PREFIX`, changes.collapse)."""
    out = schema.arrow_schema.append(pa.field(COMMIT_TS, pa.int64())).append(pa.field(OP, pa.string()))
    if key_columns_need_row(schema):
        for name in schema.pk_columns:
            out = out.append(pa.field(BEFORE_PREFIX + name, schema.arrow_schema.field(name).type))
    return out


def spark_ddl(schema: TableSchema, *, nullable: bool = False, before_keys: bool = False) -> str:
    """Spark DDL of typed changes; `nullable` drops NOT NULL (DELETE rows carry only the key), `before_keys`
    adds the window-start key columns of a table whose key needs the row (`output_schema`)."""
    ddl = f"{schema.spark_ddl}, {quote_ident(COMMIT_TS)} BIGINT, {quote_ident(OP)} STRING"
    if before_keys and key_columns_need_row(schema):
        ddl += "".join(
            f", {quote_ident(BEFORE_PREFIX + name)} {schema.by_name[name].spark_type}"
            for name in schema.pk_columns
        )
    return ddl.replace(" NOT NULL", "") if nullable else ddl


CHANGE_COLUMNS = ("key", "value", "op", "commit_ts")  # what every decode reads of a collapsed change
OLD_VALUE_COLUMNS = ("old_value", "first_old_value")  # and a table whose key needs the row, these


def input_columns(schema: TableSchema) -> list[str]:
    """The collapsed changes' columns `decode_changes_batch` reads for `schema`'s table."""
    return [*CHANGE_COLUMNS, *(OLD_VALUE_COLUMNS if key_columns_need_row(schema) else ())]


def decoded_spark_ddl(schema: TableSchema) -> str:
    """Spark DDL of the rows a decode gives (`nullable_output_schema`), on the executors or the driver."""
    return spark_ddl(schema, nullable=True, before_keys=True)


def decode_changes_batch(
    schema: TableSchema, batch: pa.RecordBatch, *, verify_checksums: bool = True
) -> tuple[pa.RecordBatch, int]:
    """(key, value, op, commit_ts[, old_value, first_old_value]) → the table's columns + commit ts + op;
    also the zero dates turned NULL.

    A DELETE carries only its key columns: from the record key, or, where the key may not give them back
    (`key_columns_need_row`), from the row it deleted (its old value, else the window's first old value),
    as TiCDC's mounter does; without either a sort-key column cannot be named (CodecError with key and ts).
    Such tables also carry their key as of the window's start, from the first old value, for the shared
    before/after key rule. With `verify_checksums`, a row value that carries TiDB's row checksum must match
    it (CodecError)."""
    target = nullable_output_schema(schema)
    is_put = pc.equal(batch.column("op"), "PUT")
    puts = batch.filter(is_put)
    deletes = batch.filter(pc.invert(is_put))
    restore = key_columns_need_row(schema)
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
        columns = {name: decoded.column(name) for name in decoded.schema.names}
        parts.append(_assemble(schema, puts, columns, target, restore))
    if deletes.num_rows:
        parts.append(_assemble(schema, deletes, _deleted_keys(schema, deletes, restore), target, restore))
    table = pa.Table.from_batches(parts, schema=target)
    if not table.num_rows:
        return pa.RecordBatch.from_pylist([], schema=target), zero_dates
    return table.combine_chunks().to_batches(max_chunksize=None)[0], zero_dates


def _assemble(
    schema: TableSchema,
    rows: pa.RecordBatch,
    columns: dict[str, pa.Array],
    target: pa.Schema,
    restore: bool,
) -> pa.RecordBatch:
    """`rows`' output: the given columns (others NULL), commit ts, op, and the before-image key."""
    n = rows.num_rows
    out = {
        name: columns.get(name, pa.nulls(n, schema.arrow_schema.field(name).type))
        for name in schema.output_names
    }
    out[COMMIT_TS], out[OP] = rows.column("commit_ts"), rows.column("op")
    if restore:
        before = _row_keys(schema, rows.column("key"), rows.column("first_old_value"))
        for name in schema.pk_columns:
            out[BEFORE_PREFIX + name] = before[name]
    arrays = [out[f.name].cast(f.type) for f in target]
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _row_keys(schema: TableSchema, keys: pa.Array, values: pa.Array) -> dict[str, pa.Array]:
    """The primary-key columns of the rows `values` hold (NULL where a value is empty or null)."""
    has = pc.fill_null(pc.greater(pc.binary_length(values), 0), False)
    where = np.flatnonzero(has.to_numpy(zero_copy_only=False))
    fields = [schema.arrow_schema.field(name) for name in schema.pk_columns]
    if not len(where):
        return {f.name: pa.nulls(len(values), f.type) for f in fields}
    taken = pa.array(where)
    decoded = decode_batch(schema, pa.record_batch({"key": keys.take(taken), "value": values.take(taken)}))
    position = np.full(len(values), -1, np.int64)
    position[where] = np.arange(len(where))
    index = pa.array(position, mask=position < 0)
    return {f.name: decoded.column(f.name).take(index) for f in fields}


def _deleted_keys(schema: TableSchema, deletes: pa.RecordBatch, restore: bool) -> dict[str, pa.Array]:
    """The key columns of DELETE rows (see `decode_changes_batch`)."""
    keys = deletes.column("key")
    if not restore:
        decoded = decode_keys(schema, keys)
        return {name: decoded.column(name) for name in decoded.schema.names}
    own, first = deletes.column("old_value"), deletes.column("first_old_value")
    row = pc.if_else(pc.fill_null(pc.greater(pc.binary_length(own), 0), False), own, first)
    named = _row_keys(schema, keys, row)
    missing = np.flatnonzero(pc.is_null(named[schema.pk_columns[0]]).to_numpy(zero_copy_only=False))
    if not len(missing):
        return named
    sort_keyed = [col for col, _ in schema.common_handle if not key_gives_value(col)]
    if sort_keyed:
        i = int(missing[0])
        col = sort_keyed[0]
        raise CodecError(
            f"DELETE of key {keys[i].as_py().hex()} at commit_ts {deletes.column('commit_ts')[i].as_py()} "
            f"carries no old value: the clustered key holds {col.collate} sort keys of {col.name!r}, not its "
            "value, so the row cannot be named (capture with old values, as TiCDC always does)",
            table_id=schema.table_id,
            column=col.name,
        )
    # binary collations: the key gives the value back (a PAD SPACE key without its trailing spaces)
    taken = pa.array(missing)
    from_key = decode_keys(schema, keys.take(taken))
    position = np.full(len(keys), -1, np.int64)
    position[missing] = np.arange(len(missing))
    index = pa.array(position, mask=position < 0)
    return {
        name: pc.if_else(pc.is_null(named[name]), from_key.column(name).take(index), named[name])
        for name in schema.pk_columns
    }


def nullable_output_schema(schema: TableSchema) -> pa.Schema:
    """`output_schema` with every column nullable: a DELETE carries only its key."""
    return pa.schema([field.with_nullable(True) for field in output_schema(schema)])


def decode_error(schema: TableSchema, exc: CodecError) -> str:
    """What a row that cannot be decoded is reported as, on the executors and on the driver alike."""
    return f"cannot decode a row: {schema.schema_name}.{schema.name}: {exc}"


def decode_changes(
    changes: DataFrame,
    schema: TableSchema,
    zero_dates: Accumulator[int] | None = None,
    tally: DecodeTally | None = None,
    *,
    verify_checksums: bool = True,
) -> DataFrame:
    """Typed rows (`schema` + `_tidb_commit_ts` + `_tidb_op`) from collapsed changes of one schema version.

    `zero_dates` counts zero dates written as NULL; `tally` records every Python task that ran this decode
    (`sources.decode_tasks`), without another Spark job.
    """

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if tally is not None:
            tally.note()
        for batch in batches:
            try:
                out, zeros = decode_changes_batch(schema, batch, verify_checksums=verify_checksums)
            except CodecError as exc:
                raise in_task(decode_error(schema, exc)) from None
            if zero_dates is not None and zeros:
                zero_dates.add(zeros)
            yield out

    return changes.select(*input_columns(schema)).mapInArrow(decode, decoded_spark_ddl(schema))
