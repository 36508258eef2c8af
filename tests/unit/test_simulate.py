"""The workload simulator, checked against a deliberately simple second reading of its own output.

The naive consumer below shares nothing with the simulator but the codec: it pairs PREWRITE/COMMIT by
(start_ts, key) over a whole scan, replays committed rows in commit-ts order within each scan's share of
the chain, applies the DDL jobs it finds, and must arrive at the expected state the simulator wrote.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backfill.codec import TableSchema, decode_record_key, decode_row, record_key, table_span
from backfill.codec.values import ZERO_DATE, fill_value
from backfill.sources.kvscan.format import EVENT_SCHEMA
from tidbsim import DDL_KINDS, SimulationConfig, load_expected, load_index, simulate

pytestmark = pytest.mark.unit

SMALL = {"tables": 4, "rows": 24, "txns": 160, "scans": 3}
SEEDS = range(1, 13)


def run(tmp_path: Path, seed: int, **overrides: Any) -> Path:
    out = tmp_path / f"sim-{seed}"
    simulate(SimulationConfig(out=out, seed=seed, **{**SMALL, **overrides}))
    return out


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """One small simulation per seed, shared by the property tests."""
    root = tmp_path_factory.mktemp("sims")
    return {seed: run(root, seed, check_codec=seed <= 3) for seed in SEEDS}


# ---------------------------------------------------------------- reading a scan


class Scan:
    def __init__(self, path: Path) -> None:
        self.id = path.name
        self.manifest = json.loads((path / "manifest.json").read_text())
        self.checkpoint = self.manifest["checkpoint_ts"]
        self.current = self.manifest["current_ts"]
        self.events = pq.read_table(path / "events").to_pylist()
        self.events.sort(key=lambda e: (e["region_id"], e["seq"]))
        lines = (path / "schema" / "tables.jsonl").read_text().splitlines()
        self.tables = [json.loads(line) for line in lines]
        self.jobs = [
            json.loads(line) for line in (path / "schema" / "ddl_jobs.jsonl").read_text().splitlines()
        ]

    def streams(self) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for e in self.events:
            out[e["region_id"]].append(e)
        return out


def scans_of(out: Path) -> list[Scan]:
    return [Scan(p) for p in sorted((out / "scans").iterdir()) if (p / "_SUCCESS").exists()]


def physical_ids(info: dict[str, Any]) -> list[int]:
    part = info.get("partition")
    return [d["id"] for d in part["definitions"]] if part and part.get("definitions") else [info["id"]]


# ---------------------------------------------------------------- the naive consumer


def naive_resolved(scan: Scan) -> int:
    """Region: last RESOLVED after INITIALIZED (or the checkpoint); table: min over its regions;
    global: min over tables, capped by current_ts."""
    region_ts = {}
    for rid, stream in scan.streams().items():
        ts, initialized = scan.checkpoint, False
        for e in stream:
            if e["type"] == "INITIALIZED":
                initialized = True
            elif e["type"] == "RESOLVED" and initialized:
                ts = max(ts, e["resolved_ts"])
        region_ts[rid] = ts
    regions = scan.manifest["regions"]
    infos = [t["table_info"] for t in scan.tables]
    infos += [j["binlog"]["TableInfo"] for j in scan.jobs if j["binlog"]["FinishedTS"] <= scan.current]
    resolved = scan.current
    for info in infos:
        for pid in physical_ids(info):
            lo, hi = table_span(pid)
            for r in regions:
                start, end = bytes.fromhex(r["start_key"]), bytes.fromhex(r["end_key"])
                if (not end or lo < end) and start < hi:
                    resolved = min(resolved, region_ts.get(r["region_id"], scan.checkpoint))
    return resolved


def committed_changes(scan: Scan) -> list[tuple[int, bytes, bytes | None]]:
    """(commit_ts, key, value or None for a delete), deduplicated, from one scan."""
    prewrites: dict[tuple[int, bytes], dict[str, Any]] = {}
    for e in scan.events:
        if e["type"] != "PREWRITE":
            continue
        if e["op_type"] == "PUT" and not e["value"]:
            continue  # a fake prewrite (lock rewrite): never the row's value
        k = (e["start_ts"], e["key"])
        if k not in prewrites or e["generation"] >= prewrites[k]["generation"]:
            prewrites[k] = e
    committed = {(e["start_ts"], e["key"], e["commit_ts"]) for e in scan.events if e["type"] == "COMMITTED"}
    out = {}
    for e in scan.events:
        if e["type"] == "COMMITTED":
            value = e["value"] if e["op_type"] == "PUT" else None
        elif e["type"] == "COMMIT":
            p = prewrites.get((e["start_ts"], e["key"]))
            if p is None:
                assert (e["start_ts"], e["key"], e["commit_ts"]) in committed, f"unmatched COMMIT {e}"
                continue
            value = p["value"] if p["op_type"] == "PUT" else None
        else:
            continue
        out[(e["commit_ts"], e["key"])] = value
    return sorted((ts, key, value) for (ts, key), value in out.items())


class Catalogs:
    """Which TableInfo each logical table has at any ts: the first scan's tables plus done jobs."""

    def __init__(self, first: Scan) -> None:
        self.ts = [first.checkpoint]
        self.maps = [{t["table_info"]["id"]: (t["schema_name"], t["table_info"]) for t in first.tables}]
        self.seen: set[int] = set()
        self.pending: list[dict[str, Any]] = []

    def add_jobs(self, jobs: list[dict[str, Any]]) -> None:
        for j in jobs:
            if j["id"] not in self.seen:
                self.seen.add(j["id"])
                self.pending.append(j)

    def take(self, upto: int) -> list[dict[str, Any]]:
        ready = sorted(
            (j for j in self.pending if j["binlog"]["FinishedTS"] <= upto),
            key=lambda j: j["binlog"]["FinishedTS"],
        )
        self.pending = [j for j in self.pending if j["binlog"]["FinishedTS"] > upto]
        return ready

    def apply(self, job: dict[str, Any]) -> None:
        m = dict(self.maps[-1])
        info = job["binlog"]["TableInfo"]
        if job["type"] == 4:
            m.pop(job["table_id"])
        else:
            m.pop(job["table_id"], None)
            m[info["id"]] = (job["schema_name"], info)
        self.ts.append(job["binlog"]["FinishedTS"])
        self.maps.append(m)

    def at(self, ts: int) -> dict[int, tuple[str, dict[str, Any]]]:
        return self.maps[bisect.bisect_right(self.ts, ts) - 1]


