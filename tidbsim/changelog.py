"""The row changes and DDLs TiCDC would see, in commit-ts order, spooled to disk (bounded memory).

TiCDC mounts each committed key change with the schema valid at ``commit_ts - 1`` (the done version when
the transaction commits) and emits it with the row before it (old value) and after it; DDLs come at
their finished ts. ``World.changes`` records exactly that while the simulation runs, when
``SimulationConfig.ticdc_changelog`` asks for it; :mod:`tidbsim.kafka` turns the log into the
messages a changefeed publishes. Records (pickled in lists of up to ``RECORDS_PER_PICKLE``, one list after
another; a log of single pickled records reads too):

- ``("schema", key, db, table_info)``: a table version, written before the first row that uses it;
- ``("row", commit_ts, db, table, key, physical_id, new, old)``: ``new``/``old`` map column names to
  values (codec value domain, ``_tidb_rowid`` included for tables without a clustered key); ``new`` is
  None for a delete, ``old`` None for an insert; ``physical_id`` is the partition id (None unpartitioned);
- ``("ddl", finished_ts, db, table, query, action_type, table_info)``: ``table_info`` is the table after
  the DDL (the dropped table for DROP TABLE; None for a database DDL, whose ``table`` is empty). The
  CREATE DATABASE / CREATE TABLE of the initial tables come first, at their creation ts (below the
  initial snapshot ts, where a changefeed usually starts).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from backfill.codec import decode_record_key
from backfill.codec.schema import ROWID_NAME
from tidbsim.catalog import decode_phys

if TYPE_CHECKING:
    from tidbsim.catalog import Catalog
    from tidbsim.store import Store, Version
    from tidbsim.table_versions import TableVersion


class RowHistory(Protocol):
    """What the log reads of the simulated cluster (`tidbsim.world.World`): the stored versions and the
    row a consumer holds for one of them."""

    catalog: Catalog
    store: Store

    def logical_row(
        self, uid: int, pid: int, key: bytes, v: Version, to_index: int
    ) -> dict[int, Any] | None: ...


CHANGELOG_PATH = Path("ticdc") / "changes.pkl"
RECORDS_PER_PICKLE = 256
"""Records per pickle: one ``pickle.load`` of many records costs a third of as many loads of one (and their
column names are pickled once), and a list this short keeps the memo small."""


class ChangeLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: BinaryIO | None = path.open("wb")
        self._schemas: set[tuple[int, int]] = set()
        self._pending: list[tuple[Any, ...]] = []
        self.count = 0

    def _add(self, record: tuple[Any, ...]) -> None:
        self._pending.append(record)
        self.count += 1
        if len(self._pending) >= RECORDS_PER_PICKLE:
            self._write()

    def _write(self) -> None:
        # One pickle per list, each with its own memo: a memo shared across pickles breaks once it is
        # cleared (protocol 4+ memoizes by position, and the reader's memo would not be cleared with it).
        assert self._f is not None
        if self._pending:
            self._f.write(pickle.dumps(self._pending, protocol=pickle.HIGHEST_PROTOCOL))
            self._pending = []

    def row(
        self,
        world: RowHistory,
        commit_ts: int,
        version: TableVersion,
        pid: int,
        key: bytes,
        put: bool,
        phys: Any,
    ) -> None:
        """One key change of a committing transaction (called before the store holds the new version)."""
        cat = world.catalog
        skey = (version.uid, cat.latest_index(version.uid))
        if skey not in self._schemas:
            self._schemas.add(skey)
            self._add(("schema", skey, version.db, version.table_info()))
        prev = world.store.latest(pid, key)
        old = None
        if prev is not None and prev.put:
            row = world.logical_row(version.uid, pid, key, prev, skey[1])
            if row is not None:
                old = self._named(version, row, key)
        new = self._named(version, decode_phys(version, phys), key) if put else None
        if new is None and old is None:
            return
        ptn = pid if version.partition is not None else None
        self._add(("row", commit_ts, version.db, version.name, skey, ptn, new, old))

    @staticmethod
    def _named(version: TableVersion, row: dict[int, Any], key: bytes) -> dict[str, Any]:
        named = {c.name: row[c.id] for c in version.schema.columns}
        if version.pk_kind == "rowid":
            named[ROWID_NAME] = decode_record_key(key).handle
        return named

    def ddl(
        self, finished_ts: int, db: str, table: str, query: str, action: int, info: dict[str, Any] | None
    ) -> None:
        self._add(("ddl", finished_ts, db, table, query, action, info))

    def close(self) -> None:
        if self._f is not None:
            self._write()
            self._f.close()
            self._f = None


def read_changelog(path: Path) -> Iterator[tuple[Any, ...]]:
    """Every record, in order."""
    for chunk in read_changelog_chunks(path):
        yield from chunk


def read_changelog_chunks(path: Path) -> Iterator[list[tuple[Any, ...]]]:
    """The records in the lists they were written in (a record alone: a list of one)."""
    with path.open("rb") as f:
        while True:
            try:
                loaded = pickle.load(f)
            except EOFError:
                return
            yield loaded if isinstance(loaded, list) else [loaded]
