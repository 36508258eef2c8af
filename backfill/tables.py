"""The tables a run tracks, each with every schema version it passes through in the window.

Sources build these (kv-scan from TableInfo + DDL jobs, the storage sink from its table-version schema
files, Kafka from DDL events); the apply stage walks them: the rows of one schema version form a segment,
and the step from one version to the next is a DDL barrier (docs/architecture.md "Words").
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from backfill.codec import SchemaVersion, TableSchema
from tidelake.conventions import ROWID


def table_matches(patterns: Sequence[str], db: str, table: str) -> bool:
    """True if `db.table` matches one of the `db.table` wildcard patterns (case-insensitive)."""
    name = f"{db}.{table}".lower()
    return any(fnmatch.fnmatchcase(name, p.lower()) for p in patterns)


@dataclass(frozen=True)
class TrackedTable:
    """One upstream table through the window: its schema versions, oldest first.

    `versions[0]` is valid from `start_ts` (the capture's checkpoint, or the CREATE TABLE's finished ts);
    each later version starts at its DDL's finished ts. A version with `schema` None means no table (not
    created yet, or dropped).
    """

    versions: tuple[SchemaVersion, ...]
    start_ts: int

    def schema_at(self, ts: int) -> TableSchema | None:
        """The schema valid at `ts`: the newest version with finished ts at or below it."""
        found = self.versions[0]
        for version in self.versions:
            if version.finished_ts > ts:
                break
            found = version
        return found.schema

    def segment_bounds(self) -> list[int]:
        """The finished ts of the later versions: a change committed at c belongs to segment
        `bisect_left(bounds, c)` (a row uses the newest version with finished ts <= c - 1)."""
        return [v.finished_ts for v in self.versions[1:]]

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
        """Every physical id (table or partition) the table has in the window."""
        return frozenset(p for v in self.versions if v.schema for p in v.schema.physical_ids)

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

    def retired_at(self, physical_id: int) -> int | None:
        """The finished ts of the DDL after which `physical_id` never holds rows of this table again
        (truncate, drop, partition DDLs), or None while it is live at the end of the window."""
        intervals = self.live_intervals(physical_id)
        return intervals[-1][1] if intervals else None


class RowIdentity(enum.Enum):
    """How a table's rows are told apart when a window's changes are merged into it.

    kv-scan always knows TiDB's handle. TiCDC's outputs do not carry `_tidb_rowid` (unless the CSV sink
    writes the handle key), so a table without a clustered primary key is merged by its primary key
    columns when it has one, and otherwise as a multiset of whole rows (TiCDC's `force-replicate`).
    """

    HANDLE = "handle"  # the int or clustered primary key, or `_tidb_rowid`
    PRIMARY_KEY = "primary-key"  # the primary key columns, clustered or not
    WHOLE_ROW = "whole-row"  # no key: one copy per change

    def columns(self, schema: TableSchema) -> tuple[str, ...]:
        """The merge key's columns in `schema` (empty for a multiset)."""
        if self is RowIdentity.HANDLE:
            return (ROWID,) if schema.pk_kind == "rowid" else schema.pk_columns
        if self is RowIdentity.PRIMARY_KEY:
            if schema.pk_kind != "rowid":
                return schema.pk_columns
            return tuple(c.name for c in schema.columns if c.is_primary_key)
        return ()


def identity_without_handle(schema: TableSchema) -> RowIdentity:
    """The identity of a table whose changes carry no `_tidb_rowid`: its primary key, or the whole row."""
    return RowIdentity.PRIMARY_KEY if RowIdentity.PRIMARY_KEY.columns(schema) else RowIdentity.WHOLE_ROW
