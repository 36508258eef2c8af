"""The simulation's time loop: workload, online DDL and captures, tick by tick.

Layout of a run: tables are created before the initial snapshot ts (the first scan's checkpoint) and are
empty then. Each window has a gap (workload only; the first one also seeds ``rows`` rows per table) and
a capture that overlaps further workload. A capture's checkpoint is at or below the resolved ts the chain
reached so far (the first: the initial snapshot), chosen lower now and then, so consecutive windows
overlap and deliver events and DDL jobs twice.
"""

from __future__ import annotations

import math
import time
from typing import Any

from backfill.codec import table_span
from backfill.sources.kvscan import format as kvscan
from tidbsim.capture import Capture
from tidbsim.changelog import CHANGELOG_PATH, ChangeLog
from tidbsim.config import ScanSummary, SimulationConfig, SimulationResult
from tidbsim.ddl import DdlRunner, partition_width
from tidbsim.dumpling import DUMPLING_DIR, write_world_export
from tidbsim.expected import write_expected, write_index
from tidbsim.rng import SimRandom
from tidbsim.store import Store
from tidbsim.table_versions import TEMPLATES, build_table, collation_template
from tidbsim.txns import Txn, Workload
from tidbsim.world import OpLog, World
from tidelake.sqlident import quote_ident
from tidelake.tso import compose_ts

DATABASES = ("shop", "ops")
CAPTURE_MIN_TICKS = 6
CAPTURE_MAX_TICKS = 40


