"""Schema versions of one table over time, from its initial TableInfo and done DDL jobs (reference §4.3).

A row committed at ``c`` is decoded with the newest version whose DDL ``FinishedTS <= c - 1`` (TiCDC's
mounter uses ``GetSnapshot(commit_ts - 1)``: a row committed at the DDL's own finish ts still sees the old
schema). Jobs may arrive twice (overlapping scans) or out of order; versions are rebuilt in ts order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from backfill.codec.errors import CodecError
from backfill.codec.schema import TableSchema, _cistr

# DDL ActionType codes (pkg/meta/model/job.go)
CREATE_SCHEMA, DROP_SCHEMA, CREATE_TABLE, DROP_TABLE = 1, 2, 3, 4
ADD_COLUMN, DROP_COLUMN, TRUNCATE_TABLE, MODIFY_COLUMN, RENAME_TABLE = 5, 6, 11, 12, 14
ADD_PARTITION, DROP_PARTITION, TRUNCATE_PARTITION, EXCHANGE_PARTITION = 19, 20, 23, 42
RENAME_TABLES, CREATE_TABLES, MULTI_SCHEMA_CHANGE, REORGANIZE_PARTITION = 47, 60, 61, 64
RECOVER_TABLE_TYPES = (38, 39)  # recover table, flashback table: bring a dropped table back
JOB_DONE, JOB_SYNCED = 4, 6


@dataclass(frozen=True)
class SchemaVersion:
    """One version: valid for rows with ``commit_ts - 1 >= finished_ts``; ``schema`` None = no table."""

    finished_ts: int
    schema: TableSchema | None
    job_id: int | None = None
    job_type: int | None = None
    query: str | None = field(default=None, compare=False)  # the DDL's text, for messages


def job_finished_ts(job: Mapping[str, Any]) -> int:
    binlog = job.get("binlog") or {}
    ts = binlog.get("FinishedTS") or job.get("finished_ts") or 0
    return int(ts)


def exchanged_partition_id(job: Mapping[str, Any]) -> int | None:
    """The partition id of an EXCHANGE PARTITION job's arguments: JobVersion1 stores them as a list
    ``[partition id, pt schema id, pt table id, partition name, with validation]``, JobVersion2 as one
    ``ExchangeTablePartitionArgs`` object (``partition_id``, ...), possibly inside a one-element list."""
    args = job.get("raw_args")
    if isinstance(args, list) and args:
        args = args[0]
    if isinstance(args, Mapping):
        args = args.get("partition_id")
    if isinstance(args, bool) or not isinstance(args, int | str):
        return None
    try:
        return int(args)
    except ValueError:
        return None


class SchemaHistory:
    """Versions of one logical table (followed across rename, truncate, partition changes).

    ``initial`` is the TableInfo valid at ``initial_ts`` (the checkpoint), or None if the table is created
    inside the window (give ``schema_name``/``table_name`` so the CREATE TABLE job can be recognised).
    """

    def __init__(
        self,
        initial: Mapping[str, Any] | None,
        jobs: Iterable[Mapping[str, Any]] = (),
        *,
        schema_name: str | None = None,
        table_name: str | None = None,
        initial_ts: int = 0,
    ) -> None:
        if initial is None and not table_name:
            raise CodecError("SchemaHistory without an initial TableInfo needs table_name")
        self._initial = TableSchema.from_table_info(initial, schema_name=schema_name) if initial else None
        self._initial_ts = initial_ts
        self._schema_name = schema_name
        self._table_name = table_name or (self._initial.name if self._initial else None)
        self._jobs: dict[int, Mapping[str, Any]] = {}
        self._versions: list[SchemaVersion] | None = None
        for job in jobs:
            self.apply_ddl_job(job)

    # -------------------------------------------------------------- building

    def apply_ddl_job(self, job: Mapping[str, Any]) -> bool:
        """Record a DDL job; returns False (and ignores it) unless it is done and concerns this table."""
        if int(job.get("state", 0)) not in (JOB_DONE, JOB_SYNCED) or not job_finished_ts(job):
            return False
        job_id = int(job.get("id", -len(self._jobs) - 1))
        if job_id in self._jobs:
            return True
        self._jobs[job_id] = job
        before = self._versions
        self._versions = None
        if not any(v.job_id == job_id for v in self.versions):
            del self._jobs[job_id]
            self._versions = before
            return False
        return True

    @property
    def versions(self) -> list[SchemaVersion]:
        if self._versions is None:
            self._versions = self._build()
        return self._versions

    def _build(self) -> list[SchemaVersion]:
        current = self._initial
        names = (self._schema_name, self._table_name)
        versions = [SchemaVersion(self._initial_ts, current)]
        for job in sorted(self._jobs.values(), key=lambda j: (job_finished_ts(j), int(j.get("id", 0)))):
            new, applies, names = self._apply(current, names, job)
            if applies:
                current = new
                versions.append(
                    SchemaVersion(
                        job_finished_ts(job),
                        new,
                        int(job.get("id", 0)),
                        int(job.get("type", 0)),
                        str(job.get("query") or "") or None,
                    )
                )
        return versions

    def _apply(
        self, current: TableSchema | None, names: tuple[str | None, str | None], job: Mapping[str, Any]
    ) -> tuple[TableSchema | None, bool, tuple[str | None, str | None]]:
        jtype = int(job.get("type", 0))
        binlog = job.get("binlog") or {}
        infos = [i for i in [binlog.get("TableInfo"), *(binlog.get("MultipleTableInfos") or ())] if i]
        schema_name = job.get("schema_name") or names[0]
        if current is None:
            if jtype in (CREATE_TABLE, CREATE_TABLES, RECOVER_TABLE_TYPES[0], RECOVER_TABLE_TYPES[1]):
                for info in infos:
                    if _cistr(info.get("name")) == names[1] and (
                        names[0] is None or job.get("schema_name") in (None, names[0])
                    ):
                        return TableSchema.from_table_info(info, schema_name=schema_name), True, names
            return None, False, names
        ids = {current.table_id, *current.physical_ids}
        touches = int(job.get("table_id", -1)) in ids or any(
            int(i.get("id", -1)) == current.table_id for i in infos
        )
        if jtype == DROP_SCHEMA:
            touches = job.get("schema_name") == names[0] and names[0] is not None
            return (None, True, names) if touches else (current, False, names)
        if not touches:
            return current, False, names
        if jtype == DROP_TABLE:
            return None, True, names
        if jtype == EXCHANGE_PARTITION and not current.partition_names:
            # We are the normal table nt (job.table_id): it takes over the partition's physical id and keeps
            # its TableInfo otherwise (TiDB's onExchangeTablePartition swaps partDef.ID and nt.ID; the job's
            # TableInfo is the partitioned table's, TiCDC's snapshot re-creates nt under the partition id).
            partition_id = exchanged_partition_id(job)
            if partition_id is None:
                raise CodecError(
                    f"DDL job {job.get('id')} (EXCHANGE PARTITION) on table {current.table_id} names no "
                    f"partition id in raw_args {job.get('raw_args')!r}",
                    table_id=current.table_id,
                )
            info = dict(current.table_info)
            info["id"] = partition_id
            return TableSchema.from_table_info(info, schema_name=current.schema_name), True, names
        if jtype == TRUNCATE_TABLE:
            match = infos[0] if infos else None
        else:
            match = next((i for i in infos if int(i.get("id", -1)) == current.table_id), None)
            if match is None and len(infos) == 1 and int(job.get("table_id", -1)) in ids:
                match = infos[0]
        if match is None:
            raise CodecError(
                f"DDL job {job.get('id')} (type {jtype}) on table {current.table_id} "
                "carries no TableInfo for it",
                table_id=current.table_id,
            )
        new = TableSchema.from_table_info(match, schema_name=schema_name)
        return new, True, (schema_name, new.name)

    # -------------------------------------------------------------- lookups

    def version_at(self, ts: int) -> SchemaVersion:
        """The newest version with ``finished_ts <= ts``."""
        found = self.versions[0]
        for v in self.versions:
            if v.finished_ts <= ts:
                found = v
            else:
                break
        return found

    def version_for(self, commit_ts: int) -> TableSchema | None:
        """Schema to decode a row committed at ``commit_ts`` (newest with finished_ts <= commit_ts - 1)."""
        return self.version_at(commit_ts - 1).schema

    def live_physical_ids(self, ts: int) -> frozenset[int]:
        """Physical ids whose rows are valid at ``ts`` (rows of truncated/dropped ids are to be dropped)."""
        s = self.version_at(ts).schema
        return frozenset(s.physical_ids) if s else frozenset()

    def schema_for_row(self, physical_id: int, commit_ts: int) -> TableSchema | None:
        """Schema for a row of ``physical_id`` at ``commit_ts``; None if that id is not live then."""
        s = self.version_for(commit_ts)
        return s if s is not None and physical_id in s.physical_ids else None

    def logical_table_id(self, physical_id: int) -> int | None:
        """Logical table id of a physical (partition) id in any version, or None if it was never ours."""
        for v in reversed(self.versions):
            if v.schema is not None and physical_id in v.schema.physical_ids:
                return v.schema.table_id
        return None
