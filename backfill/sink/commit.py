"""One commit of a table's changes, tagged with the job's transaction id: `commit(spark, path, change, txn)`.

The contract (docs/architecture.md "The commit contract"): each commit records `(txn.app_id,
txn.version)` and carries `txn.metadata` as its commitInfo userMetadata; a rerun of a recorded version
commits nothing; a commit is all or nothing, so a killed run leaves no commit without our tag.

How each change commits:
- `Merge`: Delta's public MERGE, tagged through the session conf (`delta.merge_with_txn`).
- `Append`, `Advance`, `Rewrite`, `Replace`: through the table's own transaction
  (`tidelake.delta_internals`) where delta-spark is a verified version, else, and wherever that path
  declines a table (other column types, no file list in the checksum, partitioned or column-mapped
  tables, clustering a schema change would break), Delta's public writer tagged through the session conf.
  The public writers rebuild the table state before each commit: about a second per table (bench/NOTES.md
  "The Delta sink").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidelake import delta, delta_internals
from tidelake.sqlident import quote_ident as quote

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import DataFrame, SparkSession

OPTIMIZE_WRITE_OPTION = "optimizeWrite"  # a write option over the table's delta.autoOptimize.optimizeWrite


@dataclass(frozen=True)
class Txn:
    """The job's transaction id for one commit, and the userMetadata it carries."""

    app_id: str
    version: int
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Append:
    """Rows added to the table. `optimize_write` (None: as the table says) overrides the table's optimized
    writes for this commit only. `metadata_of_rows`, when given, makes the commit's userMetadata (in place
    of `txn.metadata`) from the number of rows appended: through the table's own transaction it is counted
    from the written files' statistics, so rows computed from their input are read once, not cached and
    counted before the write; Delta's public writer takes its metadata before it writes, so there the rows
    are cached and counted first."""

    rows: DataFrame
    optimize_write: bool | None = None
    metadata_of_rows: Callable[[int], Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Advance:
    """No rows: a commit that only records the transaction version (an idle table's checkpoint)."""


@dataclass(frozen=True)
class Merge:
    """A MERGE that `build` makes on the table, with `session_conf` set for it alone."""

    build: Callable[[DeltaTable], DeltaMergeBuilder]
    session_conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Rewrite:
    """The table's rows replaced with `new_rows(its rows)` (of the table's columns and types); its schema,
    properties and clustering stay."""

    new_rows: Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class Replace:
    """The table's rows replaced with `new_rows(its rows)`, its schema with theirs, and `properties` set (a
    DDL step)."""

    new_rows: Callable[[DataFrame], DataFrame]
    properties: Mapping[str, str] = field(default_factory=dict)


TableChange = Append | Advance | Merge | Rewrite | Replace


@dataclass(frozen=True)
class Committed:
    """What `commit` left: whether it committed (False: the table had the transaction version already),
    the table's version after it, and the commit's operation metrics (Delta's, as text) and userMetadata
    (as recorded: with the count of an `Append` with `metadata_of_rows`); both empty when nothing was
    committed."""

    committed: bool
    table_version: int
    metrics: Mapping[str, str] = field(default_factory=dict)
    user_metadata: Mapping[str, Any] = field(default_factory=dict)


def commit(spark: SparkSession, path: str, change: TableChange, txn: Txn) -> Committed:
    """Commit `change` to the Delta table at `path` (it exists) as one commit tagged `txn`."""
    if txn.version < 0:
        raise ValueError(f"transaction version must not be negative, got {txn.version}")
    if isinstance(change, Merge):
        done = delta.merge_with_txn(
            spark, path, change.build, app_id=txn.app_id, txn_version=txn.version, metadata=txn.metadata,
            session_conf=change.session_conf,
        )  # fmt: skip
        return _committed(spark, path, txn, None if done else False)
    version = _through_own_txn(spark, path, change, txn) if delta_internals.commits_usable(spark) else None
    if version is None:
        version = None if _through_public_writer(spark, path, change, txn) else False
    return _committed(spark, path, txn, version)


def _through_own_txn(spark: SparkSession, path: str, change: TableChange, txn: Txn) -> int | bool | None:
    """The commit through the table's own transaction: its version, False (recorded already), or None
    where this table needs Delta's public writer."""
    app_id, version, user_metadata = txn.app_id, txn.version, delta.metadata_json(txn.metadata)
    if isinstance(change, Append | Advance):
        return delta_internals.append_files(
            spark, path, change.rows if isinstance(change, Append) else None, app_id=app_id,
            txn_version=version, user_metadata=_counted_metadata(change) or user_metadata,
            options=_write_options(change),
        )  # fmt: skip
    if isinstance(change, Rewrite):
        return delta_internals.rewrite_files(
            spark, path, change.new_rows, app_id=app_id, txn_version=version, user_metadata=user_metadata
        )
    assert isinstance(change, Replace)
    return delta_internals.replace_files(
        spark, path, change.new_rows, properties=change.properties, app_id=app_id, txn_version=version,
        user_metadata=user_metadata,
    )  # fmt: skip


def _counted_metadata(change: Append | Advance) -> Callable[[int], str] | None:
    """The userMetadata text of an `Append` with `metadata_of_rows`, from the rows appended."""
    of_rows = change.metadata_of_rows if isinstance(change, Append) else None
    if of_rows is None:
        return None
    return lambda rows: delta.metadata_json(of_rows(rows))


def _write_options(change: Append | Advance) -> dict[str, str]:
    if isinstance(change, Append) and change.optimize_write is not None:
        return {OPTIMIZE_WRITE_OPTION: str(change.optimize_write).lower()}
    return {}


def _through_public_writer(spark: SparkSession, path: str, change: TableChange, txn: Txn) -> bool:
    """The commit through Delta's DataFrame writer (`commit_with_txn`: the recorded version checked first,
    a lost race tried again); False when the table has the transaction version already. The writer takes
    the tag as its options: it runs in the session of the rows, which need not be `spark`'s, whose conf
    `commit_with_txn` sets."""
    if isinstance(change, Append) and change.metadata_of_rows is not None:
        return _counted_first(spark, path, change, change.metadata_of_rows, txn)
    if isinstance(change, Replace):
        _set_properties_first(spark, path, change, txn)

    def write() -> None:
        if isinstance(change, Append | Advance):
            rows = change.rows if isinstance(change, Append) else _no_rows(spark, path)
            _tagged(rows, txn).options(**_write_options(change)).mode("append").save(path)
        elif isinstance(change, Rewrite):
            rows = change.new_rows(spark.read.format("delta").load(path))
            # `replaceWhere` true: a plain overwrite would drop the clustering columns
            _tagged(rows, txn).mode("overwrite").option("replaceWhere", "true").save(path)
        else:
            assert isinstance(change, Replace)
            rows = change.new_rows(spark.read.format("delta").load(path))
            _tagged(rows, txn).mode("overwrite").option("overwriteSchema", "true").save(path)

    return delta.commit_with_txn(
        spark, path, write, app_id=txn.app_id, txn_version=txn.version, metadata=txn.metadata
    )


def _counted_first(
    spark: SparkSession, path: str, change: Append, metadata_of_rows: Callable[[int], Mapping[str, Any]],
    txn: Txn,
) -> bool:  # fmt: skip
    """An `Append` with `metadata_of_rows` through Delta's public writer, which takes the userMetadata before
    it writes: the rows cached and counted first, then written from the cache."""
    rows = change.rows.persist()
    try:
        counted = Txn(txn.app_id, txn.version, metadata_of_rows(rows.count()))
        return _through_public_writer(spark, path, Append(rows, change.optimize_write), counted)
    finally:
        rows.unpersist()


def _tagged(rows: DataFrame, txn: Txn) -> Any:
    """A Delta DataFrameWriter for `rows` whose commit records `txn` and carries its userMetadata."""
    return (
        rows.write.format("delta")
        .option("txnAppId", txn.app_id)
        .option("txnVersion", str(txn.version))
        .option("userMetadata", delta.metadata_json(txn.metadata))
    )


def _no_rows(spark: SparkSession, path: str) -> DataFrame:
    """No rows, of the table's columns: Delta's writer commits them as a commit with only our tag."""
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(json.loads(delta_internals.snapshot(spark, path).schema().json()))
    return spark.createDataFrame([], schema)


def _set_properties_first(spark: SparkSession, path: str, change: Replace, txn: Txn) -> None:
    """Before Delta's overwrite of a DDL step, in a commit of their own: the properties the table lacks and
    the timestampNtz feature when the rows bring the table's first such column (an overwrite that brings
    the first one fails unless the feature is already there). A kill between the two commits leaves
    nothing that the rerun, which skips the recorded step, would have to finish. Only when something
    changes: each commit costs a second."""
    if (delta.recorded_txn_version(spark, path, txn.app_id) or -1) >= txn.version:
        return
    have = delta.table_configuration(spark, path)
    changed = {key: value for key, value in change.properties.items() if have.get(key) != value}
    rows = change.new_rows(spark.read.format("delta").load(path))
    if "timestamp_ntz" in rows.schema.simpleString() and "timestamp_ntz" not in delta.table_schema_string(
        spark, path
    ):
        changed[delta.TIMESTAMP_NTZ_FEATURE] = "supported"
    if changed:
        settings = ", ".join(f"'{key}' = '{value}'" for key, value in changed.items())
        with delta.commit_info(spark, dict(txn.metadata) | {"step": "properties"}):
            spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({settings})")


def _committed(spark: SparkSession, path: str, txn: Txn, version: int | bool | None) -> Committed:
    """`Committed` from a commit's version (False: none; None: committed, version not known), with the
    commit's metrics read from its log file."""
    if version is False:
        return Committed(False, delta.table_version(spark, path))
    if version is None or version is True:
        version = _tagged_version(spark, path, txn)
    info = delta.read_commit_info(spark, path, version) or {}
    metrics = info.get("operationMetrics") or {}
    user_metadata = delta.json_object(info.get("userMetadata")) or {}
    return Committed(True, version, {str(k): str(v) for k, v in metrics.items()}, user_metadata)


def _tagged_version(spark: SparkSession, path: str, txn: Txn) -> int:
    """The version of the newest commit tagged `txn` (another writer may have committed after it)."""
    latest = delta.table_version(spark, path)
    for version in range(latest, max(-1, latest - 10), -1):
        if delta.commit_txn_version(spark, path, version, txn.app_id) == txn.version:
            return version
    return latest
