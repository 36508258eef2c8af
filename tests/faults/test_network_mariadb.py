"""Network faults between reconcile and a real MariaDB, through Toxiproxy (issue 52).

The fault lands at a known moment: the run's own progress tracker sees each stage as it starts (the
hook its progress lines use), and `FaultAt` adds a toxic to the proxy right there: a reset of every
connection as the chunk checksums start, as the rows to repair are read, or answers slower than
`read_timeout`. Each case asserts what happened: the table was read again and gave the same verdict
(and a repair committed once, tagged, re-checked), or it stopped with an error naming the server and
the Delta table is unchanged.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import pytest

from reconcile import engine
from reconcile.options import RunOptions
from reconcile.result import ReconcileResult
from reconcile.upstream import open_upstream
from tests.faults.harness import untagged_commits
from tests.toxiproxy import Proxy
from tidelake import delta
from tidelake.config import load_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DB = "netfault"
JOB = "netfault"
APP_ID = f"tidelake:{JOB}"
ROWS = 3000
RESOLVED_TS = 449_000_000_000_000_000
PROXIES = itertools.count()
CHANGED, MISSING, EXTRA = (30, 3000), 60, 91  # keys (multiples of 3) of the Delta copy's differences


def upstream_rows() -> list[tuple[int, str, int]]:
    return [(i * 3, f"value {i}", i % 97) for i in range(1, ROWS + 1)]


def delta_rows() -> list[tuple[int, str, int]]:
    """The upstream rows with two changed, one missing and one extra."""
    rows = {r[0]: r for r in upstream_rows()}
    for key in CHANGED:
        rows[key] = (key, rows[key][1] + " (stale)", rows[key][2])
    del rows[MISSING]
    rows[EXTRA] = (EXTRA, "gone upstream", 0)
    return sorted(rows.values())


@pytest.fixture(scope="module")
def upstream_table(mariadb) -> None:
    conn = pymysql.connect(host="127.0.0.1", port=mariadb.port, user="root", autocommit=True)
    with conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(f"CREATE TABLE {DB}.t (id BIGINT PRIMARY KEY, v VARCHAR(40), n INT)")
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, %s, %s)", upstream_rows())


@pytest.fixture
def mariadb_proxy(toxiproxy, mariadb, upstream_table) -> Iterator[Proxy]:
    proxy = toxiproxy.proxy(f"mariadb-{next(PROXIES)}", mariadb.port)
    yield proxy
    toxiproxy.call("DELETE", f"/proxies/{proxy.name}")


@pytest.fixture
def warehouse_copy(spark, tmp_path: Path) -> Path:
    """A fresh Delta copy of the table (with its differences), written as a tagged backfill commit."""
    warehouse = tmp_path / "warehouse"
    frame = spark.createDataFrame(
        [(*r, 1) for r in delta_rows()], "id bigint, v string, n int, _tidb_commit_ts bigint"
    )
    with delta.delta_transaction(spark, APP_ID, RESOLVED_TS, {"resolved_ts": RESOLVED_TS, "step": "it"}):
        frame.write.format("delta").save(str(warehouse / DB / "t"))
    return warehouse


def upstream_lines(port: int, password: str, **upstream: Any) -> str:
    """The body of an upstream table: the proxied MariaDB, short timeouts, two retries (`upstream` overrides)."""
    settings = {"connect_timeout": 3, "read_timeout": 30, "retries": 2, "retry_wait": 0.2, **upstream}
    return (
        f'kind = "mariadb"\nhost = "127.0.0.1"\nport = {port}\nuser = "tidelake"\n'
        f"password = {json.dumps(password)}\n"
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
    )


def config_file(folder: Path, warehouse: Path, port: int, password: str, **upstream: Any) -> Path:
    path = folder / "reconcile.toml"
    path.write_text(
        f'[job]\nname = "{JOB}"\n[source]\npath = "unused"\n[target]\nwarehouse = "{warehouse}"\n'
        f'[reconcile]\ntables = ["{DB}.t"]\nchunk_size = 100\nparallelism = 2\nleaf_rows = 16\n'
        f"[reconcile.upstream]\n{upstream_lines(port, password, **upstream)}"
    )
    return path


@dataclass
class FaultAt:
    """A progress tracker that adds `toxic` to the proxy when a stage containing `at` starts, and (with
    `heal`) removes it when the run announces a retry: the fault meets exactly that part of the run."""

    proxy: Proxy
    at: str
    toxic: tuple[str, str, dict[str, int]]  # type, stream, attributes
    heal: bool = True
    stages: list[str] = field(default_factory=list)
    injected: int = 0

    def stage(self, description: str, total: int) -> Callable[[int], None]:
        self.stages.append(description)
        if self.at in description and not self.injected:
            kind, stream, attributes = self.toxic
            self.proxy.add("fault", kind, stream, **attributes)
            self.injected += 1
        if " retry " in description and self.heal and "fault" in self.proxy.toxics():
            self.proxy.remove("fault")
        return lambda n: None

    @property
    def retries(self) -> list[str]:
        return [s for s in self.stages if " retry " in s]


RESET = ("reset_peer", "upstream", {"timeout": 0})  # the next bytes we send: the connection is reset


def reconcile(spark, config: Path, tracker: Any, *, repair: bool = False) -> ReconcileResult:
    settings = load_config(config)
    options = RunOptions.from_config(settings.reconcile, repair=repair)
    upstream = open_upstream(spark, settings.reconcile.upstream, options.parallelism)
    try:
        return engine.run(spark, settings, options, upstream, tracker)
    finally:
        upstream.close()


def assert_found_the_differences(result: ReconcileResult) -> None:
    table = result.tables[0]
    assert table.error is None, table.error
    assert (table.diff.missing, table.diff.extra, table.diff.changed) == (1, 1, 2)
    assert table.upstream_rows == ROWS and table.delta_rows == ROWS


def test_a_connection_reset_during_the_chunk_checksums_is_retried_to_the_same_verdict(
    spark, mariadb, mariadb_proxy, warehouse_copy, tmp_path
) -> None:
    config = config_file(tmp_path, warehouse_copy, mariadb_proxy.port, mariadb.password)
    fault = FaultAt(mariadb_proxy, ": checksums", RESET)
    result = reconcile(spark, config, fault)
    assert fault.injected == 1 and len(fault.retries) == 1, fault.stages
    assert f"127.0.0.1:{mariadb_proxy.port}" in fault.retries[0] and "connection lost" in fault.retries[0]
    assert_found_the_differences(result)
    assert result.exit_code == 1
    assert any("read again after 1 network failure" in n for n in result.tables[0].notes)


def test_an_upstream_that_keeps_failing_stops_with_exit_2_naming_the_server(
    spark, mariadb, mariadb_proxy, warehouse_copy, tmp_path
) -> None:
    config = config_file(tmp_path, warehouse_copy, mariadb_proxy.port, mariadb.password, retries=1)
    path = str(warehouse_copy / DB / "t")
    before = delta.table_version(spark, path)
    fault = FaultAt(mariadb_proxy, ": checksums", RESET, heal=False)
    result = reconcile(spark, config, fault, repair=True)
    error = result.tables[0].error or ""
    assert result.exit_code == 2
    assert f"mariadb upstream 127.0.0.1:{mariadb_proxy.port}" in error, error
    assert "gave up after 2 attempts" in error and len(fault.retries) == 1
    assert delta.table_version(spark, path) == before  # nothing repaired from half a read


def test_an_answer_slower_than_read_timeout_counts_as_lost_and_is_retried(
    spark, mariadb, mariadb_proxy, warehouse_copy, tmp_path
) -> None:
    """Before read_timeout existed, a stalled upstream held the run forever."""
    config = config_file(tmp_path, warehouse_copy, mariadb_proxy.port, mariadb.password, read_timeout=1)
    fault = FaultAt(mariadb_proxy, ": checksums", ("latency", "downstream", {"latency": 4000}))
    result = reconcile(spark, config, fault)
    assert len(fault.retries) == 1 and "timed out" in fault.retries[0], fault.stages
    assert_found_the_differences(result)


@pytest.mark.drill
def test_a_repair_whose_reads_are_cut_off_commits_once_after_the_retry(
    spark, mariadb, mariadb_proxy, warehouse_copy, tmp_path
) -> None:
    config = config_file(tmp_path, warehouse_copy, mariadb_proxy.port, mariadb.password)
    path = str(warehouse_copy / DB / "t")
    before = delta.table_version(spark, path)
    fault = FaultAt(mariadb_proxy, "row diff of", RESET)
    table = reconcile(spark, config, fault, repair=True).tables[0]
    assert len(fault.retries) == 1, fault.stages
    assert table.repair is not None and table.repair.remaining.total == 0
    assert (table.repair.deleted, table.repair.upserted) == (1, 3)
    assert delta.table_version(spark, path) == before + 1  # one MERGE
    assert untagged_commits(warehouse_copy, APP_ID) == []
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).drop("_tidb_commit_ts").collect())
    assert rows == upstream_rows()
    again = reconcile(spark, config, FaultAt(mariadb_proxy, "never", RESET), repair=True)
    assert again.exit_code == 0 and delta.table_version(spark, path) == before + 1


def test_a_repair_that_cannot_read_its_rows_commits_nothing_and_the_rerun_repairs(
    spark, mariadb, mariadb_proxy, warehouse_copy, tmp_path
) -> None:
    config = config_file(tmp_path, warehouse_copy, mariadb_proxy.port, mariadb.password, retries=0)
    path = str(warehouse_copy / DB / "t")
    before = delta.table_version(spark, path)
    failed = reconcile(spark, config, FaultAt(mariadb_proxy, "row diff of", RESET, heal=False), repair=True)
    assert failed.exit_code == 2 and "connection lost" in (failed.tables[0].error or "")
    assert delta.table_version(spark, path) == before  # all or nothing: nothing
    mariadb_proxy.clear()
    table = reconcile(spark, config, FaultAt(mariadb_proxy, "never", RESET), repair=True).tables[0]
    assert table.repair is not None and table.repair.remaining.total == 0
    assert delta.table_version(spark, path) == before + 1
    assert untagged_commits(warehouse_copy, APP_ID) == []


# ------------------------------------------------------------------ the initial load over JDBC (issue 53)

CUT = ("limit_data", "downstream", {"bytes": 30_000})  # each connection closed after 30 kB from the server


def snapshot_job(folder: Path, port: int, password: str, **upstream: Any) -> Path:
    """A storage-sink job (an empty sink) whose tables start from the upstream at a TSO over JDBC."""
    (folder / "sink").mkdir(exist_ok=True)
    path = folder / "snapshot.toml"
    path.write_text(
        f'[job]\nname = "{JOB}"\n[source]\nkind = "ticdc-storage"\npath = "{folder / "sink"}"\n'
        f'[source.initial]\nupstream_tso = {RESOLVED_TS}\n[target]\nwarehouse = "{folder / "wh"}"\n'
        f'tables = ["{DB}.t"]\n[upstream]\n{upstream_lines(port, password, **upstream)}'
    )
    return path


@pytest.fixture
def healed_on_retry(monkeypatch, mariadb_proxy: Proxy) -> list[str]:
    """The retry notes the load prints; the first removes the proxy's fault (the read then gets through)."""
    from tidelake import output

    notes: list[str] = []
    note = output.note

    def heal(message: str, prog: str) -> None:
        notes.append(message)
        if " retry " in message and "fault" in mariadb_proxy.toxics():
            mariadb_proxy.remove("fault")
        note(message, prog)

    monkeypatch.setattr(output, "note", heal)
    return notes


