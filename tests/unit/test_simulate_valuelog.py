"""The simulator's on-disk value log, and the store's versions that point into it across GC."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidbsim.store import Lock, Store
from tidbsim.valuelog import _BUFFER_BYTES, ValueLog

pytestmark = pytest.mark.unit


def test_payloads_read_back_from_the_buffer_and_from_disk(tmp_path: Path) -> None:
    log = ValueLog(tmp_path)
    small = [bytes([i % 251]) * (i % 97 + 1) for i in range(2000)]
    refs = [log.put(p) for p in small]
    big = b"x" * (_BUFFER_BYTES + 5)  # flushes the buffer on its own
    big_ref = log.put(big)
    refs.append(log.put(b"after the flush"))
    assert [log.get(r) for r in refs[:-1]] == small
    assert log.get(big_ref) == big
    assert log.get(refs[-1]) == b"after the flush"
    assert log.put(b"") == 0 and log.get(0) == b""
    assert list(tmp_path.iterdir()) == []  # segments are unlinked files: nothing is left behind
    log.close()


def test_a_payload_over_the_length_limit_is_refused(tmp_path: Path) -> None:
    log = ValueLog(tmp_path)
    with pytest.raises(ValueError, match="over the"):
        log.put(b"x" * (1 << 24))
    log.close()


def test_a_segment_still_holding_live_payloads_cannot_be_dropped(tmp_path: Path) -> None:
    log = ValueLog(tmp_path)
    ref = log.put(b"live")
    log.unhold(ref)  # owned, released by nobody
    assert log.rotate() == set()  # fully live: not worth emptying
    with pytest.raises(AssertionError, match="live bytes"):
        log.drop({0})
    log.close()


def _put(store: Store, key: bytes, ts: int, value: bytes) -> None:
    log = store.values
    store.add_version(1, key, ts, ts - 1, True, log.put(value), log.put(b"phys" + value))


def test_gc_moves_what_versions_and_locks_still_need_and_frees_the_rest(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for ts in range(10, 200, 10):  # 19 versions of each key, in the first segment
        for k in range(50):
            _put(store, b"k%03d" % k, ts, b"v%03d@%d" % (k, ts) * 20)
    written = store.values.disk_bytes()

    store.gc(safepoint=185)  # keeps the newest version at or below 185 (ts 180) and the one after it
    lock_value = store.values.put(b"prewritten")  # in the second segment
    store.put_lock(1, b"k007", Lock(500, True, lock_value, 0, 0, txn=1))
    store.values.unhold(lock_value)  # the lock holds it now (a transaction's mutation lets go at its end)
    store.gc(safepoint=185)  # the first segment is mostly released now: what is live moves out

    assert store.values.disk_bytes() < written / 4
    table = store.tables[1]
    for k in range(50):
        key = b"k%03d" % k
        latest = store.latest(1, key)
        assert latest is not None and latest.commit_ts == 190
        assert latest.value == b"v%03d@190" % k * 20
        assert latest.packed_phys == b"phys" + latest.value  # the newest version keeps its column map
        rows = [(s, c, v) for s, c, _, v, _ in table.committed(key, after_ts=0, max_seq=store.seq)]
        assert rows == [(189, 190, b"v%03d@190" % k * 20), (179, 180, b"v%03d@180" % k * 20)]
    lock = store.tables[1].locks[b"k007"]
    assert store.values.get(lock.value_ref) == b"prewritten"
    store.close()
