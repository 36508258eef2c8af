"""The simulated cluster's shared state, and the consumer's view of a stored row.

``logical_row`` is the model's answer to "what does a correct consumer hold for this key": decode the
stored value with the schema done at ``commit_ts - 1`` (absent columns filled as TiCDC fills them), then
apply every later finished DDL up to the version wanted. The physical column map the writer produced is
the ground truth; the codec is only asked to read back values whose map is no longer kept.
"""

from __future__ import annotations

import pickle
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from backfill.codec import decode_row
from tidbsim.capture import Capture, Row
from tidbsim.catalog import Catalog, IdAllocator, decode_phys
from tidbsim.changelog import ChangeLog
from tidbsim.config import SimulationConfig
from tidbsim.regions import RegionMap
from tidbsim.store import Store, Version
from tidbsim.tso import Oracle


class OpLog:
    """Logical changes in commit-ts order, spooled to disk for the MariaDB applier (bounded memory).

    Records: ``(ts, "put", db, table, {column: value})``, ``(ts, "delete", db, table, {pk column: value})``,
    ``(ts, "ddl", db, table, [sql, ...])``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: BinaryIO | None = path.open("wb")
        self._pickler = pickle.Pickler(self._f, protocol=pickle.HIGHEST_PROTOCOL)
        self.count = 0

    def add(self, record: tuple[Any, ...]) -> None:
        self._pickler.dump(record)
        self.count += 1
        if self.count % 10_000 == 0:
            self._pickler.clear_memo()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def read(self) -> Iterator[tuple[Any, ...]]:
        with self.path.open("rb") as f:
            up = pickle.Unpickler(f)
            while True:
                try:
                    yield up.load()
                except EOFError:
                    return


@dataclass
class World:
    cfg: SimulationConfig
    rng: random.Random
    tso: Oracle = field(default_factory=Oracle)
    store: Store = field(default_factory=Store)
    catalog: Catalog = field(default_factory=Catalog)
    regions: RegionMap = field(default_factory=RegionMap)
    ids: IdAllocator = field(default_factory=IdAllocator)
    stats: Counter[str] = field(default_factory=Counter)
    capture: Capture | None = None
    oplog: OpLog | None = None
    changes: ChangeLog | None = None
    tick: int = 0
    db_ids: dict[str, int] = field(default_factory=dict)
    epoch: Counter[int] = field(default_factory=Counter)
    open_epochs: dict[int, Counter[int]] = field(default_factory=dict)
    frozen_uids: set[int] = field(default_factory=set)
    frozen_pids: set[int] = field(default_factory=set)
    long_uids: Counter[int] = field(default_factory=Counter)
    ddl_uids: set[int] = field(default_factory=set)
    next_uid: int = 1
    key_bounds: dict[int, tuple[int, int]] = field(default_factory=dict)
    """uid -> [lo, hi): the integer keys a non-partitioned table inserts (the normal table of an EXCHANGE
    PARTITION keeps to its partition's range, which TiDB validates)."""
    handovers: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    """pid -> (ts, from uid, to uid): an EXCHANGE PARTITION gave the physical id to another table at ts."""

    def emit(self, key: bytes, row: Row) -> None:
        """A change TiKV applied: counted, and forwarded to the running capture if its region listens."""
        if self.capture is not None and self.capture.realtime(key, row):
            self.stats[f"realtime_{row[0].lower()}"] += 1

    def open_txn(self, uid: int) -> int:
        e = self.epoch[uid]
        self.open_epochs.setdefault(uid, Counter())[e] += 1
        return e

    def close_txn(self, uid: int, epoch: int) -> None:
        c = self.open_epochs[uid]
        c[epoch] -= 1
        if c[epoch] <= 0:
            del c[epoch]

    def oldest_open_epoch(self, uid: int) -> int | None:
        c = self.open_epochs.get(uid)
        return min(c) if c else None

    def logical_row(self, uid: int, pid: int, key: bytes, v: Version, to_index: int) -> dict[int, Any] | None:
        """Column id -> value a consumer holds for version ``v`` once DDLs up to entry ``to_index`` apply;
        None when the consumer drops the row (its physical id is not in the schema at commit_ts - 1)."""
        cat = self.catalog
        if v.origin is not None:
            pid, key, v = v.origin
        # An exchanged id: the row was written by the table that owned the id then, and follows that
        # table's DDLs up to the handover, then the next owner's (TiDB exchanges only tables whose column
        # ids agree, so the values carry over as they are).
        until = cat.finished_ts(uid, to_index)
        hops = [h for h in self.handovers.get(pid, ()) if v.commit_ts - 1 < h[0] <= until]
        writer = hops[0][1] if hops else uid
        i = cat.entry_index(writer, v.commit_ts - 1)
        at = cat.version_at(writer, v.commit_ts - 1)
        if at is None or pid not in at.physical_ids:
            return None
        if (phys := v.phys) is not None:  # unpacked once: each read makes a fresh copy
            row = decode_phys(at, phys)
        else:
            decoded = decode_row(at.schema, key, v.value)
            row = {c.id: decoded[c.name] for c in at.schema.columns}
        for ts, frm, to in hops:
            cat.carry(frm, row, i, cat.entry_index(frm, ts))
            i = cat.entry_index(to, ts)
        cat.carry(uid, row, i, to_index)
        return row