_schemas: dict[int, TableSchema] = {}


def schema_of(info: dict[str, Any]) -> TableSchema:
    s = _schemas.get(id(info))
    if s is None or s.table_info is not info:
        s = _schemas[id(info)] = TableSchema.from_table_info(info)
    return s


def naive_chain(out: Path) -> list[tuple[str, int, dict[tuple[str, str], list[dict[str, Any]]]]]:
    """Replay the scans as a simple consumer; per scan: (scan id, resolved ts, rows per table)."""
    scans = scans_of(out)
    cat = Catalogs(scans[0])
    state: dict[int, dict[bytes, tuple[dict[int, Any], int]]] = defaultdict(dict)
    resolved = scans[0].checkpoint
    results = []
    for scan in scans:
        assert scan.checkpoint <= resolved, f"{scan.id} leaves a gap"
        new_resolved = max(resolved, naive_resolved(scan))
        cat.add_jobs(scan.jobs)
        steps: list[tuple[int, int, Any]] = [
            (ts, 1, (key, value))
            for ts, key, value in committed_changes(scan)
            if resolved < ts <= new_resolved
        ]
        steps += [(j["binlog"]["FinishedTS"], 2, j) for j in cat.take(new_resolved)]
        for ts, kind, what in sorted(steps, key=lambda s: (s[0], s[1])):
            if kind == 2:
                apply_ddl(cat, state, what)
                continue
            key, value = what
            pid = decode_record_key(key).table_id
            owner = [(tid, info) for tid, (_db, info) in cat.at(ts - 1).items() if pid in physical_ids(info)]
            if not owner:
                continue
            tid, info = owner[0]
            if value is None:
                state[tid].pop(key, None)
                continue
            schema = schema_of(info)
            decoded = decode_row(schema, key, value)
            state[tid][key] = ({c.id: decoded[c.name] for c in schema.columns}, ts)
        resolved = new_resolved
        results.append((scan.id, resolved, output(cat.at(resolved), state)))
    return results


