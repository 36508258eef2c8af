"""The row changes and DDLs TiCDC would see, in commit-ts order, spooled to disk (bounded memory).

TiCDC mounts each committed key change with the schema valid at ``commit_ts - 1`` (the done version when
the transaction commits) and emits it with the row before it (old value) and after it; DDLs come at
their finished ts. ``World.changes`` records exactly that while the simulation runs, when
``SimulationConfig.ticdc_changelog`` asks for it; :mod:`backfill.simulate.kafka` turns the log into the
messages a changefeed publishes. Records (pickled, one after another):

- ``("schema", key, db, table_info)``: a table version, written before the first row that uses it;
- ``("row", commit_ts, db, table, key, physical_id, new, old)``: ``new``/``old`` map column names to
  values (codec value domain, ``_tidb_rowid`` included for tables without a clustered key); ``new`` is
  None for a delete, ``old`` None for an insert; ``physical_id`` is the partition id (None unpartitioned);
- ``("ddl", finished_ts, db, table, query, action_type)``.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from backfill.codec import decode_record_key
from backfill.codec.schema import ROWID_NAME

if TYPE_CHECKING:
    from backfill.simulate.tables import TableVersion
    from backfill.simulate.world import World

CHANGELOG_PATH = Path("ticdc") / "changes.pkl"
MEMO_RECORDS = 10_000  # the pickle memo is cleared after this many records: reader and writer alike


class ChangeLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: BinaryIO | None = path.open("wb")
        self._pickler = pickle.Pickler(self._f, protocol=pickle.HIGHEST_PROTOCOL)
        self._schemas: set[tuple[int, int]] = set()
        self.count = 0

    def _add(self, record: tuple[Any, ...]) -> None:
        self._pickler.dump(record)
        self.count += 1
        if self.count % MEMO_RECORDS == 0:
            self._pickler.clear_memo()

    def row(
        self, world: World, commit_ts: int, version: TableVersion, pid: int, key: bytes, put: bool, phys: Any
    ) -> None:
        """One key change of a committing transaction (called before the store holds the new version)."""
        from backfill.simulate.world import decode_phys

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

    def ddl(self, finished_ts: int, db: str, table: str, query: str, action: int) -> None:
        self._add(("ddl", finished_ts, db, table, query, action))

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def read_changelog(path: Path) -> Iterator[tuple[Any, ...]]:
    with path.open("rb") as f:
        count = 0
        while True:
            if count % MEMO_RECORDS == 0:  # the writer cleared its memo here: so must the reader
                up = pickle.Unpickler(f)
            try:
                yield up.load()
            except EOFError:
                return
            count += 1