def test_a_snapshot_read_cut_off_is_read_again_from_new_connections(
    spark, mariadb, mariadb_proxy, healed_on_retry, tmp_path
) -> None:
    """The planning's small answers pass; the JDBC read of the table's rows is cut off mid-stream, retried
    (the fault gone by then), and the table's first version holds every upstream row once."""
    from backfill.clock import StageClock
    from backfill.initial.load import load_initial

    config = load_config(snapshot_job(tmp_path, mariadb_proxy.port, mariadb.password))
    kind, stream, attributes = CUT
    mariadb_proxy.add("fault", kind, stream, **attributes)
    loaded = load_initial(spark, config, StageClock())
    assert loaded is not None and loaded.loaded == ((f"{DB}.t", ROWS),), loaded
    retries = [n for n in healed_on_retry if " retry " in n]
    assert len(retries) == 1, healed_on_retry
    assert f"connection lost while reading {DB}.t at TSO {RESOLVED_TS}" in retries[0], retries
    assert f"mariadb upstream 127.0.0.1:{mariadb_proxy.port}" in retries[0], retries
    rows = spark.read.format("delta").load(str(tmp_path / "wh" / DB / "t")).drop("_tidb_commit_ts").collect()
    assert sorted(tuple(r) for r in rows) == upstream_rows()
    assert untagged_commits(tmp_path / "wh", APP_ID) == []


def test_a_snapshot_read_that_keeps_failing_exits_2_naming_the_server_and_table(
    spark, mariadb, mariadb_proxy, tmp_path, capsys
) -> None:
    from backfill.cli import main

    config = snapshot_job(tmp_path, mariadb_proxy.port, mariadb.password, retries=1, retry_wait=0)
    kind, stream, attributes = CUT
    mariadb_proxy.add("fault", kind, stream, **attributes)
    assert main(["run", "--config", str(config)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"mariadb upstream 127.0.0.1:{mariadb_proxy.port}: connection lost while reading {DB}.t" in err, (
        err
    )
    assert "(gave up after 2 attempts)" in err and "retry 1 of 1" in err, err
    assert mariadb.password not in err
    assert not list(tmp_path.glob("wh/*/*/_delta_log"))
