"""The upstream schema through time: every done table version with its finish ts, and what each DDL
does to rows that already exist (the consumer's view, TiCDC's "done schemas only" model, reference §4.3).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from backfill.codec import ZERO_TIME
from backfill.codec.values import ZERO_DATE, fill_value
from tidbsim.coltypes import SqlType, convert
from tidbsim.table_versions import TableVersion


class IdAllocator:
    """TiDB's global id allocator: databases, tables, partitions and DDL jobs share one sequence."""

    def __init__(self, start: int = 100) -> None:
        self._next = start

    def take(self, n: int = 1) -> list[int]:
        ids = list(range(self._next, self._next + n))
        self._next += n
        return ids


def fill_for(version: TableVersion, cid: int) -> Any:
    """The value a consumer gives a column absent from a row (origin default, NULL, zero value)."""
    col = version.schema.by_id[cid]
    v = fill_value(col)
    return None if v is ZERO_DATE else v


@dataclass(frozen=True)
class Transform:
    """What a finished DDL does to a decoded row of the version before it (keyed by column id).

    ``add``: the new column takes its origin default; ``drop``: the column goes; ``remap``: a reorganising
    MODIFY COLUMN moves the value to the new column id, converted. Renames and metadata-only type changes
    keep ids and values, so they need nothing (``none``).
    """

    kind: str = "none"
    col_id: int = 0
    new_id: int = 0
    value: Any = None
    old_type: SqlType | None = None
    new_type: SqlType | None = None

    def apply(self, row: dict[int, Any]) -> None:
        if self.kind == "add":
            row[self.col_id] = self.value
        elif self.kind == "drop":
            row.pop(self.col_id, None)
        elif self.kind == "remap":
            assert self.old_type is not None and self.new_type is not None
            row[self.new_id] = convert(row.pop(self.col_id, None), self.old_type, self.new_type)


NO_CHANGE = Transform()


@dataclass(frozen=True)
class Entry:
    finished_ts: int
    version: TableVersion | None  # None: dropped
    transform: Transform


class Catalog:
    """Done versions per table uid, in finish-ts order, plus the version writers use right now."""

    def __init__(self) -> None:
        self._history: dict[int, list[Entry]] = {}
        self._ts: dict[int, list[int]] = {}
        self.done: dict[int, TableVersion] = {}
        self.writing: dict[int, TableVersion] = {}
        self.uid_of_pid: dict[int, int] = {}
        self.schema_version = 10

    def next_schema_version(self) -> int:
        self.schema_version += 1
        return self.schema_version

    def finish(
        self, uid: int, finished_ts: int, version: TableVersion | None, transform: Transform = NO_CHANGE
    ) -> None:
        """A DDL (or the initial CREATE TABLE) on ``uid`` is done at ``finished_ts``."""
        ts = self._ts.setdefault(uid, [])
        if ts and finished_ts <= ts[-1]:
            raise ValueError(f"finish ts {finished_ts} of table {uid} is not after {ts[-1]}")
        self._history.setdefault(uid, []).append(Entry(finished_ts, version, transform))
        ts.append(finished_ts)
        if version is None:
            self.done.pop(uid, None)
            self.writing.pop(uid, None)
            return
        self.done[uid] = version
        self.writing[uid] = version
        for pid in version.physical_ids:
            self.uid_of_pid[pid] = uid
        self.uid_of_pid[version.table_id] = uid

    def entry_index(self, uid: int, ts: int) -> int:
        """Index of the newest entry of ``uid`` with ``finished_ts <= ts`` (-1: none yet)."""
        return bisect.bisect_right(self._ts.get(uid, ()), ts) - 1

    def finished_ts(self, uid: int, index: int) -> int:
        """The finish ts of entry ``index`` of ``uid`` (-1: before any)."""
        return self._ts[uid][index] if index >= 0 else -1

    def latest_index(self, uid: int) -> int:
        return len(self._ts[uid]) - 1

    def version_at(self, uid: int, ts: int) -> TableVersion | None:
        i = self.entry_index(uid, ts)
        return self._history[uid][i].version if i >= 0 else None

    def tables_at(self, ts: int) -> Iterator[TableVersion]:
        """Every table live at ``ts``, in uid (creation) order."""
        for uid in sorted(self._history):
            v = self.version_at(uid, ts)
            if v is not None:
                yield v

    def carry(self, uid: int, row: dict[int, Any], from_index: int, to_index: int) -> None:
        """Apply the DDLs after entry ``from_index`` up to ``to_index`` to a decoded row."""
        for entry in self._history[uid][from_index + 1 : to_index + 1]:
            entry.transform.apply(row)


def decode_phys(version: TableVersion, phys: dict[int, Any]) -> dict[int, Any]:
    """A stored column map read with ``version``: its public columns, absent ones filled."""
    row: dict[int, Any] = {}
    for col in version.schema.columns:
        if col.id in phys:
            v = phys[col.id]
            row[col.id] = None if v is ZERO_TIME else v
        else:
            row[col.id] = fill_for(version, col.id)
    return row