class Engine:
    def __init__(self, cfg: SimulationConfig) -> None:
        self.cfg = cfg
        out = cfg.out
        for sub in ("scans", "expected"):
            if (out / sub).exists():
                raise FileExistsError(f"{out / sub} already exists: simulate into an empty folder")
        (out / "scans").mkdir(parents=True)
        self.w = World(cfg, SimRandom(cfg.seed), store=Store(out))
        if cfg.mysql_url:
            self.w.oplog = OpLog(out / ".mysql-ops.pkl")
        if cfg.ticdc_changelog:
            self.w.changes = ChangeLog(out / CHANGELOG_PATH)
        self.load = Workload(self.w)
        self.ddl = DdlRunner(self.w, self.load, cfg.ddl_kinds)
        self.new_long: list[Txn] = []
        self.held_long: list[Txn] = []
        self.summaries: list[ScanSummary] = []
        self.index: list[dict[str, int | str]] = []
        self.initial_ts = 0
        self.resolved = 0
        self.checkpoint = 0
        self._starts = 0.0
        self.budget = 0
        self.started = 0  # random transactions started (seeding not counted)

    # ------------------------------------------------------------ setup

    def setup(self) -> None:
        w = self.w
        for i, db in enumerate(DATABASES):
            w.db_ids[db] = w.ids.take()[0]
            if w.changes is not None:  # created just before the first TSO the tables get
                w.changes.ddl(
                    compose_ts(w.tso.physical_ms - 1, i + 1),
                    db,
                    "",
                    f"CREATE DATABASE {quote_ident(db)}",
                    1,
                    None,
                )
        initial = []
        for i in range(self.cfg.tables):
            tmpl = TEMPLATES[i % len(TEMPLATES)]
            initial.append((tmpl, tmpl.name if i < len(TEMPLATES) else f"{tmpl.name}_{i // len(TEMPLATES)}"))
        initial += [(tmpl, tmpl.name) for tmpl in map(collation_template, self.cfg.collation_tables)]
        for tmpl, name in initial:
            uid = w.next_uid
            w.next_uid += 1
            ids = w.ids.take(1 + tmpl.partitions)
            finished = w.tso.next()
            v = build_table(
                tmpl,
                uid=uid,
                name=name,
                ids=ids,
                update_ts=finished,
                partition_width=partition_width(self.cfg.rows, tmpl.partitions),
            )
            w.catalog.finish(uid, finished, v)
            if w.oplog is not None:
                w.oplog.add((finished, "ddl", v.db, v.name, [v.create_sql(mysql=True)]))
            if w.changes is not None:
                w.changes.ddl(finished, v.db, v.name, v.create_sql(), 3, v.table_info())
        self._split_regions()
        w.tso.advance(5)
        self.initial_ts = self.resolved = self.checkpoint = w.tso.next()

    # ------------------------------------------------------------ time

    def tick(self, start_rate: float) -> None:
        w = self.w
        w.tick += 1
        w.tso.advance(w.rng.randint(1, 3))
        self._starts += start_rate
        while self._starts >= 1 and self.budget > 0:
            self._starts -= 1
            self.budget -= 1
            self.started += 1
            self.load.start()
        self.load.step()
        self.ddl.tick()
        if w.capture is not None:
            w.capture.tick(w.tick, w.tso.next(), self._region_min_lock())

    def _region_min_lock(self) -> dict[int, int]:
        w = self.w
        out: dict[int, int] = {}
        for t in w.store.tables.values():
            for key, lock in t.locks.items():
                rid = w.regions.locate(key).id
                if lock.start_ts < out.get(rid, 1 << 64):
                    out[rid] = lock.start_ts
        return out

    # ------------------------------------------------------------ windows

    def run(self) -> SimulationResult:
        began = time.perf_counter()
        self.setup()
        cfg = self.cfg
        per_scan = [cfg.txns // cfg.scans + (1 if k < cfg.txns % cfg.scans else 0) for k in range(cfg.scans)]
        try:
            for k in range(cfg.scans):
                self.window(k, self._window_txns(k, per_scan))
        finally:
            self.w.store.close()  # its value log's files, unlinked but open, on an error too
        events = sum(s.events for s in self.summaries)
        if self.w.changes is not None:
            self.w.changes.close()
        for sink in cfg.storage_sinks:
            from tidbsim.storage_sink import write_storage_sink

            write_storage_sink(cfg.out, sink)
        applied = False
        if self.w.oplog is not None:
            self.w.oplog.close()
            from tidbsim.mysql_apply import apply_ops, parse_mysql_url

            assert cfg.mysql_url is not None
            until = (
                self.summaries[cfg.mysql_until_scan - 1].resolved_ts
                if cfg.mysql_until_scan
                else self.resolved
            )
            apply_ops(parse_mysql_url(cfg.mysql_url), DATABASES, self.w.oplog.read(), until)
            self.w.oplog.path.unlink()
            applied = True
        stats = dict(sorted(self.w.stats.items()))
        stats["region_splits"] = self.w.regions.splits
        return SimulationResult(
            cfg.out, tuple(self.summaries), events, time.perf_counter() - began, stats, applied
        )

    def _window_txns(self, k: int, planned: list[int]) -> int:
        """Window k's transactions: as planned, or sized for ``cfg.events`` from the events per
        transaction started so far (seeding excluded: ~3 events a row, as estimate_txns_for_events)."""
        if not self.cfg.events or k == 0:
            return planned[k]
        made = sum(s.events for s in self.summaries)
        seeding = 3 * self.cfg.tables * self.cfg.rows
        per_txn = max(1.0, (made - seeding) / max(1, self.started))
        left = self.cfg.events - made - self.budget * per_txn  # the budget not started yet still comes
        return max(1, round(left / per_txn / (self.cfg.scans - k))) if left > 0 else 0

    def window(self, k: int, txns: int) -> None:
        w, cfg, rng = self.w, self.cfg, self.w.rng
        if k == 0 and cfg.rows:
            for uid in sorted(w.catalog.done):
                left = cfg.rows
                while left > 0:
                    n = min(cfg.seed_rows_per_txn, left)
                    left -= n
                    self.load.start("normal", uid=uid, rows=n)
                    self.tick(0)
        gap = rng.randint(8, 16)
        rate = txns / (gap + 12)
        self.budget += txns
        self.ddl.schedule([w.tick + rng.randint(1, gap + 10) for _ in range(cfg.ddls_per_scan)])
        long_at = {w.tick + gap - rng.randint(1, 4) for _ in range(cfg.open_lock_txns)}
        for _ in range(gap):
            self.tick(rate)
            if w.tick in long_at:
                txn = self.load.start("long", until_tick=None)
                if txn is not None:
                    self.new_long.append(txn)
        self.capture(k, rate)

    def _split_regions(self) -> None:
        """New table ids get their own region; regions holding too many keys split at the median key."""
        w = self.w
        for pid in sorted(set(w.catalog.uid_of_pid)):
            w.regions.split(table_span(pid)[0])
        for r in list(w.regions.regions):
            keys: list[bytes] = []
            for t in w.store.tables_between(0, None):
                lo, hi = table_span(t.pid)
                if r.overlaps(lo, hi):
                    keys.extend(t.keys_in(max(lo, r.start), min(hi, r.end) if r.end else hi))
            if len(keys) > self.cfg.region_split_keys:
                w.regions.split(keys[len(keys) // 2])

    def capture(self, k: int, rate: float) -> None:
        w, cfg, rng = self.w, self.cfg, self.w.rng
        self._split_regions()
        if k > 0:
            span = self.resolved - self.checkpoint
            self.checkpoint = self.resolved - (rng.randint(0, span // 2) if span > 1 else 0)
        checkpoint = self.checkpoint
        w.store.gc(checkpoint)
        current = w.tso.next()
        retired = {
            t.pid: t.dropped_at
            for t in w.store.tables.values()
            if t.dropped_at is not None and checkpoint < t.dropped_at <= current
        }
        scan_id = f"scan-{k + 1:05d}"
        scan_dir = cfg.out / "scans" / scan_id
        tables = [(v.db, v.table_info()) for v in w.catalog.tables_at(checkpoint)]  # (schema, TableInfo)
        kvscan.write_tables(scan_dir, tables)
        cap = Capture(
            scan_id,
            scan_dir,
            checkpoint_ts=checkpoint,
            current_ts=current,
            regions=list(w.regions.regions),
            store=w.store,
            rng=rng,
            start_tick=w.tick,
            row_group_size=cfg.row_group_size,
            rows_per_file=cfg.rows_per_file,
            retired=retired,
            lag_retired=cfg.lagging_retired_regions,
        )
        w.capture = cap
        for txn in self.held_long:  # locks held over the previous capture's end commit (or roll back) now
            self.load.release(txn, w.tick + rng.randint(1, 5))
        self.held_long, self.new_long = self.new_long, []
        start = w.tick
        while True:
            self.tick(rate)
            elapsed = w.tick - start
            initialized = all(s.initialized for s in cap.streams.values())
            if elapsed >= CAPTURE_MIN_TICKS and cap.all_caught_up():
                break
            if elapsed >= CAPTURE_MAX_TICKS and initialized:
                break
        events = cap.finish(w.tso.next(), self._region_min_lock())
        w.capture = None
        jobs = [job for finished, job in self.ddl.done_jobs if checkpoint < finished <= current]
        kvscan.write_ddl_jobs(scan_dir, jobs)
        pids = {p for _, info in tables for p in _physical_ids(info)}
        pids |= {
            p for job in jobs if job["binlog"]["TableInfo"] for p in _physical_ids(job["binlog"]["TableInfo"])
        }
        by_table: dict[int, set[int]] = {}
        for pid in pids:
            by_table.setdefault(w.catalog.uid_of_pid[pid], set()).add(pid)
        scan_resolved = cap.resolved_ts(by_table)
        self.resolved = max(self.resolved, scan_resolved)
        write_expected(cfg.out, scan_id, w, self.resolved)
        for export in cfg.dumpling_exports:
            if export.scan == len(self.index):
                write_world_export(cfg.out / DUMPLING_DIR / export.name, export, w, self.resolved)
        # The next capture's checkpoint is at least resolved - span // 2 (see the top of this method):
        # versions no read at that ts can see go now, so the store holds about one window, not two.
        w.store.gc(self.resolved - (self.resolved - checkpoint) // 2)
        kvscan.write_manifest(
            scan_dir, checkpoint, current, (kvscan.Region(r.id, r.start, r.end) for r in cap.regions)
        )
        kvscan.mark_success(scan_dir)
        self.index.append(
            {
                "scan_id": scan_id,
                "checkpoint_ts": checkpoint,
                "current_ts": current,
                "resolved_ts": self.resolved,
            }
        )
        write_index(cfg.out, self.index)
        for name, n in cap.counts.items():
            w.stats[f"captured_{name.lower()}"] += n
        w.stats["open_locks_at_capture_end"] += sum(len(t.locks) for t in w.store.tables.values())
        self.summaries.append(
            ScanSummary(scan_id, checkpoint, current, self.resolved, events, len(cap.regions), len(jobs))
        )


def _physical_ids(info: dict[str, Any]) -> list[int]:
    part = info.get("partition")
    if part and part.get("definitions"):
        return [int(d["id"]) for d in part["definitions"]]
    return [int(info["id"])]


def simulate(config: SimulationConfig) -> SimulationResult:
    """Simulate an upstream TiDB cluster and write its captures and expected states under ``config.out``."""
    return Engine(config).run()


def estimate_txns_for_events(events: int, *, tables: int, rows: int) -> int:
    """Transactions for about ``events`` events. Measured mix: seeding costs ~3 events per row (PREWRITE,
    COMMIT, then COMMITTED again in the next overlapping scan), a random transaction ~18."""
    return max(1, math.ceil((events - 3 * tables * rows) / 18))


__all__ = ["DATABASES", "Engine", "estimate_txns_for_events", "simulate"]