def apply_ddl(
    cat: Catalogs, state: dict[int, dict[bytes, tuple[dict[int, Any], int]]], job: dict[str, Any]
) -> None:
    old = cat.at(job["binlog"]["FinishedTS"] - 1).get(job["table_id"])
    cat.apply(job)
    info = job["binlog"]["TableInfo"]
    if job["type"] in (4, 11):
        state.pop(job["table_id"], None)
        return
    live = set(physical_ids(info))
    rows = state[info["id"]]
    for key in [k for k in rows if decode_record_key(k).table_id not in live]:
        row = rows.pop(key)
        if job["type"] == 64:  # REORGANIZE PARTITION: the row lives on in the new partition of its key
            handle = decode_record_key(key).handle
            bounds = [(int(d["less_than"][0]), d["id"]) for d in info["partition"]["definitions"]]
            rows[record_key(min(b for b in bounds if handle < b[0])[1], handle)] = row
    if job["type"] == 12 and old is not None:
        old_ids = {c["name"]["O"]: c["id"] for c in old[1]["cols"]}
        for c in info["cols"]:
            prev = old_ids.get(c["name"]["O"])
            if prev is not None and prev != c["id"]:  # a reorganising MODIFY COLUMN: new column id
                scale = c["type"]["Decimal"]
                for row, _ts in rows.values():
                    v = row.pop(prev, None)
                    row[c["id"]] = None if v is None else Decimal(v).quantize(Decimal(1).scaleb(-scale))


