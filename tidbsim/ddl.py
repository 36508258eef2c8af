"""Online DDL: jobs that move a table through TiDB's schema states and finish with a done job.

Each job is planned up front as a list of intermediate (writer) versions and a final version. The runner
takes one state step at a time, like TiDB's DDL owner: a step waits until every open transaction on the
table started in the current state or the one before (the two-adjacent-states rule F1/TiDB rely on).
Destructive jobs (drop/truncate table, drop/truncate partition) stop new writes to what they remove and
wait for open writes to drain. The done job carries the final TableInfo and ``binlog.FinishedTS``
(the commit ts of the job's done state, reference §4.3).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from backfill.codec import decode_record_key, record_key, table_span
from tidbsim import coltypes as ct
from tidbsim.capture import COMMITTED, PUT
from tidbsim.catalog import NO_CHANGE, Transform, fill_for
from tidbsim.table_versions import (
    ADD_COLUMN_MENU,
    DELETE_ONLY,
    DELETE_REORG,
    NO_DEFAULT,
    NONE,
    PUBLIC,
    TEMPLATES,
    WRITE_ONLY,
    WRITE_REORG,
    ColumnDef,
    PartitionDef,
    Partitioning,
    TableVersion,
    build_table,
    modification,
)
from tidbsim.txns import Workload
from tidbsim.world import World
from tidelake.sqlident import quote_ident

ACTION = {
    "create_table": 3,
    "drop_table": 4,
    "add_column": 5,
    "drop_column": 6,
    "truncate_table": 11,
    "modify_column": 12,
    "rename_column": 12,
    "rename_table": 14,
    "add_partition": 19,
    "drop_partition": 20,
    "truncate_partition": 23,
    "reorganize_partition": 64,
    "exchange_partition": 42,
}
JOB_DONE = 4
SQL_MODE = 1436549152  # TiDB's default sql_mode bits


@dataclass
class DdlJob:
    id: int
    kind: str
    uid: int
    db: str
    table_name: str
    table_id: int
    query: str
    mysql: list[str]
    final: TableVersion | None
    binlog_info: dict[str, Any] | None = None
    steps: list[TableVersion] = field(default_factory=list)
    transform: Transform = NO_CHANGE
    final_state: int = PUBLIC
    destructive: bool = False
    frozen_pids: frozenset[int] = frozenset()
    drop_pids: tuple[int, ...] = ()
    raw_args: list[Any] | None = None
    reorg: tuple[PartitionDef, ...] = ()  # REORGANIZE PARTITION: the new partitions the reorg copies into
    partner: TableVersion | None = None  # EXCHANGE PARTITION: the partitioned table after the job
    start_ts: int = 0
    next_tick: int = 0


class _JobIdentity(TypedDict):
    """The DdlJob fields every kind of DDL fills the same way."""

    id: int
    kind: str
    uid: int
    db: str
    table_name: str
    table_id: int


class DdlRunner:
    def __init__(self, world: World, workload: Workload, kinds: tuple[str, ...]) -> None:
        self.w = world
        self.load = workload
        self.kinds = list(kinds)
        world.rng.shuffle(self.kinds)
        self._cursor = 0
        self.due: list[int] = []
        self.job: DdlJob | None = None
        self.done_jobs: list[tuple[int, dict[str, Any]]] = []
        self._names = 0
        # EXCHANGE PARTITION in two jobs: CREATE TABLE of a normal table shaped like the partitioned one,
        # then the exchange; (partitioned uid, normal uid, partition) in between, both kept from other DDLs.
        self._pair: tuple[int, int, PartitionDef] | None = None

    # ------------------------------------------------------------ scheduling

    def schedule(self, ticks: list[int]) -> None:
        self.due.extend(ticks)
        self.due.sort()

    def tick(self) -> None:
        w = self.w
        if self.job is None and self.due and self.due[0] <= w.tick and self.kinds:
            for _ in range(len(self.kinds)):
                if self._pair is not None and self._pair[1] in w.catalog.done:
                    kind = "exchange_partition"  # the normal table is there: the exchange comes next
                else:
                    kind = self.kinds[self._cursor % len(self.kinds)]
                    self._cursor += 1
                job = self._plan(kind)
                if job is not None:
                    self.due.pop(0)
                    self._begin(job)
                    break
            else:
                self.due.pop(0)
        if self.job is not None and w.tick >= self.job.next_tick:
            self._advance(self.job)

    def _begin(self, job: DdlJob) -> None:
        w = self.w
        job.start_ts = w.tso.next()
        job.next_tick = w.tick + w.rng.randint(0, 1)
        if job.destructive and job.frozen_pids:
            w.frozen_pids |= job.frozen_pids
        if job.destructive and (not job.frozen_pids or job.partner is not None):
            w.frozen_uids.add(job.uid)
        w.ddl_uids.add(job.uid)
        self.job = job

    def _ready(self, job: DdlJob) -> bool:
        w = self.w
        if job.kind == "create_table":
            return True
        if job.destructive and job.frozen_pids:
            prefixes = tuple(table_span(p)[0] for p in job.frozen_pids)
            return not any(k.startswith(prefixes) for k in self.load.reserved)
        if job.destructive:
            return w.oldest_open_epoch(job.uid) is None
        oldest = w.oldest_open_epoch(job.uid)
        return oldest is None or oldest >= w.epoch[job.uid]

    def _advance(self, job: DdlJob) -> None:
        w = self.w
        if not self._ready(job):
            return
        w.catalog.next_schema_version()
        if job.steps:
            if job.reorg and len(job.steps) == 2:  # leaving write-reorganization: the data is copied
                self._reorg_copy(job)
            w.catalog.writing[job.uid] = job.steps.pop(0)
            w.epoch[job.uid] += 1
            job.next_tick = w.tick + w.rng.randint(1, 3)
            return
        finished = w.tso.next()
        final = job.final
        if final is not None and job.kind not in ("truncate_table", "rename_table"):
            final = replace(final, update_ts=finished, revision=final.revision + 1)
        w.catalog.finish(job.uid, finished, final, job.transform)
        w.epoch[job.uid] += 1
        if job.partner is not None:
            self._finish_exchange(job, finished)
        for pid in job.drop_pids:
            if pid in w.store.tables:
                w.store.tables[pid].dropped_at = finished
            self.load.pools.pop(pid, None)
        if job.partner is not None:  # the job's TableInfo is the partitioned table's (FinishTableJob(pt))
            final = w.catalog.done[job.partner.uid]
        info = job.binlog_info if job.binlog_info is not None else (final.table_info() if final else None)
        self.done_jobs.append((finished, self._job_json(job, finished, info)))
        if w.oplog is not None:
            w.oplog.add((finished, "ddl", job.db, job.table_name, job.mysql))
        if w.changes is not None:
            w.changes.ddl(finished, job.db, job.table_name, job.query, ACTION[job.kind], info)
        w.frozen_pids -= job.frozen_pids
        w.frozen_uids.discard(job.uid)
        w.ddl_uids.discard(job.uid)
        w.stats[f"ddl_{job.kind}"] += 1
        self.job = None

    def _job_json(self, job: DdlJob, finished: int, info: dict[str, Any] | None) -> dict[str, Any]:
        """TiDB ``model.Job`` JSON of the done job (pkg/meta/model/job.go field names)."""
        return {
            "id": job.id,
            "type": ACTION[job.kind],
            "schema_id": self.w.db_ids[job.db],
            "table_id": job.table_id,
            "schema_name": job.db,
            "table_name": job.table_name,
            "state": JOB_DONE,
            "warning": None,
            "err": None,
            "err_count": 0,
            "row_count": 0,
            "raw_args": job.raw_args,
            "schema_state": job.final_state,
            "snapshot_ver": 0,
            "real_start_ts": job.start_ts,
            "start_ts": job.start_ts,
            "dependency_id": 0,
            "query": job.query,
            "binlog": {
                "SchemaVersion": self.w.catalog.schema_version,
                "DBInfo": None,
                "TableInfo": info,
                "FinishedTS": finished,
                "MultipleTableInfos": None,
            },
            "version": 1,
            "reorg_meta": None,
            "multi_schema_info": None,
            "priority": 0,
            "seq_num": len(self.done_jobs) + 1,
            "charset": "",
            "collate": "",
            "admin_operator": 0,
            "trace_info": None,
            "bdr_role": "",
            "cdc_write_source": 0,
            "local_mode": False,
            "sql_mode": SQL_MODE,
            "last_schema_version": 0,
        }

    def _finish_exchange(self, job: DdlJob, finished: int) -> None:
        """The partitioned table's side of an exchange: its new version at the same ts, and the two ids
        change hands (no row moves: each id keeps its rows and its key pool)."""
        w, pt = self.w, job.partner
        assert pt is not None and self._pair is not None
        w.catalog.finish(pt.uid, finished, replace(pt, update_ts=finished, revision=pt.revision + 1))
        w.epoch[pt.uid] += 1
        partition = self._pair[2]
        w.handovers.setdefault(partition.id, []).append((finished, pt.uid, job.uid))
        w.handovers.setdefault(job.table_id, []).append((finished, job.uid, pt.uid))
        self._pair = None

    def _reorg_copy(self, job: DdlJob) -> None:
        """REORGANIZE PARTITION's data copy: every live row of the old partitions is written into the new
        partition its key falls in, by the DDL's own transaction, before the job is done (TiDB's
        ``doPartitionReorgWork``). The old ids are frozen meanwhile, so the copy is their final state."""
        w = self.w
        start_ts = w.tso.next()
        commit_ts = w.tso.next()
        bounds = sorted(job.reorg, key=lambda p: p.less_than)
        for old in job.drop_pids:
            t = w.store.tables.get(old)
            if t is None:
                continue
            for key in list(t.sorted_keys()):
                v = t.latest(key)
                if v is None or not v.put:
                    continue
                handle = decode_record_key(key).handle
                assert isinstance(handle, int)
                new = next(p for p in bounds if handle < p.less_than)
                new_key = record_key(new.id, handle)
                origin = v.origin or (old, key, v)  # a copy of a copy: still the row first written
                w.store.add_version(
                    new.id, new_key, commit_ts, start_ts, True, w.store.values.put(v.value), 0, origin
                )
                w.emit(new_key, (COMMITTED, start_ts, commit_ts, PUT, new_key, v.value, b"", 0))
                self.load.pool(new.id).add(new_key)
                w.stats["reorganized_rows"] += 1

    # ------------------------------------------------------------ planning

    def _eligible(self, *, partitioned: bool | None = None) -> list[TableVersion]:
        w = self.w
        out = []
        paired = self._pair[:2] if self._pair is not None else ()
        for uid, d in sorted(w.catalog.done.items()):
            if uid in w.frozen_uids or uid in w.ddl_uids or w.long_uids[uid] > 0 or uid in paired:
                continue
            if partitioned is not None and (d.partition is not None) != partitioned:
                continue
            out.append(d)
        return out

    def _fresh_name(self, base: str, suffix: str) -> str:
        self._names += 1
        base = re.sub(r"_(v|r|n)\d+$", "", base)
        return f"{base}_{suffix}{self._names}"

    def _plan(self, kind: str) -> DdlJob | None:
        """A job of `kind` on a randomly chosen eligible table (None: no table fits it now)."""
        w = self.w
        job_id = w.ids.take()[0]
        if kind == "create_table":
            return self._plan_create_table(job_id)
        if kind == "exchange_partition":
            return self._plan_exchange(job_id)
        planner = _TABLE_PLANNERS.get(kind)
        if planner is None:
            raise ValueError(f"unknown DDL kind {kind}")
        cands = self._eligible(partitioned=True if kind.endswith("_partition") else None)
        if kind == "drop_table":
            cands = [d for d in cands if d.partition is None] if len(w.catalog.done) > 3 else []
        if not cands:
            return None
        d = w.rng.choice(cands)
        base = _JobIdentity(id=job_id, kind=kind, uid=d.uid, db=d.db, table_name=d.name, table_id=d.table_id)
        return planner(self, base, d)

    def _plan_create_table(self, job_id: int) -> DdlJob:
        w = self.w
        tmpl = TEMPLATES[w.rng.randrange(len(TEMPLATES))]
        uid = w.next_uid
        w.next_uid += 1
        ids = w.ids.take(1 + tmpl.partitions)
        v = build_table(
            tmpl,
            uid=uid,
            name=self._fresh_name(tmpl.name, "n"),
            ids=ids,
            partition_width=partition_width(w.cfg.rows, tmpl.partitions),
            update_ts=0,
        )
        return DdlJob(
            job_id,
            "create_table",
            uid,
            v.db,
            v.name,
            v.table_id,
            v.create_sql(),
            [v.create_sql(mysql=True)],
            v,
        )

    def _plan_drop_table(self, base: _JobIdentity, d: TableVersion) -> DdlJob:
        sql = f"DROP TABLE {d.qualified}"
        return DdlJob(
            **base,
            query=sql,
            mysql=[sql],
            final=None,
            binlog_info=dict(d.table_info(), state=NONE),
            final_state=NONE,
            steps=[d, d],
            destructive=True,
            drop_pids=d.physical_ids,
        )

    def _plan_truncate_table(self, base: _JobIdentity, d: TableVersion) -> DdlJob:
        ids = self.w.ids.take(1 + (len(d.partition.defs) if d.partition else 0))
        part = None
        if d.partition:
            part = replace(
                d.partition,
                defs=tuple(replace(p, id=i) for p, i in zip(d.partition.defs, ids[1:], strict=True)),
            )
        final = replace(d, table_id=ids[0], partition=part)
        sql = f"TRUNCATE TABLE {d.qualified}"
        return DdlJob(**base, query=sql, mysql=[sql], final=final, destructive=True, drop_pids=d.physical_ids)

    def _plan_rename_table(self, base: _JobIdentity, d: TableVersion) -> DdlJob:
        final = replace(d, name=self._fresh_name(d.name, "v"))
        sql = f"RENAME TABLE {d.qualified} TO {final.qualified}"
        return DdlJob(**base, query=sql, mysql=[sql], final=final)

    def _plan_add_column(self, base: _JobIdentity, d: TableVersion) -> DdlJob:
        t, default = ADD_COLUMN_MENU[self.w.rng.randrange(len(ADD_COLUMN_MENU))]
        self._names += 1
        col = ColumnDef(d.max_col_id + 1, f"added_{self._names}", t, nullable=False, default=default)
        final = replace(d, columns=(*d.columns, col), max_col_id=col.id)
        steps = [
            replace(d, columns=(*d.columns, replace(col, state=s, role="adding")), max_col_id=col.id)
            for s in (DELETE_ONLY, WRITE_ONLY, WRITE_REORG)
        ]
        sql = f"ALTER TABLE {d.qualified} ADD COLUMN {col.sql()}"
        return DdlJob(
            **base,
            query=sql,
            mysql=[sql],
            final=final,
            steps=steps,
            transform=Transform("add", col.id, value=fill_for(final, col.id)),
        )

    def _plan_drop_column(self, base: _JobIdentity, d: TableVersion) -> DdlJob | None:
        non_pk = [c for c in d.public if not c.pk]
        if len(non_pk) < 3:
            return None
        col = self.w.rng.choice(non_pk)
        rest = tuple(c for c in d.columns if c.id != col.id)
        steps = [
            replace(d, columns=(*rest, replace(col, state=s, role="dropping")))
            for s in (WRITE_ONLY, DELETE_ONLY, DELETE_REORG)
        ]
        sql = f"ALTER TABLE {d.qualified} DROP COLUMN {quote_ident(col.name)}"
        return DdlJob(
            **base,
            query=sql,
            mysql=[sql],
            final=replace(d, columns=rest),
            steps=steps,
            transform=Transform("drop", col.id),
            final_state=NONE,
        )

    def _plan_modify_column(self, base: _JobIdentity, d: TableVersion) -> DdlJob | None:
        """A type change: in place when the stored values stay valid, else through a changing column that
        the reorg fills (TiDB's `_Col$_<name>_0`) and that then takes the old column's name."""
        options = [(c, m) for c in d.public if not c.pk and (m := modification(c.type)) is not None]
        if not options:
            return None
        col, (new_type, reorg) = self.w.rng.choice(options)
        default = col.default if col.default is NO_DEFAULT else ct.convert(col.default, col.type, new_type)
        if not reorg:
            new = replace(col, type=new_type, default=default)
            final = replace(d, columns=tuple(new if c.id == col.id else c for c in d.columns))
            sql = f"ALTER TABLE {d.qualified} MODIFY COLUMN {new.sql()}"
            return DdlJob(**base, query=sql, mysql=[sql], final=final)
        new_id = d.max_col_id + 1
        changing = ColumnDef(
            new_id,
            f"_Col$_{col.name}_0",
            new_type,
            nullable=col.nullable,
            default=default,
            role="changing",
            source_id=col.id,
            dependency_offset=d.columns.index(col),
        )
        steps = [
            replace(d, columns=(*d.columns, replace(changing, state=s)), max_col_id=new_id)
            for s in (DELETE_ONLY, WRITE_ONLY, WRITE_REORG)
        ]
        new = ColumnDef(new_id, col.name, new_type, nullable=col.nullable, default=default)
        final = replace(d, columns=tuple(new if c.id == col.id else c for c in d.columns), max_col_id=new_id)
        sql = f"ALTER TABLE {d.qualified} MODIFY COLUMN {new.sql()}"
        return DdlJob(
            **base,
            query=sql,
            mysql=[sql],
            final=final,
            steps=steps,
            transform=Transform("remap", col.id, new_id, old_type=col.type, new_type=new_type),
        )

    def _plan_rename_column(self, base: _JobIdentity, d: TableVersion) -> DdlJob:
        col = self.w.rng.choice([c for c in d.public if not c.pk])
        new = replace(col, name=self._fresh_name(col.name, "r"))
        final = replace(d, columns=tuple(new if c.id == col.id else c for c in d.columns))
        sql = f"ALTER TABLE {d.qualified} RENAME COLUMN {quote_ident(col.name)} TO {quote_ident(new.name)}"
        return DdlJob(**base, query=sql, mysql=[sql], final=final)

    def _plan_add_partition(self, base: _JobIdentity, d: TableVersion) -> DdlJob:
        w = self.w
        assert d.partition is not None
        part = d.partition
        top = max(p.less_than for p in part.defs)
        n = 1 + max(int(p.name[1:]) for p in part.defs)
        new_def = PartitionDef(w.ids.take()[0], f"p{n}", top + partition_width(w.cfg.rows, 3))
        final = replace(d, partition=replace(part, defs=(*part.defs, new_def)))
        steps = [replace(d, partition=replace(part, adding=(new_def,)))]
        sql = (
            f"ALTER TABLE {d.qualified} ADD PARTITION (PARTITION {quote_ident(new_def.name)} VALUES LESS THAN "
            f"({new_def.less_than}))"
        )
        return DdlJob(**base, query=sql, mysql=[sql], final=final, steps=steps)

    def _victim(self, d: TableVersion) -> tuple[Partitioning, PartitionDef]:
        """The table's partitioning and one of its partitions at random. Every partition DDL but ADD draws
        it, also REORGANIZE, which picks its own: the random stream, and so a seed's workload, stays as
        it was."""
        assert d.partition is not None
        return d.partition, self.w.rng.choice(d.partition.defs)

    def _plan_drop_partition(self, base: _JobIdentity, d: TableVersion) -> DdlJob | None:
        part, victim = self._victim(d)
        if len(part.defs) < 2:
            return None
        kept = tuple(p for p in part.defs if p.id != victim.id)
        final = replace(d, partition=replace(part, defs=kept))
        steps = [replace(d, partition=replace(part, defs=kept, dropping=(victim,)))]
        sql = f"ALTER TABLE {d.qualified} DROP PARTITION {quote_ident(victim.name)}"
        return DdlJob(
            **base,
            query=sql,
            mysql=[sql],
            final=final,
            steps=steps,
            destructive=True,
            frozen_pids=frozenset({victim.id}),
            drop_pids=(victim.id,),
        )

    def _plan_truncate_partition(self, base: _JobIdentity, d: TableVersion) -> DdlJob:
        part, victim = self._victim(d)
        fresh = replace(victim, id=self.w.ids.take()[0])
        final = replace(
            d, partition=replace(part, defs=tuple(fresh if p.id == victim.id else p for p in part.defs))
        )
        sql = f"ALTER TABLE {d.qualified} TRUNCATE PARTITION {quote_ident(victim.name)}"
        return DdlJob(
            **base,
            query=sql,
            mysql=[sql],
            final=final,
            destructive=True,
            frozen_pids=frozenset({victim.id}),
            drop_pids=(victim.id,),
        )

    def _plan_reorganize_partition(self, base: _JobIdentity, d: TableVersion) -> DdlJob | None:
        """Merge two adjacent partitions into one, or split one in two, under new partition ids."""
        part, _ = self._victim(d)
        w, rng = self.w, self.w.rng
        defs = sorted(part.defs, key=lambda p: p.less_than)
        n = 1 + max(int(p.name[1:]) for p in part.defs)
        i = rng.randrange(len(defs))
        lower = part.lower_bound(defs[i])
        old: tuple[PartitionDef, ...]
        if len(defs) >= 2 and (rng.random() < 0.5 or defs[i].less_than - lower < 2):
            i = min(i, len(defs) - 2)
            old = (defs[i], defs[i + 1])
            bounds = [defs[i + 1].less_than]
        elif defs[i].less_than - lower >= 2:
            old = (defs[i],)
            bounds = [(lower + defs[i].less_than) // 2, defs[i].less_than]
        else:
            return None
        new = tuple(
            PartitionDef(pid, f"p{n + k}", b)
            for k, (pid, b) in enumerate(zip(w.ids.take(len(bounds)), bounds, strict=True))
        )
        old_ids = {p.id for p in old}
        at = next(k for k, p in enumerate(part.defs) if p.id in old_ids)
        kept = tuple(p for p in part.defs if p.id not in old_ids)
        final_defs = (*kept[:at], *new, *kept[at:])
        steps = [
            replace(d, partition=replace(part, adding=new, dropping=old, ddl_state=state))
            for state in (DELETE_ONLY, WRITE_ONLY, WRITE_REORG)
        ]
        steps += [
            replace(d, partition=replace(part, defs=final_defs, adding=new, dropping=old, ddl_state=state))
            for state in (DELETE_REORG, PUBLIC)
        ]
        names = ", ".join(quote_ident(p.name) for p in old)
        into = ", ".join(f"PARTITION {quote_ident(p.name)} VALUES LESS THAN ({p.less_than})" for p in new)
        sql = f"ALTER TABLE {d.qualified} REORGANIZE PARTITION {names} INTO ({into})"
        return DdlJob(
            **base,
            query=sql,
            mysql=[sql],
            final=replace(d, partition=replace(part, defs=final_defs)),
            steps=steps,
            final_state=NONE,
            destructive=True,
            frozen_pids=frozenset(old_ids | {p.id for p in new}),
            drop_pids=tuple(p.id for p in old),
            raw_args=[[p.id for p in old]],  # JobVersion1 finished args: OldPhysicalTblIDs
            reorg=new,
        )

    def _plan_exchange(self, job_id: int) -> DdlJob | None:
        """EXCHANGE PARTITION, as TiDB runs it (``onExchangeTablePartition``): first a normal table nt with
        the partitioned table pt's columns (same column ids, as ``CREATE TABLE ... LIKE`` and ``REMOVE
        PARTITIONING`` leave them: TiDB requires it), whose inserts keep to partition p's range (TiDB
        validates them); then the job on nt (job.table_id = nt's id, raw_args [p's id, pt's db id, pt's id,
        p's name, with validation]) that gives nt p's id and p nt's id, done with pt's TableInfo."""
        w, rng = self.w, self.w.rng
        if self._pair is None:
            cands = [d for d in self._eligible(partitioned=True) if d.pk_kind == "int"]
            if not cands:
                return None
            pt = rng.choice(cands)
            assert pt.partition is not None
            p = rng.choice(pt.partition.defs)
            uid = w.next_uid
            w.next_uid += 1
            nt = replace(
                pt, uid=uid, table_id=w.ids.take()[0], name=self._fresh_name(pt.name, "x"), partition=None,
                update_ts=0, revision=1,
            )  # fmt: skip
            w.key_bounds[uid] = (pt.partition.lower_bound(p), p.less_than)
            self._pair = (pt.uid, uid, p)
            sql = nt.create_sql()
            return DdlJob(
                job_id, "create_table", uid, nt.db, nt.name, nt.table_id, sql, [nt.create_sql(mysql=True)], nt
            )
        pt_uid, nt_uid, p = self._pair
        pt_now, nt_now = w.catalog.done.get(pt_uid), w.catalog.done.get(nt_uid)
        if pt_now is None or nt_now is None or w.long_uids[pt_uid] or w.long_uids[nt_uid]:
            return None
        pt, nt = pt_now, nt_now
        assert pt.partition is not None
        swapped = tuple(replace(d, id=nt.table_id) if d.id == p.id else d for d in pt.partition.defs)
        pt_final = replace(pt, partition=replace(pt.partition, defs=swapped))
        sql = f"ALTER TABLE {pt.qualified} EXCHANGE PARTITION {quote_ident(p.name)} WITH TABLE {nt.qualified}"
        return DdlJob(
            id=job_id, kind="exchange_partition", uid=nt_uid, db=nt.db, table_name=nt.name,
            table_id=nt.table_id, query=sql, mysql=[sql], final=replace(nt, table_id=p.id),
            steps=[nt],  # StateWriteOnly: nt carries ExchangePartitionInfo, writers see no change
            final_state=NONE, destructive=True, frozen_pids=frozenset({p.id, nt.table_id}),
            raw_args=[p.id, w.db_ids[pt.db], pt.table_id, p.name, True], partner=pt_final,
        )  # fmt: skip


def partition_width(rows: int, partitions: int) -> int:
    """Id range per partition: wide enough that the seeded rows spread without running out of ids."""
    return max(1000, 4 * rows // max(1, partitions))


# The planner of each DDL kind that changes an existing table, after `_plan` chose the table.
_TABLE_PLANNERS: dict[str, Callable[[DdlRunner, _JobIdentity, TableVersion], DdlJob | None]] = {
    "drop_table": DdlRunner._plan_drop_table,
    "truncate_table": DdlRunner._plan_truncate_table,
    "rename_table": DdlRunner._plan_rename_table,
    "add_column": DdlRunner._plan_add_column,
    "drop_column": DdlRunner._plan_drop_column,
    "modify_column": DdlRunner._plan_modify_column,
    "rename_column": DdlRunner._plan_rename_column,
    "add_partition": DdlRunner._plan_add_partition,
    "drop_partition": DdlRunner._plan_drop_partition,
    "truncate_partition": DdlRunner._plan_truncate_partition,
    "reorganize_partition": DdlRunner._plan_reorganize_partition,
}
