"""kv-scan: which upstream tables a run tracks and every schema version they pass through in its window.

Built from the chain's captures: `schema/tables.jsonl` of the first capture (valid at its checkpoint ts)
and the done DDL jobs of all of them (`schema/ddl_jobs.jsonl`; a job delivered twice counts once). Each
table is followed through renames and truncates by the codec's `SchemaHistory`; tables created in the
window get a history of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backfill.codec import CodecError, SchemaHistory
from backfill.codec.history import CREATE_TABLE, CREATE_TABLES, job_finished_ts
from backfill.sources.kvscan.format import TableDoc
from backfill.tables import TrackedTable, table_matches
from tidelake.errors import InputError


@dataclass(frozen=True)
class Catalog:
    tables: tuple[TrackedTable, ...]

    def owner(self, physical_id: int) -> TrackedTable | None:
        for table in self.tables:
            if physical_id in table.physical_ids():
                return table
        return None


def build_catalog(
    tables: Iterable[TableDoc],
    jobs: Iterable[Mapping[str, Any]],
    initial_ts: int,
    patterns: Sequence[str],
    where: str,
) -> Catalog:
    """Histories for the tables at `initial_ts` and those created after it, filtered by `patterns`."""
    jobs = list(jobs)
    tracked: list[TrackedTable] = []
    try:
        for doc in tables:
            info = doc.table_info
            if info.get("view") or info.get("sequence"):
                continue  # not a table: no rows
            try:
                history = SchemaHistory(info, jobs, schema_name=doc.schema_name, initial_ts=initial_ts)
            except CodecError as exc:  # name the table whose TableInfo (or DDL history) is broken
                raise InputError(
                    f"{where}: table {doc.schema_name}.{_name(info)} (id {info.get('id', '?')}): {exc.reason}"
                ) from None
            tracked.append(TrackedTable(tuple(history.versions), initial_ts))
        known = {(t.names()[0]) for t in tracked}
        for job in sorted(jobs, key=job_finished_ts):
            if (
                int(job.get("type", 0)) not in (CREATE_TABLE, CREATE_TABLES)
                or job_finished_ts(job) <= initial_ts
            ):
                continue
            for info in _job_table_infos(job):
                db, name = str(job.get("schema_name") or ""), _name(info)
                if (db, name) in known and not _dropped_before(tracked, db, name, job_finished_ts(job)):
                    continue
                history = SchemaHistory(None, jobs, schema_name=db, table_name=name, initial_ts=initial_ts)
                if len(history.versions) > 1:
                    tracked.append(TrackedTable(tuple(history.versions), job_finished_ts(job)))
                    known.add((db, name))
    except CodecError as exc:
        raise InputError(f"{where}: {exc}") from None
    selected = [t for t in tracked if any(table_matches(patterns, db, n) for db, n in t.names())]
    return Catalog(tuple(selected))


def _job_table_infos(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    binlog = job.get("binlog") or {}
    return [i for i in [binlog.get("TableInfo"), *(binlog.get("MultipleTableInfos") or ())] if i]


def _name(info: Mapping[str, Any]) -> str:
    name = info.get("name")
    return str(name.get("O") if isinstance(name, Mapping) else name)


def _dropped_before(tracked: Sequence[TrackedTable], db: str, name: str, ts: int) -> bool:
    """A table of that name existed but was gone (dropped or renamed away) by `ts`."""
    for table in tracked:
        if (db, name) in table.names():
            schema = table.schema_at(ts)
            if schema is None or (schema.schema_name, schema.name) != (db, name):
                return True
    return False