def output(
    tables: dict[int, tuple[str, dict[str, Any]]], state: dict[int, dict[bytes, tuple[dict[int, Any], int]]]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out = {}
    for tid, (db, info) in tables.items():
        schema = schema_of(info)
        rows = []
        for key, (row, ts) in state.get(tid, {}).items():
            r: dict[str, Any] = {}
            if schema.pk_kind == "rowid":
                r["_tidb_rowid"] = decode_record_key(key).handle
            for c in schema.columns:
                if c.id in row:
                    r[c.name] = row[c.id]
                else:
                    v = fill_value(c)
                    r[c.name] = None if v is ZERO_DATE else v
            r["_tidb_commit_ts"] = ts
            rows.append(r)
        rows.sort(key=lambda r: tuple(r[n] for n in schema.pk_columns))
        out[(db, schema.name)] = rows
    return out


# ---------------------------------------------------------------- the main property


@pytest.mark.parametrize("seed", SEEDS)
def test_naive_replay_of_the_scans_reaches_the_expected_state(sims: dict[int, Path], seed: int) -> None:
    out = sims[seed]
    index = load_index(out)
    replayed = naive_chain(out)
    assert [s["scan_id"] for s in index] == [r[0] for r in replayed]
    for entry, (scan_id, resolved, tables) in zip(index, replayed, strict=True):
        assert entry["resolved_ts"] == resolved, scan_id
        assert entry["checkpoint_ts"] <= resolved <= entry["current_ts"]
        expected = load_expected(out, scan_id)
        assert set(expected) == set(tables), scan_id
        for name, table in expected.items():
            assert table.to_pylist() == tables[name], f"{scan_id} {name}"


# ---------------------------------------------------------------- the contract's shape


def test_events_have_exactly_the_contract_columns(sims: dict[int, Path]) -> None:
    for path in sorted((sims[1] / "scans").iterdir()):
        for f in (path / "events").glob("*.parquet"):
            assert pq.read_schema(f).remove_metadata() == EVENT_SCHEMA
        assert (path / "_SUCCESS").exists()
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["format"] == "tidelake.kv-scan" and manifest["version"] == 1
        assert manifest["checkpoint_ts"] <= manifest["current_ts"]


def test_scan_ids_sort_in_capture_order_and_windows_chain(sims: dict[int, Path]) -> None:
    for out in sims.values():
        index = load_index(out)
        assert [s["scan_id"] for s in index] == sorted(s["scan_id"] for s in index)
        for prev, nxt in pairwise(index):
            assert nxt["checkpoint_ts"] <= prev["resolved_ts"] <= nxt["resolved_ts"]
            assert nxt["current_ts"] > prev["current_ts"]


def test_regions_cover_the_key_space_and_split(sims: dict[int, Path]) -> None:
    grew = False
    for out in sims.values():
        scans = scans_of(out)
        for scan in scans:
            regions = scan.manifest["regions"]
            assert regions[0]["start_key"] == "" and regions[-1]["end_key"] == ""
            for a, b in pairwise(regions):
                assert a["end_key"] == b["start_key"] and a["start_key"] < b["start_key"]
            assert {e["region_id"] for e in scan.events} <= {r["region_id"] for r in regions}
        ids = [{r["region_id"] for r in s.manifest["regions"]} for s in scans]
        grew |= any(len(b) > len(a) and not b <= a for a, b in pairwise(ids))
    assert grew


def test_expected_tables_use_the_delta_schema_sorted_by_primary_key(sims: dict[int, Path]) -> None:
    out = sims[2]
    last = load_index(out)[-1]["scan_id"]
    scan = scans_of(out)[-1]
    infos = {(t["schema_name"], t["table_info"]["name"]["O"]): t["table_info"] for t in scan.tables}
    for (db, name), table in load_expected(out, last).items():
        assert table.schema.names[-1] == "_tidb_commit_ts"
        assert table.schema.field("_tidb_commit_ts").type == pa.int64()
        if (db, name) in infos:
            schema = TableSchema.from_table_info(infos[(db, name)])
            if not scan.jobs:
                assert table.schema.names[:-1] == list(schema.arrow_schema.names)
            rows = table.to_pylist()
            keys = [tuple(r[n] for n in schema.pk_columns) for r in rows]
            assert keys == sorted(keys) and len(set(keys)) == len(keys)


# ---------------------------------------------------------------- stream properties


def test_resolved_ts_is_truthful_per_region(sims: dict[int, Path]) -> None:
    for out in sims.values():
        for scan in scans_of(out):
            for rid, stream in scan.streams().items():
                resolved = 0
                initialized = False
                for e in stream:
                    if e["type"] == "RESOLVED":
                        assert initialized, f"RESOLVED before INITIALIZED in region {rid}"
                        assert e["resolved_ts"] > resolved
                        resolved = e["resolved_ts"]
                    elif e["type"] == "INITIALIZED":
                        assert not initialized
                        initialized = True
                    elif e["type"] in ("COMMIT", "COMMITTED"):
                        assert e["commit_ts"] > resolved, f"{scan.id} region {rid}: commit below resolved"
                assert initialized


def test_incremental_scan_is_not_bounded_by_current_ts(sims: dict[int, Path]) -> None:
    beyond = 0
    for out in sims.values():
        for scan in scans_of(out):
            beyond += sum(
                1 for e in scan.events if e["type"] == "COMMITTED" and e["commit_ts"] > scan.current
            )
    assert beyond > 0


def test_events_and_ddl_jobs_are_delivered_twice_across_scans(sims: dict[int, Path]) -> None:
    dup_rows = dup_jobs = 0
    for out in sims.values():
        seen: dict[tuple[Any, ...], str] = {}
        jobs: dict[int, str] = {}
        for scan in scans_of(out):
            for e in scan.events:
                if e["type"] in ("COMMIT", "COMMITTED"):
                    k = (e["key"], e["start_ts"], e["commit_ts"])
                    if seen.setdefault(k, scan.id) != scan.id:
                        dup_rows += 1
            for j in scan.jobs:
                if jobs.setdefault(j["id"], scan.id) != scan.id:
                    dup_jobs += 1
    assert dup_rows > 0 and dup_jobs > 0


def test_some_commits_precede_their_prewrites(sims: dict[int, Path]) -> None:
    found = 0
    for out in sims.values():
        for scan in scans_of(out):
            for stream in scan.streams().values():
                commits: dict[tuple[int, bytes], int] = {}
                init = next(e["seq"] for e in stream if e["type"] == "INITIALIZED")
                for e in stream:
                    k = (e["start_ts"], e["key"])
                    if e["type"] == "COMMIT":
                        commits.setdefault(k, e["seq"])
                    elif e["type"] == "PREWRITE" and e["value"] and k in commits and e["seq"] < init:
                        found += 1
    assert found > 0


def test_some_locks_are_still_open_when_a_capture_ends(sims: dict[int, Path]) -> None:
    open_locks = 0
    for out in sims.values():
        for scan in scans_of(out):
            ended = {
                (e["start_ts"], e["key"])
                for e in scan.events
                if e["type"] in ("COMMIT", "COMMITTED", "ROLLBACK")
            }
            open_locks += sum(
                1
                for e in scan.events
                if e["type"] == "PREWRITE"
                and (e["start_ts"], e["key"]) not in ended
                and e["start_ts"] < scan.current
            )
        assert load_index(out)[-1]["resolved_ts"] < load_index(out)[-1]["current_ts"]
    assert open_locks > 0


def test_fake_prewrites_pipelined_generations_1pc_and_rollbacks_occur(sims: dict[int, Path]) -> None:
    fake = pipelined = one_pc = rollbacks = v1_rows = 0
    for out in sims.values():
        for scan in scans_of(out):
            prewritten = {e["start_ts"] for e in scan.events if e["type"] == "PREWRITE"}
            for e in scan.events:
                if e["type"] == "PREWRITE" and e["op_type"] == "PUT" and e["value"] == b"":
                    fake += 1
                if e["type"] == "PREWRITE" and e["generation"] > 1:
                    pipelined += 1
                if (
                    e["type"] == "COMMITTED"
                    and e["start_ts"] not in prewritten
                    and e["commit_ts"] > scan.checkpoint
                ):
                    one_pc += 1
                if e["type"] == "ROLLBACK":
                    rollbacks += 1
                if e["type"] in ("COMMITTED", "PREWRITE") and e["value"] and e["value"][0] != 0x80:
                    v1_rows += 1
    assert fake and pipelined and one_pc and rollbacks and v1_rows


def test_primary_key_changes_are_a_delete_and_a_put_at_one_commit_ts(sims: dict[int, Path]) -> None:
    found = 0
    for out in sims.values():
        for scan in scans_of(out):
            by_txn: dict[tuple[int, int], set[str]] = defaultdict(set)
            for e in scan.events:
                if e["type"] == "COMMITTED":
                    by_txn[(e["start_ts"], e["commit_ts"])].add(e["op_type"])
            found += sum(1 for ops in by_txn.values() if ops == {"PUT", "DELETE"})
    assert found > 0


def _v2_ids(value: bytes) -> set[int]:
    """Column ids stored in a small row-v2 value (test-side parser: header, then u8 ids)."""
    if not value or value[0] != 0x80 or value[1] & 1:
        return set()
    n = int.from_bytes(value[2:4], "little") + int.from_bytes(value[4:6], "little")
    return set(value[6 : 6 + n])


def test_every_ddl_kind_occurs_and_rows_written_during_ddl_carry_tidb_state(tmp_path: Path) -> None:
    kinds: set[str] = set()
    early_new_column = False
    for seed in range(1, 7):
        out = run(tmp_path, 100 + seed, scans=6, txns=240, rows=16, ddls_per_scan=2)
        scans = scans_of(out)
        for scan in scans:
            for j in scan.jobs:
                t = j["type"]
                name = {
                    3: "create_table",
                    4: "drop_table",
                    5: "add_column",
                    6: "drop_column",
                    11: "truncate_table",
                    14: "rename_table",
                    19: "add_partition",
                    20: "drop_partition",
                    23: "truncate_partition",
                    64: "reorganize_partition",
                }.get(t)
                if t == 12:
                    name = "rename_column" if "RENAME COLUMN" in j["query"] else "modify_column"
                kinds.add(name or f"type {t}")
                assert j["state"] == 4 and j["binlog"]["FinishedTS"] > scan.checkpoint
                if t == 5:  # a row committed before the ADD COLUMN finished already holds the new column id
                    new_id = j["binlog"]["TableInfo"]["cols"][-1]["id"]
                    early_new_column |= any(
                        e["type"] == "COMMITTED"
                        and e["commit_ts"] < j["binlog"]["FinishedTS"]
                        and new_id in _v2_ids(e["value"] or b"")
                        and decode_record_key(e["key"]).table_id in physical_ids(j["binlog"]["TableInfo"])
                        for s in scans
                        for e in s.events
                    )
    assert kinds == set(DDL_KINDS)
    assert early_new_column


def test_same_seed_same_output(tmp_path: Path) -> None:
    a, b = run(tmp_path / "a", 7), run(tmp_path / "b", 7)
    for sa, sb in zip(scans_of(a), scans_of(b), strict=True):
        assert sa.events == sb.events and sa.manifest == sb.manifest and sa.jobs == sb.jobs
    assert load_index(a) == load_index(b)


def test_config_rejects_bad_sizes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="scans"):
        SimulationConfig(out=tmp_path, scans=0)
    with pytest.raises(ValueError, match="unknown DDL kinds"):
        SimulationConfig(out=tmp_path, ddl_kinds=("explode_table",))


