"""TiKV's MVCC view of the record keys: committed versions per key, locks, and GC.

Only what the CDC module can observe is kept: write records (PUT/DELETE versions with start and commit
ts), locks (prewrites, with pipelined-DML generation), and a monotonically increasing apply sequence so a
region snapshot sees exactly the writes applied before it (a commit ts alone cannot tell: secondaries of
a transaction are committed after its commit ts was taken).

Memory: a hot-table run holds millions of versions, so a key's versions are one bytes string of fixed-size
records (no object per version), their payloads are in a :class:`ValueLog` on disk, and a
:class:`Version` is a view made when one is asked for. Locks keep refs to their payloads, and hold them.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tidbsim.packed import unpack_phys
from tidbsim.valuelog import ValueLog, ValueRef, join_ref, split_ref

_RECORD = struct.Struct("<QQQQIQIB")
"""One version: commit ts, start ts, seq, its value's and its column map's refs (as place and length; a
length of 0: none), flags. A key's records are in commit order: its newest is last, flags its last byte."""
_R = _RECORD.size
_COMMIT_TS = struct.Struct("<Q")  # a record's first field
_PUT, _ORIGIN = 1, 2

Record = tuple[int, int, int, int, int, int, int, int]
Origin = tuple[int, bytes, "Version"]
"""(physical id, key, version) of the row a partition reorganisation copied."""


class Lock:
    """A prewrite lock. Immutable: a new pipelined generation replaces the object. ``value_ref`` and
    ``old_ref`` (the value before, b"" for none) are value-log refs, held while the store keeps the lock."""

    __slots__ = ("generation", "old_ref", "put", "start_ts", "txn", "value_ref")

    def __init__(
        self, start_ts: int, put: bool, value_ref: ValueRef, generation: int, old_ref: ValueRef, txn: int
    ) -> None:
        self.start_ts = start_ts
        self.put = put
        self.value_ref = value_ref
        self.generation = generation
        self.old_ref = old_ref
        self.txn = txn


class Version:
    """A committed write, as the store holds it now. ``packed_phys`` (column id -> value actually stored,
    packed) is kept for the newest version of a key only; older versions are read back through the codec
    when needed. ``origin`` (physical id, key, version) marks a copy a partition reorganisation wrote: the
    row a consumer holds is the original's (the copy's events precede the DDL and are not the table's
    yet). Payloads are read from the value log on first use; a view is not valid across a GC unless
    :meth:`pinned`."""

    __slots__ = (
        "_log",
        "_packed_phys",
        "_phys_ref",
        "_value",
        "commit_ts",
        "origin",
        "put",
        "seq",
        "start_ts",
        "value_ref",
    )

    def __init__(self, log: ValueLog, record: Record, origin: Origin | None) -> None:
        self._log = log
        self.commit_ts, self.start_ts, self.seq = record[:3]
        self.value_ref = join_ref(record[3], record[4])
        self._phys_ref = join_ref(record[5], record[6])
        self.put = bool(record[7] & _PUT)
        self.origin = origin
        self._value: bytes | None = None
        self._packed_phys: bytes | None = None

    @property
    def value(self) -> bytes:
        if self._value is None:
            self._value = self._log.get(self.value_ref)
        return self._value

    @property
    def packed_phys(self) -> bytes | None:
        if self._packed_phys is None and self._phys_ref:
            self._packed_phys = self._log.get(self._phys_ref)
        return self._packed_phys

    @property
    def phys(self) -> dict[int, Any] | None:
        """A fresh copy of the stored column map (None once a newer version of the key exists)."""
        packed = self.packed_phys
        return None if packed is None else unpack_phys(packed)

    def pinned(self) -> Version:
        """This view with its payloads in memory: valid for as long as it is kept."""
        _ = self.value, self.packed_phys
        return self


