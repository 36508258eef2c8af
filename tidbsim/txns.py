"""Transactions: what they write (planned against the model) and how they move through 2PC.

A transaction reserves its keys when it starts (TiDB would see a write conflict otherwise), prewrites
them (locks, PREWRITE events; pipelined DML flushes several generations), then either commits (commit ts
taken once, primary first, secondaries over the next ticks: COMMIT events) or rolls back (ROLLBACK
events). 1PC transactions write committed versions directly (realtime COMMITTED, no prewrite). Rows are
written the way TiDB writes them in the table's current schema state (reference §3.5): public and
write-only/write-reorg columns are stored, delete-only ones are not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from backfill.codec import decode_record_key, decode_row, encode_row, record_key
from tidbsim.capture import COMMIT, COMMITTED, DELETE, PREWRITE, PUT, ROLLBACK
from tidbsim.catalog import decode_phys
from tidbsim.coltypes import convert, name_vocabulary, random_value, respell
from tidbsim.packed import pack_phys, unpack_phys
from tidbsim.store import Lock
from tidbsim.table_versions import PUBLIC, WRITABLE, TableVersion, named_by_text
from tidbsim.valuelog import ValueRef
from tidbsim.world import World
from tidelake.conventions import ROWID

HOT_UID = 1  # the first table created: the hot one when ``hot_table_share`` asks for one
KINDS = ("normal", "multi", "1pc", "rollback", "pipelined", "large")
_WEIGHTS = (0.52, 0.22, 0.15, 0.05, 0.05, 0.01)


class KeyPool:
    """Live keys (newest version is a PUT) of one physical table, for O(1) random picks."""

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self._pos: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: bytes) -> None:
        if key not in self._pos:
            self._pos[key] = len(self.keys)
            self.keys.append(key)

    def remove(self, key: bytes) -> None:
        i = self._pos.pop(key, None)
        if i is None:
            return
        last = self.keys.pop()
        if i < len(self.keys):
            self.keys[i] = last
            self._pos[last] = i


@dataclass(slots=True)
class Mutation:
    """One key a transaction writes. Its payloads wait in the value log (a window's transactions start in
    one tick, so hundreds of thousands are pending at once); the refs are held until the store adopts
    them at commit, or the transaction ends without it."""

    uid: int
    pid: int
    key: bytes
    put: bool
    phys_ref: ValueRef  # packed.pack_phys of the column map written (0: a delete)
    value_ref: ValueRef  # the encoded row (0: a delete)
    pk: dict[int, Any] | None  # column id -> value, {-1: rowid} for rowid tables (None once not needed)
    drafts: list[ValueRef] | None = None  # a pipelined transaction's earlier generations' values
    prewritten: bool = False


@dataclass(slots=True)
class Txn:
    id: int
    kind: str
    start_ts: int
    muts: list[Mutation] = field(default_factory=list)
    epochs: dict[int, int] = field(default_factory=dict)
    state: str = "prewrite"
    batches: list[list[int]] = field(default_factory=list)
    generations: int = 1
    next_tick: int = 0
    commit_ts: int = 0
    until_tick: int | None = 0
    rollback: bool = False


class Workload:
    """Plans and drives transactions against the world."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.pools: dict[int, KeyPool] = {}
        self.reserved: set[bytes] = set()
        self.counters: dict[int, int] = {}
        self.txns: list[Txn] = []
        self._seq = 0
        self.skus = [f"sku-{i:04d}" for i in range(max(8, world.cfg.rows // 16))]
        self.names = name_vocabulary(max(16, world.cfg.rows * 2))

    # ------------------------------------------------------------ choosing rows

    def pool(self, pid: int) -> KeyPool:
        p = self.pools.get(pid)
        if p is None:
            p = self.pools[pid] = KeyPool()
        return p

    def candidates(self, *, for_long: bool = False) -> list[int]:
        w = self.w
        out = []
        for uid in sorted(w.catalog.done):
            if uid in w.frozen_uids:
                continue
            if for_long and uid in w.ddl_uids:
                continue
            out.append(uid)
        return out

    def _next(self, counter: int, step: int = 1) -> int:
        v = self.counters.get(counter, 0) + step
        self.counters[counter] = v
        return v

    def _free(self, pid: int, key: bytes) -> bool:
        if key in self.reserved:
            return False
        v = self.w.store.latest(pid, key)
        return v is None or not v.put

    def _new_pk(self, d: TableVersion) -> tuple[int, bytes, dict[int, Any]] | None:
        """A primary key no row holds: (physical id, key, pk column values)."""
        rng, schema = self.w.rng, d.schema
        for _ in range(8):
            if d.pk_kind == "rowid":
                rowid = self._next(d.table_id)
                return d.table_id, record_key(d.table_id, rowid), {-1: rowid}
            pk = d.pk_columns
            if d.pk_kind == "int" and d.partition is None and d.uid in self.w.key_bounds:
                v = rng.randrange(*self.w.key_bounds[d.uid])
                key = record_key(d.table_id, v)
                if self._free(d.table_id, key):
                    return d.table_id, key, {pk[0].id: v}
                continue
            if d.pk_kind == "int" and d.partition is None:
                v = self._next(-d.uid, rng.randint(1, 3))
                return d.table_id, record_key(d.table_id, v), {pk[0].id: v}
            if d.pk_kind == "int":
                assert d.partition is not None
                defs = [p for p in d.partition.defs if p.id not in self.w.frozen_pids]
                if not defs:
                    return None
                part = rng.choice(defs)
                v = rng.randrange(d.partition.lower_bound(part), part.less_than)
                key = record_key(part.id, v)
                if self._free(part.id, key):
                    return part.id, key, {pk[0].id: v}
                continue
            values: dict[int, Any]
            if named_by_text(d):
                values = {pk[0].id: respell(rng.choice(self.names), rng)}
            else:
                values = {pk[0].id: rng.choice(self.skus), pk[1].id: rng.randint(0, 999_999)}
            key = record_key(d.table_id, [(schema.by_id[c.id], values[c.id]) for c in pk])
            if self._free(d.table_id, key):
                return d.table_id, key, values
        return None

    def _existing(self, d: TableVersion) -> tuple[int, bytes] | None:
        rng = self.w.rng
        pids = [p for p in d.physical_ids if p not in self.w.frozen_pids and len(self.pool(p))]
        for _ in range(6):
            if not pids:
                return None
            pid = rng.choice(pids)
            pool = self.pool(pid)
            key = pool.keys[rng.randrange(len(pool))]
            if key not in self.reserved:
                return pid, key
        return None

    # ------------------------------------------------------------ writing rows

    def _physical(self, wv: TableVersion, row: dict[int, Any]) -> dict[int, Any]:
        """Column id -> stored value for a row written in schema state ``wv`` (reference §3.5)."""
        phys: dict[int, Any] = {}
        for c in wv.columns:
            if c.state not in WRITABLE:
                continue
            if c.state == PUBLIC:
                phys[c.id] = row[c.id]
            elif c.role == "adding":
                phys[c.id] = c.default_value
            elif c.role == "dropping":
                phys[c.id] = row.get(c.id, c.default_value)
            elif c.role == "changing":
                src = wv.by_id(c.source_id)
                assert src is not None
                phys[c.id] = convert(row.get(c.source_id), src.type, c.type)
        return phys

    def _encode(self, d: TableVersion, wv: TableVersion, key: bytes, phys: dict[int, Any]) -> bytes:
        w = self.w
        version = 1 if w.rng.random() < w.cfg.v1_row_fraction else 2
        value = encode_row(wv.schema, phys, version=version)
        w.stats[f"row_format_v{version}"] += 1
        if w.cfg.check_codec:
            got = decode_row(d.schema, key, value)
            want = decode_phys(d, phys)
            for c in d.schema.columns:
                if got[c.name] != want[c.id]:
                    raise AssertionError(
                        f"codec disagrees on {d.name}.{c.name}: wrote {want[c.id]!r}, "
                        f"decoded {got[c.name]!r} (key {key.hex()})"
                    )
        return value

    def _random_row(self, wv: TableVersion, pk: dict[int, Any]) -> dict[int, Any]:
        rng = self.w.rng
        row = {c.id: random_value(c.type, rng, nullable=c.nullable) for c in wv.public if not c.pk}
        row.update(pk)
        return row

    def _edit(self, wv: TableVersion, row: dict[int, Any]) -> None:
        rng = self.w.rng
        cols = [c for c in wv.public if not c.pk]
        for c in rng.sample(cols, min(len(cols), rng.randint(1, 3))):
            row[c.id] = random_value(c.type, rng, nullable=c.nullable)

    def _put(self, uid: int, pid: int, key: bytes, pk: dict[int, Any], row: dict[int, Any]) -> Mutation:
        d, wv = self.w.catalog.done[uid], self.w.catalog.writing[uid]
        phys = self._physical(wv, row)
        log = self.w.store.values
        return Mutation(
            uid, pid, key, True, log.put(pack_phys(phys)), log.put(self._encode(d, wv, key, phys)), pk
        )

    def _current(self, uid: int, pid: int, key: bytes) -> dict[int, Any]:
        cat = self.w.catalog
        v = self.w.store.latest(pid, key)
        assert v is not None and v.put
        row = self.w.logical_row(uid, pid, key, v, cat.latest_index(uid))
        assert row is not None
        return row

    def _pk_of(self, d: TableVersion, key: bytes, row: dict[int, Any]) -> dict[int, Any]:
        if d.pk_kind == "rowid":
            return {-1: decode_record_key(key).handle}
        return {c.id: row[c.id] for c in d.pk_columns}

    def mutations(self, uid: int, op: str) -> list[Mutation]:
        """One logical change to table ``uid``: insert, update, delete, or a primary-key change
        (delete of the old key + put of the new one, committed together)."""
        w = self.w
        d, wv = w.catalog.done[uid], w.catalog.writing[uid]
        found = None if op == "insert" else self._existing(d)
        if found is None:
            new = self._new_pk(d)
            if new is None:
                return []
            pid, key, pk = new
            self.reserved.add(key)
            return [self._put(uid, pid, key, pk, self._random_row(wv, pk))]
        pid, key = found
        self.reserved.add(key)
        row = self._current(uid, pid, key)
        pk = self._pk_of(d, key, row)
        if op == "delete":
            return [Mutation(uid, pid, key, False, 0, 0, pk)]
        self._edit(wv, row)
        if op == "update" and named_by_text(d) and w.rng.random() < 0.4:
            return self._respell_key(d, pid, key, pk, row)
        if op == "pk_change" and d.pk_kind != "rowid":
            new = self._new_pk(d)
            if new is not None:
                npid, nkey, npk = new
                self.reserved.add(nkey)
                row.update(npk)
                w.stats["pk_changes"] += 1
                return [Mutation(uid, pid, key, False, 0, 0, pk), self._put(uid, npid, nkey, npk, row)]
        return [self._put(uid, pid, key, pk, row)]

    def _respell_key(
        self, d: TableVersion, pid: int, key: bytes, pk: dict[int, Any], row: dict[int, Any]
    ) -> list[Mutation]:
        """An UPDATE of the primary key to another case/accent spelling: under a `_ci` collation the same
        record key (one PUT with the new value, as TiDB writes it), otherwise a key change."""
        col = d.pk_columns[0]
        name = respell(row[col.id], self.w.rng)
        new_key = record_key(pid, [(d.schema.by_id[col.id], name)])
        if name == row[col.id] or (new_key != key and not self._free(pid, new_key)):
            return [self._put(d.uid, pid, key, pk, row)]
        row[col.id] = name
        if new_key == key:
            self.w.stats["pk_respellings"] += 1
            return [self._put(d.uid, pid, key, {col.id: name}, row)]
        self.reserved.add(new_key)
        self.w.stats["pk_changes"] += 1
        return [
            Mutation(d.uid, pid, key, False, 0, 0, pk),
            self._put(d.uid, pid, new_key, {col.id: name}, row),
        ]

    def live_rows(self, uid: int) -> int:
        return sum(len(self.pool(p)) for p in self.w.catalog.done[uid].physical_ids)

    def _ops(self, uid: int, n: int, *, inserts_only: bool = False) -> Iterable[str]:
        """Insert/update/delete/pk-change mix; tables drift back towards ``rows`` live rows, so the model's
        state stays bounded however many events a run makes."""
        rng = self.w.rng
        target = max(self.w.cfg.rows, 16)
        live = self.live_rows(uid)
        p_insert, p_delete = (
            (0.5, 0.05) if live < target // 2 else (0.15, 0.3) if live > 2 * target else (0.35, 0.14)
        )
        for _ in range(n):
            if inserts_only:
                yield "insert"
                continue
            r = rng.random()
            if r < p_insert:
                yield "insert"
            elif r < p_insert + p_delete:
                yield "delete"
            else:
                yield "pk_change" if r > 0.93 else "update"

    # ------------------------------------------------------------ starting

    def start(
        self, kind: str | None = None, *, uid: int | None = None, rows: int = 0, until_tick: int | None = 0
    ) -> Txn | None:
        """Begin a transaction of ``kind`` (random if None); ``rows`` > 0 seeds ``uid`` with inserts;
        kind "long" keeps its locks until ``until_tick`` (None: forever)."""
        w = self.w
        rng = w.rng
        kind = kind or rng.choices(KINDS, _WEIGHTS)[0]
        cands = self.candidates(for_long=kind == "long")
        if uid is None and not cands:
            return None
        self._seq += 1
        txn = Txn(self._seq, kind, w.tso.next(), until_tick=until_tick)
        if rows:
            assert uid is not None
            plan = [(uid, op) for op in self._ops(uid, rows, inserts_only=True)]
        elif kind == "multi":
            plan = [
                (u, op)
                for u in rng.sample(cands, min(len(cands), rng.randint(2, 3)))
                for op in self._ops(u, rng.randint(1, 3))
            ]
        else:
            hot = w.cfg.hot_table_share
            u = HOT_UID if hot and HOT_UID in cands and rng.random() < hot else rng.choice(cands)
            n = (
                max(20, min(400, w.cfg.rows // 8))
                if kind == "large"
                else rng.randint(1, 5 if kind != "1pc" else 2)
            )
            plan = [(u, op) for op in self._ops(u, n)]
        for u, op in plan:
            if u not in txn.epochs:
                txn.epochs[u] = w.open_txn(u)
            txn.muts.extend(self.mutations(u, op))
        if not txn.muts:
            self._finish(txn, committed=False)
            return None
        if kind == "1pc" and len({w.regions.locate(m.key).id for m in txn.muts}) > 1:
            txn.kind = kind = "normal"
        if kind == "long":
            for u in txn.epochs:
                w.long_uids[u] += 1
        self._schedule_prewrite(txn)
        if w.oplog is None:  # only the MariaDB op log needs the key columns again
            for m in txn.muts:
                m.pk = None
        txn.next_tick = w.tick + (1 if rng.random() < 0.5 else 0)
        self.txns.append(txn)
        w.stats[f"txn_{kind}"] += 1
        return txn

    def _schedule_prewrite(self, txn: Txn) -> None:
        rng = self.w.rng
        n = len(txn.muts)
        if txn.kind == "1pc":
            txn.state = "1pc"
            return
        if txn.kind == "pipelined":
            txn.generations = rng.randint(2, 3)
            log = self.w.store.values
            for m in txn.muts:
                if m.put:
                    assert m.pk is not None
                    d, wv = self.w.catalog.done[m.uid], self.w.catalog.writing[m.uid]
                    m.drafts = []
                    for _ in range(txn.generations - 1):
                        row = self._random_row(wv, m.pk)
                        m.drafts.append(log.put(self._encode(d, wv, m.key, self._physical(wv, row))))
            txn.batches = [list(range(n)) for _ in range(txn.generations)]
            return
        per_tick = 100 if txn.kind == "large" else n
        order = list(range(n))
        txn.batches = [order[i : i + per_tick] for i in range(0, n, per_tick)]
        if txn.kind == "rollback":
            txn.rollback = True
            keep = rng.randint(1, len(txn.batches[-1]))
            txn.batches[-1] = txn.batches[-1][:keep]  # the rest is rolled back without a prewrite
        if txn.kind == "long":
            txn.rollback = rng.random() < 0.2

    def release(self, txn: Txn, tick: int) -> None:
        """Let a long transaction finish (commit or roll back) at ``tick``."""
        txn.until_tick = tick
        if txn.state == "decide":
            txn.next_tick = tick

    # ------------------------------------------------------------ driving

    def step(self) -> None:
        """Advance every transaction that is due this tick."""
        still = []
        for txn in self.txns:
            if txn.next_tick <= self.w.tick and txn.state != "done":
                self._step(txn)
            if txn.state != "done":
                still.append(txn)
        self.txns = still

    def _step(self, txn: Txn) -> None:
        w = self.w
        rng = w.rng
        if txn.state == "1pc":
            txn.commit_ts = w.tso.next()
            self._log(txn)
            for m in txn.muts:
                prev = w.store.latest(m.pid, m.key)
                old = prev.value if prev is not None and prev.put else b""
                value = w.store.values.get(m.value_ref)
                w.store.add_version(m.pid, m.key, txn.commit_ts, txn.start_ts, m.put, m.value_ref, m.phys_ref)
                w.emit(
                    m.key,
                    (COMMITTED, txn.start_ts, txn.commit_ts, PUT if m.put else DELETE, m.key, value, old, 0),
                )
            self._finish(txn, committed=True)
            return
        if txn.state == "prewrite":
            gen_index = txn.generations - len(txn.batches)  # 0-based generation of this batch
            batch = txn.batches.pop(0)
            for i in batch:
                self._prewrite(txn, txn.muts[i], gen_index)
            if not txn.batches:
                txn.state = "decide"
                if txn.kind == "long":
                    txn.next_tick = max(w.tick + 1, txn.until_tick) if txn.until_tick is not None else 1 << 62
                else:
                    txn.next_tick = w.tick + rng.randint(0, 2)
            else:
                txn.next_tick = w.tick + 1
            return
        if txn.state == "decide":
            self._fake_prewrites(txn)
            if txn.rollback:
                for m in txn.muts:
                    if m.prewritten:
                        w.store.remove_lock(m.pid, m.key)
                    w.emit(m.key, (ROLLBACK, txn.start_ts, None, None, m.key, b"", None, 0))
                self._finish(txn, committed=False)
                return
            txn.commit_ts = w.tso.next()
            self._log(txn)
            self._commit(txn, txn.muts[0])
            rest = list(range(1, len(txn.muts)))
            rng.shuffle(rest)
            per = max(1, (len(rest) + 1) // rng.randint(1, 3)) if rest else 1
            txn.batches = [rest[i : i + per] for i in range(0, len(rest), per)]
            txn.state = "committing"
            txn.next_tick = w.tick + rng.randint(0, 1)
            if not txn.batches:
                self._finish(txn, committed=True)
            return
        if txn.state == "committing":
            for i in txn.batches.pop(0):
                self._commit(txn, txn.muts[i])
            if not txn.batches:
                self._finish(txn, committed=True)
            else:
                txn.next_tick = w.tick + rng.randint(0, 1)

    def _prewrite(self, txn: Txn, m: Mutation, gen_index: int) -> None:
        w = self.w
        prev = w.store.latest(m.pid, m.key)
        old_ref = prev.value_ref if prev is not None and prev.put else 0
        pipelined = txn.kind == "pipelined"
        generation = gen_index + 1 if pipelined else 0
        value_ref = m.drafts[gen_index] if m.drafts and gen_index < len(m.drafts) else m.value_ref
        if pipelined and not m.put and gen_index < txn.generations - 1:
            return  # a pipelined delete is flushed in the last generation only
        w.store.put_lock(m.pid, m.key, Lock(txn.start_ts, m.put, value_ref, generation, old_ref, txn.id))
        m.prewritten = True
        value, old = w.store.values.get(value_ref), w.store.values.get(old_ref)
        w.emit(m.key, (PREWRITE, txn.start_ts, None, PUT if m.put else DELETE, m.key, value, old, generation))
        if pipelined:
            w.stats["pipelined_prewrites"] += 1

    def _fake_prewrites(self, txn: Txn) -> None:
        """Lock rewrites (txn heartbeat, min-commit-ts push) reach CDC as PREWRITE without a value."""
        w = self.w
        if txn.kind == "pipelined":
            return
        for m in txn.muts:
            if m.put and m.prewritten and w.rng.random() < 0.06:
                lock = w.store.tables[m.pid].locks[m.key]
                w.emit(
                    m.key,
                    (PREWRITE, txn.start_ts, None, PUT, m.key, b"", w.store.values.get(lock.old_ref), 0),
                )
                w.stats["fake_prewrites"] += 1

    def _commit(self, txn: Txn, m: Mutation) -> None:
        w = self.w
        w.store.remove_lock(m.pid, m.key)
        w.store.add_version(m.pid, m.key, txn.commit_ts, txn.start_ts, m.put, m.value_ref, m.phys_ref)
        w.emit(m.key, (COMMIT, txn.start_ts, txn.commit_ts, PUT if m.put else DELETE, m.key, b"", None, 0))

    def _log(self, txn: Txn) -> None:
        """The transaction's logical changes, as a consumer decodes them at commit_ts - 1."""
        w = self.w
        if w.oplog is None and w.changes is None:
            return
        for m in txn.muts:
            d = w.catalog.done.get(m.uid)
            if d is None or m.pid not in d.physical_ids:
                continue
            phys = unpack_phys(w.store.values.get(m.phys_ref)) if m.phys_ref else None
            if w.changes is not None:
                w.changes.row(w, txn.commit_ts, d, m.pid, m.key, m.put, phys)
            if w.oplog is None:
                continue
            assert m.pk is not None
            if m.put:
                assert phys is not None
                row = decode_phys(d, phys)
                named = {c.name: row[c.id] for c in d.schema.columns}
                if -1 in m.pk:
                    named[ROWID] = m.pk[-1]
                w.oplog.add((txn.commit_ts, "put", d.db, d.name, named))
            else:
                keys = {ROWID: m.pk[-1]} if -1 in m.pk else {c.name: m.pk[c.id] for c in d.pk_columns}
                w.oplog.add((txn.commit_ts, "delete", d.db, d.name, keys))

    def _finish(self, txn: Txn, *, committed: bool) -> None:
        w = self.w
        txn.state = "done"
        log = w.store.values
        for m in txn.muts:
            self.reserved.discard(m.key)
            for ref in m.drafts or ():
                log.discard(ref)
            if not committed:  # committed ones the store adopted
                log.discard(m.value_ref)
                log.discard(m.phys_ref)
            if committed:
                pool = self.pool(m.pid)
                if m.put:
                    pool.add(m.key)
                else:
                    pool.remove(m.key)
        for u, e in txn.epochs.items():
            w.close_txn(u, e)
            if txn.kind == "long":
                w.long_uids[u] -= 1
        w.stats["txn_committed" if committed else "txn_rolled_back"] += 1
