"""EXCHANGE PARTITION in the schema history and the kv-scan id mapping: after the job's finished ts the
partition's old id belongs to the normal table and the normal table's old id to the partition (TiDB's
onExchangeTablePartition; TiCDC's snapshot re-creates the normal table under the partition's id)."""

from __future__ import annotations

import copy

import pyarrow as pa
import pytest

from backfill.apply.exchange import exchanges
from backfill.codec import record_key
from backfill.codec.history import exchanged_partition_id
from backfill.sources.kvscan.capture_tables import build_catalog
from backfill.sources.kvscan.chain import table_resolved_ts
from backfill.sources.kvscan.format import TableDoc
from backfill.sources.kvscan.range_collapse import CollapsePlan, collapse_changes
from backfill.sources.kvscan.resolved import SpanProgress
from backfill.sources.kvscan.source import id_owners
from tests.captures import ddl_job, users_table
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

EXCHANGE_PARTITION, T = 42, 150


def partitioned(p0: int) -> dict:
    """app.events (id 300), RANGE on id: p0 (< 10) with id `p0`, p1 (MAXVALUE) with id 302."""
    table = users_table(300, "events")
    definitions = [(p0, "p0", "10"), (302, "p1", "MAXVALUE")]
    table["partition"] = {"type": 1, "expr": "`id`", "num": 2, "definitions": [
        {"id": pid, "name": {"O": n, "L": n}, "less_than": [lt]} for pid, n, lt in definitions]}  # fmt: skip
    return table


BEFORE, AFTER = partitioned(301), partitioned(400)
SPARE = users_table(400, "spare")


def exchange_job(raw_args: object = (301, 2, 300, "p0", True)) -> dict:
    """Shaped as TiDB writes it: on the normal table (its old id), with the partitioned table's info."""
    args = list(raw_args) if isinstance(raw_args, tuple) else raw_args
    return ddl_job(7, EXCHANGE_PARTITION, "app", AFTER, T, table_id=400) | {"raw_args": args}


def catalog(jobs: list[dict], patterns: tuple[str, ...] = ("*.*",)):
    docs = [TableDoc("app", BEFORE), TableDoc("app", SPARE)]
    return build_catalog(docs, jobs, 100, patterns, "tables.jsonl")


@pytest.mark.parametrize(
    "raw_args",
    [
        [301, 2, 300, "p0", True],  # JobVersion1: a list
        [{"partition_id": 301, "pt_schema_id": 2, "pt_table_id": 300, "partition_name": "p0"}],  # v2
        {"partition_id": 301},
    ],
)
def test_the_partition_id_is_read_from_either_job_version(raw_args: object) -> None:
    assert exchanged_partition_id({"raw_args": raw_args}) == 301


def test_a_job_without_the_partition_id_names_itself() -> None:
    assert exchanged_partition_id({"raw_args": None}) is None
    with pytest.raises(InputError, match=r"DDL job 7 \(EXCHANGE PARTITION\) on table 400 names no partition"):
        catalog([exchange_job([])])


def test_each_table_takes_the_other_id_at_the_finished_ts() -> None:
    events, spare = catalog([exchange_job()]).tables
    assert [v.schema.physical_ids for v in events.versions] == [(301, 302), (400, 302)]
    assert [v.schema.table_id for v in spare.versions] == [400, 301]
    assert spare.versions[1].schema.name == "spare" and not spare.versions[1].schema.partition_names
    assert spare.versions[1].job_type == EXCHANGE_PARTITION and spare.versions[1].query == "-- job 7"
    # each table retires the id it gave up at T (it holds that table back only below T)
    assert (events.retired_at(301), events.retired_at(400), events.retired_at(302)) == (T, None, None)
    assert (spare.retired_at(400), spare.retired_at(301)) == (T, None)
    assert events.live_intervals(400) == [(T, None)] and spare.live_intervals(301) == [(T, None)]


