"""Which upstream tables a run tracks and every schema version they pass through in its window.

Built from the chain's captures: `schema/tables.jsonl` of the first capture (valid at its checkpoint ts)
and the done DDL jobs of all of them (`schema/ddl_jobs.jsonl`; a job delivered twice counts once). Each
table is followed through renames and truncates by the codec's `SchemaHistory`; tables created in the
window get a history of their own.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backfill.codec import CodecError, SchemaHistory, SchemaVersion, TableSchema
from backfill.codec.history import CREATE_TABLE, CREATE_TABLES, job_finished_ts
from tidelake.errors import InputError


@dataclass(frozen=True)
class TableDoc:
    """One line of tables.jsonl."""

    schema_name: str
    table_info: Mapping[str, Any]


def parse_tables_jsonl(text: str, where: str) -> list[TableDoc]:
    docs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            docs.append(TableDoc(str(doc["schema_name"]), doc["table_info"]))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(
                f"{where}: line {number}: not a {{schema_name, table_info}} object ({exc})"
            ) from None
    return docs


def parse_ddl_jobs_jsonl(text: str, where: str) -> list[Mapping[str, Any]]:
    jobs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            if not isinstance(job, dict) or "type" not in job:
                raise ValueError("no 'type'")
            jobs.append(job)
        except (json.JSONDecodeError, ValueError) as exc:
            raise InputError(f"{where}: line {number}: not a TiDB DDL job ({exc})") from None
    return jobs


@dataclass(frozen=True)
class TrackedTable:
    """One upstream table through the window: its history and where its rows come from."""

    history: SchemaHistory
    start_ts: int  # the checkpoint it starts from: the capture's, or its CREATE TABLE's finished ts

    @property
    def versions(self) -> list[SchemaVersion]:
        return self.history.versions

    def schema_at(self, ts: int) -> TableSchema | None:
        return self.history.version_at(ts).schema

    def names(self) -> list[tuple[str, str]]:
        """Every (db, table) name it has in the window, oldest first."""
        seen: list[tuple[str, str]] = []
        for version in self.versions:
            if version.schema is not None:
                name = (version.schema.schema_name or "", version.schema.name)
                if name not in seen:
                    seen.append(name)
        return seen

    @property
    def label(self) -> str:
        """`db.table`, with the last name too when the table was renamed in the window."""
        names = [f"{db}.{table}" for db, table in self.names()]
        return names[0] if len(names) == 1 else f"{names[0]} → {names[-1]}"

    def physical_ids(self) -> frozenset[int]:
        return self.history.all_physical_ids()

    def live_intervals(self, physical_id: int) -> list[tuple[int, int | None]]:
        """(after, until] commit-ts intervals in which rows of `physical_id` belong to this table."""
        intervals: list[tuple[int, int | None]] = []
        versions = self.versions
        for i, version in enumerate(versions):
            until = versions[i + 1].finished_ts if i + 1 < len(versions) else None
            live = version.schema is not None and physical_id in version.schema.physical_ids
            if live:
                if intervals and intervals[-1][1] == version.finished_ts:
                    intervals[-1] = (intervals[-1][0], until)
                else:
                    intervals.append((version.finished_ts, until))
        return intervals


@dataclass(frozen=True)
class Catalog:
    tables: tuple[TrackedTable, ...]

    def owner(self, physical_id: int) -> TrackedTable | None:
        for table in self.tables:
            if physical_id in table.physical_ids():
                return table
        return None


def table_matches(patterns: Sequence[str], db: str, table: str) -> bool:
    name = f"{db}.{table}".lower()
    return any(fnmatch.fnmatchcase(name, p.lower()) for p in patterns)


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
            history = SchemaHistory(info, jobs, schema_name=doc.schema_name, initial_ts=initial_ts)
            tracked.append(TrackedTable(history, initial_ts))
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
                    tracked.append(TrackedTable(history, job_finished_ts(job)))
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
