"""Reconcile while the upstream keeps changing (issue 17 §4): the result is exact for the one snapshot it
reports. A writer keeps adding 1 to every row of a MariaDB table, each time in one transaction, while
`reconcile run --repair` reads the table in many chunks over several connections. Any one snapshot holds
the same value in every row; a torn read (chunks from different moments) would repair the Delta copy
into a mix of values."""

from __future__ import annotations

import threading

import pytest

from tests.integration.test_reconcile_mariadb import connect, run, write_config
from tidelake import delta

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DB, TABLE, ROWS = "rc_load", "counters", 3000
APP, RESOLVED_TS = "tidelake:it", 449_000_000_000_000_000


class Writer(threading.Thread):
    """`UPDATE ... SET v = v + 1` over the whole table, one transaction after another, until stopped."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.commits, self.failure = port, 0, None
        self.stop = threading.Event()
        self.started_writing = threading.Event()

    def run(self) -> None:
        try:
            with connect(self.port) as conn, conn.cursor() as cur:
                while not self.stop.is_set():
                    cur.execute(f"UPDATE {DB}.{TABLE} SET v = v + 1")
                    self.commits += 1
                    self.started_writing.set()
        except Exception as exc:  # reported by the test, never swallowed
            self.failure = exc
            self.started_writing.set()


def test_reconcile_under_a_busy_writer_is_exact_for_the_snapshot_it_reports(
    mariadb, spark, tmp_path, capsys
) -> None:
    with connect(mariadb.port) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(
            f"CREATE TABLE {DB}.{TABLE} (id INT NOT NULL PRIMARY KEY, v BIGINT NOT NULL, pad VARCHAR(32))"
        )
        cur.executemany(
            f"INSERT INTO {DB}.{TABLE} VALUES (%s, 0, %s)", [(i, f"row {i}") for i in range(ROWS)]
        )
    warehouse = tmp_path / "wh"
    frame = spark.createDataFrame(
        [(i, 0, f"row {i}", 1) for i in range(ROWS)], "id INT, v BIGINT, pad STRING, _tidb_commit_ts BIGINT"
    )
    with delta.delta_transaction(spark, APP, RESOLVED_TS, {"resolved_ts": RESOLVED_TS, "checkpoint_ts": 1}):
        frame.write.format("delta").save(str(warehouse / DB / TABLE))
    config = write_config(
        tmp_path / "c.toml", warehouse, mariadb.port, mariadb.password,
        tables=[f"{DB}.{TABLE}"], chunk_size=100, leaf_rows=20, parallelism=4, sample_size=5,
    )  # fmt: skip

    writer = Writer(mariadb.port)
    writer.start()
    assert writer.started_writing.wait(30)
    try:
        commits_before = writer.commits
        code, doc, output = run(capsys, config, "--repair")
        commits_during = writer.commits - commits_before
    finally:
        writer.stop.set()
        writer.join(30)
    assert writer.failure is None, writer.failure
    table = doc["tables"][0]
    assert code == 0, output  # every difference found was repaired, re-checked against the same rows
    assert table["chunks"] >= 20 and table["changed"] == ROWS, table  # every row moved on upstream
    assert table["repair"]["remaining"] == {"missing": 0, "extra": 0, "changed": 0}
    assert table["upstream_snapshot"].startswith("mariadb snapshot of "), table
    assert "UTC" in table["upstream_snapshot"]

    repaired = {r["v"] for r in spark.read.format("delta").load(str(warehouse / DB / TABLE)).collect()}
    assert len(repaired) == 1, f"rows repaired from different moments: v in {sorted(repaired)[:10]}"
    # the one snapshot is no older than the run: every commit counted before it started is in it
    assert commits_before <= repaired.pop() <= writer.commits
    assert commits_during > 0  # the upstream really moved while reconcile read it
