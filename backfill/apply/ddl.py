"""DDL steps: what a schema change does to a Delta table and its existing rows.

A step goes from one schema version of a table to the next and lands as one tagged commit (or a folder
removal for a dropped table). Its kind follows from the two versions: no table after it → drop; no table
before it → create; a new table id for an unpartitioned table → truncate (the rows go); otherwise the rows
are rewritten into the new schema, at the new name's path after a rename.

The new schema is TiDB's TableInfo after the job (all columns public), so one rule covers add, drop,
modify and rename column: each new column takes the old column with the same column id (or, after a
reorganising MODIFY COLUMN that gave it a new id, the same name) cast to its new type; a column that did
not exist reads its origin default, as TiDB's existing rows do. Dropped or truncated partitions take
their rows with them, found by evaluating the partition definitions; a reorganisation (REORGANIZE
PARTITION, PARTITION BY, REMOVE PARTITIONING) retires ids too, but its reorg copied their rows into the new
ones first, so the rows stay.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from backfill import sink
from backfill.apply.merge import create_table, overwrite_table, quote
from backfill.codec import SchemaVersion, TableSchema
from backfill.codec.history import REORGANIZE_PARTITION
from backfill.codec.schema import ROWID_NAME
from backfill.codec.values import ZERO_DATE, fill_value
from backfill.tables import RowIdentity
from tidelake import conventions, delta, fs
from tidelake.conventions import COMMIT_TS
from tidelake.errors import InputError
from tidelake.faults import fault_point

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from tidelake.config import TableLayout

RANGE, HASH, LIST = 1, 2, 3
ALTER_TABLE_PARTITIONING, REMOVE_PARTITIONING = 71, 72
# DDL types that give rows new physical ids by copying them (the old ids retire, the rows stay).
ROW_KEEPING = frozenset({REORGANIZE_PARTITION, ALTER_TABLE_PARTITIONING, REMOVE_PARTITIONING})


def default_literal(column: Any) -> Column:
    """The value existing rows read for a column added by DDL (origin default, NULL, or zero value)."""
    from pyspark.sql import functions as F

    value = fill_value(column)
    if value is None or value is ZERO_DATE:
        return F.lit(None).cast(column.spark_type)
    if isinstance(value, bytes):
        return F.lit(bytearray(value)).cast(column.spark_type)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return (
            F.lit(value.astimezone(dt.UTC).replace(tzinfo=None)).cast("timestamp_ntz").cast(column.spark_type)
        )
    if isinstance(value, Decimal):
        return F.lit(str(value)).cast(column.spark_type)
    return F.lit(value).cast(column.spark_type)


def migrate_rows(
    rows: DataFrame, old: TableSchema, new: TableSchema, job_type: int | None = None
) -> DataFrame:
    """Existing rows of `old` as rows of `new` (column changes and removed partitions) after a DDL job of
    type `job_type`."""
    from pyspark.sql import functions as F

    removes = job_type not in ROW_KEEPING and _removed_partitions(old, new)
    kept = rows.filter(~removed_partition_rows(old, new)) if removes else rows
    by_id = {c.id: c for c in old.columns}
    by_name = {c.name.lower(): c for c in old.columns}
    selected = []
    if new.pk_kind == "rowid":
        selected.append(F.col(quote(ROWID_NAME)) if old.pk_kind == "rowid" else F.lit(None).cast("bigint"))
        selected[-1] = selected[-1].alias(ROWID_NAME)
    for column in new.columns:
        source = by_id.get(column.id) or by_name.get(column.name.lower())
        if source is None:
            value = default_literal(column)
        elif source.spark_type == column.spark_type:
            value = F.col(quote(source.name))
        else:
            value = F.col(quote(source.name)).cast(column.spark_type)
        selected.append(value.alias(column.name))
    selected.append(F.col(quote(COMMIT_TS)))
    return kept.select(*selected)


def _removed_partitions(old: TableSchema, new: TableSchema) -> list[int]:
    if not old.partition_names:
        return []
    return [pid for pid in old.physical_ids if pid not in set(new.physical_ids)]


def removed_partition_rows(old: TableSchema, new: TableSchema) -> Column:
    """True for rows that lived in a partition that `new` no longer has (dropped or truncated)."""
    from pyspark.sql import functions as F

    condition = F.lit(False)
    for pid in _removed_partitions(old, new):
        condition = condition | partition_membership(old, pid)
    return condition


def partition_membership(schema: TableSchema, physical_id: int) -> Column:
    """A condition true for rows of the partition `physical_id` (RANGE/LIST on a column, HASH on an int)."""
    from pyspark.sql import functions as F

    info = schema.table_info.get("partition") or {}
    kind = int(info.get("type", 0))
    definitions: Sequence[Mapping[str, Any]] = info.get("definitions") or []
    index = next((i for i, d in enumerate(definitions) if int(d["id"]) == physical_id), None)
    expr = _partition_column(schema, info)
    if index is None or expr is None:
        raise InputError(
            f"table {schema.schema_name}.{schema.name}: cannot tell which rows are in partition "
            f"{physical_id} (partition expression {info.get('expr')!r} is not a plain column)"
        )
    column = F.col(quote(expr))
    # NULL sorts below every value: the first RANGE partition holds it, HASH puts it in partition 0, a
    # LIST partition only if it lists NULL (MySQL's rules, which TiDB follows).
    if kind == RANGE:
        upper = definitions[index].get("less_than") or ["MAXVALUE"]
        lower = definitions[index - 1].get("less_than") if index > 0 else None
        condition = F.lit(True)
        if upper[0].upper() != "MAXVALUE":
            condition = condition & (column < F.lit(upper[0].strip("'")))
        if lower:
            condition = condition & (column >= F.lit(lower[0].strip("'")))
        return F.when(column.isNull(), F.lit(index == 0)).otherwise(condition)
    if kind == HASH:
        hashed = F.pmod(column.cast("bigint"), F.lit(len(definitions))) == index
        return F.when(column.isNull(), F.lit(index == 0)).otherwise(hashed)
    if kind == LIST:
        values = [v.strip("'") for group in definitions[index].get("in_values") or [] for v in group]
        takes_null = any(v.upper() == "NULL" for v in values)
        listed = column.isin([v for v in values if v.upper() != "NULL"])
        return F.when(column.isNull(), F.lit(takes_null)).otherwise(listed)
    raise InputError(f"table {schema.schema_name}.{schema.name}: partition type {kind} is not supported")


def _partition_column(schema: TableSchema, info: Mapping[str, Any]) -> str | None:
    columns = info.get("columns") or []
    if len(columns) == 1:
        name = columns[0].get("O") if isinstance(columns[0], Mapping) else columns[0]
        return str(name)
    expr = str(info.get("expr") or "").strip().strip("`")
    return expr if expr in schema.by_name else None


def apply_ddl_step(
    spark: SparkSession,
    warehouse: str,
    before: SchemaVersion,
    after: SchemaVersion,
    *,
    app_id: str,
    metadata: Mapping[str, Any],
    identity: RowIdentity = RowIdentity.HANDLE,
    layout: TableLayout | None = None,
) -> str | None:
    """Apply the step from `before` to `after`, tagged with `after`'s finished ts; the table's path after it
    (None: dropped). A table the step creates (CREATE TABLE, a rename's new path) gets `layout`, as one
    the merge creates would. Idempotent: a rerun finds the commit recorded, or the rename already done."""
    ts = after.finished_ts
    old, new = before.schema, after.schema
    if new is None:
        if old is not None:
            fs.delete(spark, conventions.table_path(warehouse, old.schema_name, old.name))
        return None
    new_path = conventions.table_path(warehouse, new.schema_name, new.name)
    if old is None:
        create_table(spark, new_path, new, identity, layout)
        sink.commit(spark, new_path, sink.Advance(), sink.Txn(app_id, ts, metadata))
        return new_path
    old_path = conventions.table_path(warehouse, old.schema_name, old.name)
    if not delta.is_delta_table(spark, old_path):
        return new_path  # a crashed rename already moved it: the new path carries the step
    truncated = new.table_id != old.table_id and not new.partition_names and after.job_type not in ROW_KEEPING

    def new_rows(current: DataFrame) -> DataFrame:
        rows = current if new_path == old_path else delta.read_rows(spark, old_path)
        return rows.limit(0) if truncated else migrate_rows(rows, old, new, after.job_type)

    fault_point("ddl.rewrite")
    overwrite_table(
        spark, new_path, new_rows, new, app_id=app_id, txn_version=ts, metadata=metadata,
        identity=identity, layout=layout,
    )  # fmt: skip
    if new_path != old_path:
        fault_point("ddl.rename")
        fs.delete(spark, old_path)
    return new_path


def finish_interrupted_rename(
    spark: SparkSession, warehouse: str, before: SchemaVersion, after: SchemaVersion, *, app_id: str
) -> None:
    """Remove the old path a run killed inside a rename left behind (`ddl.rename`: new path committed,
    old one not yet deleted). The new path carries the step, so the rerun skips it and would keep both.
    The old path goes only while our commits in it stop below the rename: a table created later under
    the old name records versions above the rename's ts and stays."""
    old, new = before.schema, after.schema
    if old is None or new is None:
        return
    old_path = conventions.table_path(warehouse, old.schema_name, old.name)
    if old_path == conventions.table_path(warehouse, new.schema_name, new.name):
        return
    if not delta.is_delta_table(spark, old_path):
        return
    recorded = delta.recorded_txn_version(spark, old_path, app_id)
    if recorded is not None and recorded < after.finished_ts:
        fs.delete(spark, old_path)