def test_rows_of_an_exchanged_id_go_to_its_owner_at_their_commit_ts() -> None:
    tables = catalog([exchange_job()]).tables
    owners = id_owners(tables)
    assert owners[301] == [(100, T, 0), (T, None, 1)] and owners[400] == [(100, T, 1), (T, None, 0)]
    plan = CollapsePlan(
        table_of_physical={pid: spans[0][2] for pid, spans in owners.items()},
        known_ids=frozenset(owners),
        live={pid: [(a, u) for a, u, _ in spans] for pid, spans in owners.items()},
        table_floor={0: 100, 1: 100},
        resolved_ts=1000,
        segment_bounds={i: t.segment_bounds() for i, t in enumerate(tables)},
        windows={"s1": (100, 1000)},
        handover={pid: spans for pid, spans in owners.items() if len({s[2] for s in spans}) > 1},
    )
    keys = [record_key(301, 1), record_key(301, 2), record_key(400, 5), record_key(400, 6)]
    changes = pa.table({
        "scan_id": ["s1"] * 4, "region_id": pa.array([1] * 4, pa.int64()), "key": pa.array(keys, pa.binary()),
        "op": ["PUT"] * 4, "value": pa.array([b"v"] * 4, pa.binary()),
        "commit_ts": pa.array([T, T + 1, T, T + 1], pa.int64()),
    })  # fmt: skip
    got = collapse_changes(changes, plan)
    routed = sorted(zip(got.column("key").to_pylist(), got.column("table_idx").to_pylist(),
                        got.column("segment").to_pylist(), strict=True))  # fmt: skip
    # at T a row still belongs to the id's old owner (commit_ts - 1 rule), after it to the new one
    assert routed == sorted([(keys[0], 0, 0), (keys[1], 1, 1), (keys[2], 1, 0), (keys[3], 0, 1)])


def test_untouched_tables_keep_their_history() -> None:
    other = copy.deepcopy(users_table(500, "other"))
    docs = [TableDoc("app", BEFORE), TableDoc("app", SPARE), TableDoc("app", other)]
    tables = build_catalog(docs, [exchange_job()], 100, ("*.*",), "tables.jsonl").tables
    assert len(tables[2].versions) == 1


def test_a_lagging_region_holds_back_the_table_that_took_the_id_over_not_the_one_that_gave_it_up() -> None:
    """The partition's old id 301 lags at T - 10: the partitioned table gave it up at T (like a dropped
    partition, its state from T on does not depend on it), the normal table owns it from T on and waits.
    The run's resolved ts is the minimum over both tables, so the exchange waits for 301's rows up to T.
    The normal table's old id 400 lagging is the same the other way round."""
    events, spare = catalog([exchange_job()]).tables

    def resolved(table, lag: int) -> int:
        spans = {pid: SpanProgress(T - 10 if pid == lag else 900) for pid in table.physical_ids()}
        return table_resolved_ts("t", spans, {pid: table.retired_at(pid) for pid in spans}, 1000).resolved_ts

    assert (resolved(events, 301), resolved(spare, 301)) == (900, T - 10)
    assert (resolved(events, 400), resolved(spare, 400)) == (T - 10, 900)


def test_tables_keyed_by_tidb_rowid_are_refused_before_any_commit() -> None:
    """Without a clustered key the exchange can give two rows of the partitioned table one _tidb_rowid
    (pingcap/tidb#65067): the run stops naming the job and both tables."""
    before, after, spare = copy.deepcopy(BEFORE), copy.deepcopy(AFTER), copy.deepcopy(SPARE)
    for table in (before, after, spare):
        table["pk_is_handle"] = False
    job = ddl_job(7, EXCHANGE_PARTITION, "app", after, T, table_id=400) | {
        "raw_args": [301, 2, 300, "p0", True]
    }
    docs = [TableDoc("app", before), TableDoc("app", spare)]
    tables = build_catalog(docs, [job], 100, ("*.*",), "tables.jsonl").tables
    with pytest.raises(InputError, match=r"DDL job 7 .* between app.events and app.spare: .*_tidb_rowid"):
        exchanges(tables, [100, 100], 1000)
    assert exchanges(tables, [T, T], 1000) == {}  # both sides committed: nothing left to refuse