def test_refuses_to_overwrite_a_previous_run(tmp_path: Path) -> None:
    run(tmp_path, 3, txns=10, scans=1, rows=2)
    with pytest.raises(FileExistsError):
        run(tmp_path, 3, txns=10, scans=1, rows=2)


def test_simulate_command_prints_json_and_refuses_an_occupied_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tidbsim.cli import simulate_command
    from tidelake.errors import TidelakeError

    out = tmp_path / "cli"
    assert simulate_command(str(out), seed=4, rows=4, txns=20, scans=2, as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["scan_id"] for s in doc["scans"]] == [s["scan_id"] for s in load_index(out)]
    assert doc["events"] == sum(s["events"] for s in doc["scans"]) > 0
    with pytest.raises(TidelakeError, match="already exists"):
        simulate_command(str(out), seed=4, rows=4, txns=20, scans=2)
    with pytest.raises(TidelakeError, match="scans"):
        simulate_command(str(tmp_path / "other"), scans=0)


def test_a_hot_table_takes_its_share_of_the_events(tmp_path: Path) -> None:
    out = run(tmp_path, 9, rows=10, txns=400, scans=2, ddls_per_scan=0, hot_table_share=0.7)
    per_table: dict[int, int] = defaultdict(int)
    for scan in scans_of(out):
        for e in scan.events:
            if e["type"] in ("COMMIT", "COMMITTED"):
                per_table[decode_record_key(e["key"]).table_id] += 1
    hot = scans_of(out)[0].tables[0]["table_info"]["id"]
    assert per_table[hot] > 0.5 * sum(per_table.values())