class PhysTable:
    """The record keys of one physical table id, with a lazily re-sorted key list for range scans."""

    def __init__(self, pid: int, log: ValueLog) -> None:
        self.pid = pid
        self.log = log
        self.keys: dict[bytes, bytes] = {}
        """Key -> its versions' records, oldest first (``b""``: a key that only ever had a lock)."""
        self.locks: dict[bytes, Lock] = {}
        self.origins: dict[int, Origin] = {}
        """Seq of a version with an origin -> the origin."""
        self._sorted: list[bytes] = []
        self._dirty = False
        self.dropped_at: int | None = None

    def _add_key(self, key: bytes) -> bytes:
        blob = self.keys.get(key)
        if blob is None:
            blob = self.keys[key] = b""
            self._dirty = True
        return blob

    def _view(self, record: Record) -> Version:
        return Version(self.log, record, self.origins[record[2]] if record[7] & _ORIGIN else None)

    def latest(self, key: bytes) -> Version | None:
        blob = self.keys.get(key)
        return self._view(_RECORD.unpack_from(blob, len(blob) - _R)) if blob else None

    def rows_at(self, ts: int) -> Iterator[tuple[bytes, Version]]:
        """(key, version) of every key whose newest version at ``ts`` is a PUT, in insertion order."""
        for key, blob in self.keys.items():
            at = len(blob) - _R
            while at >= 0 and _COMMIT_TS.unpack_from(blob, at)[0] > ts:
                at -= _R
            if at >= 0 and blob[at + _R - 1] & _PUT:
                yield key, self._view(_RECORD.unpack_from(blob, at))

    def committed(self, key: bytes, after_ts: int, max_seq: int) -> list[tuple[int, int, bool, bytes, bytes]]:
        """The key's versions committed after ``after_ts`` and applied at or before ``max_seq``, newest
        first, as (start ts, commit ts, put, value, old value: the version before's if a PUT, else b"")."""
        blob = self.keys.get(key)
        if not blob:
            return []
        records = list(_RECORD.iter_unpack(blob))
        get = self.log.get
        out = []
        value = None  # the version's value, read as the one after it's old value
        for i in range(len(records) - 1, -1, -1):
            commit_ts, start_ts, seq, value_at, value_len, _, _, flags = records[i]
            if seq > max_seq:
                continue
            if commit_ts <= after_ts:
                break
            if value is None:
                value = get(join_ref(value_at, value_len))
            before = get(join_ref(records[i - 1][3], records[i - 1][4])) if i > 0 else None
            old = before if before is not None and records[i - 1][7] & _PUT else b""
            out.append((start_ts, commit_ts, bool(flags & _PUT), value, old))
            value = before
        return out

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
    def __init__(self, spill_dir: Path | None = None) -> None:
        self.values = ValueLog(spill_dir)
        self.tables: dict[int, PhysTable] = {}
        self.seq = 0
        self._pids: list[int] = []

    def table(self, pid: int) -> PhysTable:
        t = self.tables.get(pid)
        if t is None:
            t = self.tables[pid] = PhysTable(pid, self.values)
            bisect.insort(self._pids, pid)
        return t

    def tables_between(self, lo_pid: int, hi_pid: int | None) -> Iterator[PhysTable]:
        """Physical tables with ``lo_pid <= id`` (and ``id <= hi_pid``), ascending: key order."""
        i = bisect.bisect_left(self._pids, lo_pid)
        while i < len(self._pids) and (hi_pid is None or self._pids[i] <= hi_pid):
            yield self.tables[self._pids[i]]
            i += 1

    def close(self) -> None:
        self.values.close()

    # ------------------------------------------------------------ writes

    def put_lock(self, pid: int, key: bytes, lock: Lock) -> None:
        t = self.table(pid)
        t._add_key(key)
        self.values.hold(lock.value_ref)
        self.values.hold(lock.old_ref)
        if (replaced := t.locks.get(key)) is not None:
            self._unhold(replaced)
        t.locks[key] = lock
        self.seq += 1

    def remove_lock(self, pid: int, key: bytes) -> Lock | None:
        lock = self.tables[pid].locks.pop(key, None)
        if lock is not None:
            self._unhold(lock)
        self.seq += 1
        return lock

    def _unhold(self, lock: Lock) -> None:
        self.values.unhold(lock.value_ref)
        self.values.unhold(lock.old_ref)

    def add_version(
        self,
        pid: int,
        key: bytes,
        commit_ts: int,
        start_ts: int,
        put: bool,
        value_ref: ValueRef,
        phys_ref: ValueRef,
        origin: Origin | None = None,
    ) -> None:
        """A committed write; the store adopts the refs (the caller held them, and no longer does).
        ``phys_ref``: the packed column map written (0: none, as for a delete)."""
        t = self.table(pid)
        blob = t._add_key(key)
        if blob and (last := _RECORD.unpack_from(blob, len(blob) - _R))[6]:
            self.values.release(join_ref(last[5], last[6]))  # superseded: its column map goes
            blob = blob[:-_R] + _RECORD.pack(*last[:5], 0, 0, last[7])
        self.seq += 1
        self.values.unhold(value_ref)
        self.values.unhold(phys_ref)
        flags = (_PUT if put else 0) | (_ORIGIN if origin is not None else 0)
        t.keys[key] = blob + _RECORD.pack(
            commit_ts, start_ts, self.seq, *split_ref(value_ref), *split_ref(phys_ref), flags
        )
        if origin is not None:
            t.origins[self.seq] = (origin[0], origin[1], origin[2].pinned())

    def latest(self, pid: int, key: bytes) -> Version | None:
        t = self.tables.get(pid)
        return t.latest(key) if t else None

    # ------------------------------------------------------------ GC

    def gc(self, safepoint: int) -> None:
        """Drop versions no read at or after ``safepoint`` can see, and physical tables dropped by then.

        Per key the newest version ``<= safepoint`` stays (it is the value at the safepoint); a key whose
        only remaining version is a DELETE at or before the safepoint, without a lock, goes entirely.
        Payloads still referenced from a mostly dead value-log segment move to a new one.
        """
        doomed = self.values.rotate()
        for pid in list(self.tables):
            t = self.tables[pid]
            if t.dropped_at is not None and t.dropped_at <= safepoint:
                for blob in t.keys.values():
                    self._release(t, blob)
                del self.tables[pid]
                self._pids.remove(pid)
                continue
            gone = []
            for key, blob in t.keys.items():
                at = len(blob) - _R
                while at >= 0 and _COMMIT_TS.unpack_from(blob, at)[0] > safepoint:
                    at -= _R
                kept = blob
                if at > 0:
                    self._release(t, blob[:at])
                    kept = blob[at:]
                if doomed and kept:
                    kept = self._move(kept, doomed)
                if kept is not blob:
                    t.keys[key] = kept
                if (
                    len(kept) == _R
                    and not kept[-1] & _PUT
                    and _COMMIT_TS.unpack_from(kept)[0] <= safepoint
                    and key not in t.locks
                ):
                    gone.append(key)
            for key in gone:
                self._release(t, t.keys.pop(key))
            if gone:
                t._dirty = True
        self.values.drop(doomed)

    def _release(self, t: PhysTable, blob: bytes) -> None:
        """The records in ``blob`` are dropped: their payloads and origins go."""
        for _, _, seq, value_at, value_len, phys_at, phys_len, flags in _RECORD.iter_unpack(blob):
            self.values.release(join_ref(value_at, value_len))
            self.values.release(join_ref(phys_at, phys_len))
            if flags & _ORIGIN:
                del t.origins[seq]

    def _move(self, blob: bytes, doomed: set[int]) -> bytes:
        """``blob`` with the payloads it holds in ``doomed`` segments moved (the same object if none)."""
        log = self.values
        records = list(_RECORD.iter_unpack(blob))
        moved = False
        for i, (commit_ts, start_ts, seq, value_at, value_len, phys_at, phys_len, flags) in enumerate(
            records
        ):
            value_ref, phys_ref = join_ref(value_at, value_len), join_ref(phys_at, phys_len)
            value_out = value_ref and log.segment(value_ref) in doomed
            phys_out = phys_ref and log.segment(phys_ref) in doomed
            if value_out or phys_out:
                if value_out:
                    value_ref = log.move(value_ref)
                if phys_out:
                    phys_ref = log.move(phys_ref)
                records[i] = (commit_ts, start_ts, seq, *split_ref(value_ref), *split_ref(phys_ref), flags)
                moved = True
        return b"".join(_RECORD.pack(*r) for r in records) if moved else blob
