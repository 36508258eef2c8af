"""EXCHANGE PARTITION: a partition's rows and a normal table's rows change tables, with no row events.

TiDB swaps ids (``onExchangeTablePartition``): the normal table nt takes the partition p's physical id, p
takes nt's old id, and the data stays under its id. At the job's finished ts T the Delta tables follow:
nt's new rows are the partitioned table pt's rows that lie in p (found from p's definition), pt's new rows
are pt without them plus nt's old rows. Each table's step is one tagged commit at T that reads the other
table as it stood before T from a pinned Delta version (the newest commit our transaction tags put below
T), so a run killed between the two commits is finished by the rerun, which does only the step still
missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backfill.apply.ddl import partition_membership
from backfill.apply.merge import overwrite_table, quote
from backfill.codec import SchemaVersion, TableSchema
from backfill.codec.history import EXCHANGE_PARTITION
from tidelake import conventions, delta
from tidelake.errors import InputError
from tidelake.faults import fault_point

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from backfill.tables import TrackedTable


@dataclass(frozen=True)
class Exchange:
    """One table's side of an EXCHANGE PARTITION job in the window."""

    job_id: int
    finished_ts: int
    partner: int  # index of the other table in the window
    partner_before: TableSchema  # the other table's schema just before the job


def exchanges(
    tables: Sequence[TrackedTable], floors: Sequence[int], resolved_ts: int
) -> dict[tuple[int, int], Exchange]:
    """(table index, job id) -> the exchange it takes part in, for every EXCHANGE PARTITION job the window
    applies to a table (finished above its checkpoint, at or below the resolved ts).

    Refuses (InputError) a job whose other table the run does not track, and a partition whose rows
    cannot be told apart (an expression other than a plain column), before anything is committed.
    """
    sides: dict[int, list[tuple[int, SchemaVersion, SchemaVersion]]] = {}
    for index, table in enumerate(tables):
        for before, after in zip(table.versions, table.versions[1:], strict=False):
            if after.job_type == EXCHANGE_PARTITION and after.job_id is not None:
                sides.setdefault(after.job_id, []).append((index, before, after))
    found: dict[tuple[int, int], Exchange] = {}
    for job_id, both in sides.items():
        index, before, after = both[0]
        ts = after.finished_ts
        if not any(floors[i] < ts <= resolved_ts for i, _, _ in both):
            continue
        if len(both) != 2 or before.schema is None or both[1][1].schema is None:
            label = " and ".join(tables[i].label for i, _, _ in both)
            raise InputError(
                f"table {label}: DDL job {job_id} (EXCHANGE PARTITION, finished at ts {ts}: "
                f"{after.query or 'no query text'}) swaps rows with a table this job does not track; "
                "track both tables (the partitioned one and the normal one) in one job"
            )
        (i, i_before, _), (j, j_before, _) = both
        assert i_before.schema is not None and j_before.schema is not None
        partitioned = i_before.schema if i_before.schema.partition_names else j_before.schema
        normal = j_before.schema if partitioned is i_before.schema else i_before.schema
        exchanged = exchanged_partition(both)
        if partitioned.pk_kind == "rowid":
            raise InputError(
                f"DDL job {job_id} (EXCHANGE PARTITION, finished at ts {ts}) between "
                f"{partitioned.schema_name}.{partitioned.name} and {normal.schema_name}.{normal.name}: the "
                "tables have no clustered primary key, so their rows are told apart by _tidb_rowid, which the "
                "exchange may duplicate within the partitioned table (pingcap/tidb#65067); apply it to both "
                "Delta tables by hand and restart from a checkpoint after it"
            )
        check_membership(partitioned, exchanged, job_id, normal)
        found[(i, job_id)] = Exchange(job_id, ts, j, j_before.schema)
        found[(j, job_id)] = Exchange(job_id, ts, i, i_before.schema)
    return found


def exchanged_partition(both: Sequence[tuple[int, SchemaVersion, SchemaVersion]]) -> int:
    """The partition id the job exchanged: the normal table's id after it."""
    for _, before, after in both:
        if before.schema is not None and after.schema is not None and not before.schema.partition_names:
            return after.schema.table_id
    raise InputError(f"DDL job {both[0][2].job_id} (EXCHANGE PARTITION) involves no non-partitioned table")


def check_membership(partitioned: TableSchema, pid: int, job_id: int, normal: TableSchema) -> None:
    """Stop (InputError naming the job and both tables) unless rows of partition `pid` can be found."""
    try:
        partition_membership(partitioned, pid)
    except InputError as exc:
        raise InputError(
            f"DDL job {job_id} (EXCHANGE PARTITION) between {partitioned.schema_name}.{partitioned.name} and "
            f"{normal.schema_name}.{normal.name}: {exc}"
        ) from None


def rows_in_partition(schema: TableSchema, pid: int) -> Column:
    """True for rows of partition `pid`, never NULL (a row either moves or stays)."""
    from pyspark.sql import functions as F

    return F.coalesce(partition_membership(schema, pid), F.lit(False))


def apply_exchange_step(
    spark: SparkSession,
    warehouse: str,
    before: SchemaVersion,
    after: SchemaVersion,
    exchange: Exchange,
    *,
    app_id: str,
    metadata: Mapping[str, Any],
) -> str:
    """This table's side of the exchange, tagged with the job's finished ts; its path (unchanged)."""
    ts = after.finished_ts
    old, new = before.schema, after.schema
    assert old is not None and new is not None
    path = conventions.table_path(warehouse, old.schema_name, old.name)
    recorded = delta.recorded_txn_version(spark, path, app_id)
    if recorded is not None and recorded >= ts:
        return path  # this side is committed (a rerun after a kill between the two sides)
    other = exchange.partner_before
    other_path = conventions.table_path(warehouse, other.schema_name, other.name)
    if not delta.is_delta_table(spark, other_path):
        raise InputError(
            f"DDL job {exchange.job_id} (EXCHANGE PARTITION): the Delta table {other_path} of "
            f"{other.schema_name}.{other.name} is missing; its rows before ts {ts} cannot be read"
        )
    pinned = delta.version_before_txn(spark, other_path, app_id, ts)
    theirs = spark.read.format("delta").option("versionAsOf", pinned).load(other_path)

    def new_rows(ours: DataFrame) -> DataFrame:
        if old.partition_names:  # we are pt: p's rows leave, nt's rows come in
            pid = next(p for p in old.physical_ids if p not in set(new.physical_ids))
            return ours.filter(~rows_in_partition(old, pid)).unionByName(aligned(theirs, ours))
        return aligned(theirs.filter(rows_in_partition(other, new.table_id)), ours)  # we are nt: p's rows

    overwrite_table(spark, path, new_rows, new, app_id=app_id, txn_version=ts, metadata=metadata)
    fault_point("ddl.exchange")  # first reached between the two sides' commits
    return path


def aligned(rows: DataFrame, like: DataFrame) -> DataFrame:
    """`rows` with `like`'s columns, by name and cast to its types (TiDB exchanges only tables whose
    columns agree in name, type and order)."""
    from pyspark.sql import functions as F

    have = {name.lower(): name for name in rows.columns}
    missing = [f.name for f in like.schema.fields if f.name.lower() not in have]
    if missing:
        raise InputError(f"EXCHANGE PARTITION: the other table lacks columns {', '.join(missing)}")
    return rows.select(
        *[F.col(quote(have[f.name.lower()])).cast(f.dataType).alias(f.name) for f in like.schema.fields]
    )
