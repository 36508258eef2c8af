"""TiKV's MVCC view of the record keys: committed versions per key, locks, and GC.

Only what the CDC module can observe is kept: write records (PUT/DELETE versions with start and commit
ts), locks (prewrites, with pipelined-DML generation), and a monotonically increasing apply sequence so a
region snapshot sees exactly the writes applied before it (a commit ts alone cannot tell: secondaries of
a transaction are committed after its commit ts was taken).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

from backfill.simulate.packed import unpack_phys


class Lock:
    """A prewrite lock. Immutable: a new pipelined generation replaces the object."""

    __slots__ = ("generation", "old_value", "put", "start_ts", "txn", "value")

    def __init__(
        self, start_ts: int, put: bool, value: bytes, generation: int, old_value: bytes, txn: int
    ) -> None:
        self.start_ts = start_ts
        self.put = put
        self.value = value
        self.generation = generation
        self.old_value = old_value
        self.txn = txn


class Version:
    """A committed write. ``phys`` (column id -> value actually stored) is kept for the newest version of
    a key only; older versions are read back through the codec when needed. ``origin`` (physical id,
    key, version) marks a copy a partition reorganisation wrote: the row a consumer holds is the original's
    (the copy's events precede the DDL and are not the table's yet). The map is held packed (``packed``)."""

    __slots__ = ("commit_ts", "origin", "packed_phys", "put", "seq", "start_ts", "value")

    def __init__(
        self,
        commit_ts: int,
        start_ts: int,
        put: bool,
        value: bytes,
        seq: int,
        packed_phys: bytes | None,
        origin: tuple[int, bytes, Version] | None = None,
    ) -> None:
        self.commit_ts = commit_ts
        self.start_ts = start_ts
        self.put = put
        self.value = value
        self.seq = seq
        self.packed_phys = packed_phys
        self.origin = origin

    @property
    def phys(self) -> dict[int, Any] | None:
        """A fresh copy of the stored column map (None once a newer version of the key exists)."""
        return None if self.packed_phys is None else unpack_phys(self.packed_phys)


class KeyState:
    __slots__ = ("lock", "versions")

    def __init__(self) -> None:
        self.versions: list[Version] = []
        self.lock: Lock | None = None

    @property
    def latest(self) -> Version | None:
        return self.versions[-1] if self.versions else None

    def latest_at(self, ts: int) -> Version | None:
        for v in reversed(self.versions):
            if v.commit_ts <= ts:
                return v
        return None


class PhysTable:
    """The record keys of one physical table id, with a lazily re-sorted key list for range scans."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.keys: dict[bytes, KeyState] = {}
        self.locked: set[bytes] = set()
        self._sorted: list[bytes] = []
        self._dirty = False
        self.dropped_at: int | None = None

    def state(self, key: bytes) -> KeyState:
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
            self._dirty = True
        return ks

    def sorted_keys(self) -> list[bytes]:
        if self._dirty:
            self._sorted = sorted(self.keys)
            self._dirty = False
        return self._sorted

    def keys_in(self, start: bytes, end: bytes) -> list[bytes]:
        keys = self.sorted_keys()
        lo = bisect.bisect_left(keys, start)
        hi = bisect.bisect_left(keys, end) if end else len(keys)
        return keys[lo:hi]

    def count_in(self, start: bytes, end: bytes) -> int:
        keys = self.sorted_keys()
        lo = bisect.bisect_left(keys, start)
        hi = bisect.bisect_left(keys, end) if end else len(keys)
        return hi - lo


class Store:
    def __init__(self) -> None:
        self.tables: dict[int, PhysTable] = {}
        self.seq = 0
        self._pids: list[int] = []

    def table(self, pid: int) -> PhysTable:
        t = self.tables.get(pid)
        if t is None:
            t = self.tables[pid] = PhysTable(pid)
            bisect.insort(self._pids, pid)
        return t

    def tables_between(self, lo_pid: int, hi_pid: int | None) -> Iterator[PhysTable]:
        """Physical tables with ``lo_pid <= id`` (and ``id <= hi_pid``), ascending: key order."""
        i = bisect.bisect_left(self._pids, lo_pid)
        while i < len(self._pids) and (hi_pid is None or self._pids[i] <= hi_pid):
            yield self.tables[self._pids[i]]
            i += 1

    # ------------------------------------------------------------ writes

    def put_lock(self, pid: int, key: bytes, lock: Lock) -> None:
        t = self.table(pid)
        t.state(key).lock = lock
        t.locked.add(key)
        self.seq += 1

    def remove_lock(self, pid: int, key: bytes) -> Lock | None:
        t = self.tables[pid]
        ks = t.keys[key]
        lock, ks.lock = ks.lock, None
        t.locked.discard(key)
        self.seq += 1
        return lock

    def add_version(
        self,
        pid: int,
        key: bytes,
        commit_ts: int,
        start_ts: int,
        put: bool,
        value: bytes,
        packed_phys: bytes | None,
        origin: tuple[int, bytes, Version] | None = None,
    ) -> Version:
        ks = self.table(pid).state(key)
        if ks.versions:
            ks.versions[-1].packed_phys = None
        self.seq += 1
        v = Version(commit_ts, start_ts, put, value, self.seq, packed_phys, origin)
        ks.versions.append(v)
        return v

    def latest(self, pid: int, key: bytes) -> Version | None:
        t = self.tables.get(pid)
        ks = t.keys.get(key) if t else None
        return ks.latest if ks else None

    # ------------------------------------------------------------ GC

    def gc(self, safepoint: int) -> None:
        """Drop versions no read at or after ``safepoint`` can see, and physical tables dropped by then.

        Per key the newest version ``<= safepoint`` stays (it is the value at the safepoint); a key whose
        only remaining version is a DELETE at or before the safepoint, without a lock, goes entirely.
        """
        for pid in list(self.tables):
            t = self.tables[pid]
            if t.dropped_at is not None and t.dropped_at <= safepoint:
                del self.tables[pid]
                self._pids.remove(pid)
                continue
            gone = []
            for key, ks in t.keys.items():
                vs = ks.versions
                i = len(vs) - 1
                while i >= 0 and vs[i].commit_ts > safepoint:
                    i -= 1
                if i > 0:
                    del vs[:i]
                if ks.lock is None and len(vs) == 1 and not vs[0].put and vs[0].commit_ts <= safepoint:
                    gone.append(key)
            for key in gone:
                del t.keys[key]
            if gone:
                t._dirty = True
