"""The simulator's MariaDB replica runs EXCHANGE PARTITION as MariaDB's own `ALTER TABLE pt EXCHANGE
PARTITION p WITH TABLE nt`: afterwards both tables hold what the simulator expects of TiDB's id swap."""

from __future__ import annotations

import json
from pathlib import Path

import pymysql
import pytest

from tidbsim import SimulationConfig, load_expected, load_index, simulate
from tidbsim.mysql_apply import parse_mysql_url

pytestmark = pytest.mark.integration


def test_the_replica_exchanges_as_the_expected_state_says(tmp_path: Path, mariadb_url: str) -> None:
    sim = tmp_path / "sim"
    result = simulate(SimulationConfig(out=sim, seed=6, tables=4, rows=12, txns=80, scans=3, ddls_per_scan=2,
                                       ddl_kinds=("exchange_partition",), mysql_url=mariadb_url))  # fmt: skip
    assert result.mysql_applied and result.stats["ddl_exchange_partition"] >= 1
    jobs = [
        json.loads(line)
        for scan in load_index(sim)
        for line in (sim / "scans" / scan["scan_id"] / "schema" / "ddl_jobs.jsonl").read_text().splitlines()
    ]
    exchanged = {(j["schema_name"], j["table_name"]) for j in jobs if j["type"] == 42}
    exchanged |= {(j["schema_name"], j["binlog"]["TableInfo"]["name"]["O"]) for j in jobs if j["type"] == 42}
    expected = load_expected(sim, load_index(sim)[-1]["scan_id"])
    target = parse_mysql_url(mariadb_url)
    with pymysql.connect(host=target.host, port=target.port, user=target.user, password=target.password or "",
                         autocommit=True) as conn, conn.cursor() as cur:  # fmt: skip
        for db, name in sorted(exchanged):
            want = sorted((r["id"], r["val"], r["label"]) for r in expected[(db, name)].to_pylist())
            cur.execute(f"SELECT `id`, `val`, `label` FROM `{db}`.`{name}`")
            assert sorted(cur.fetchall()) == want, f"{db}.{name}"
    assert any(expected[key].num_rows for key in exchanged)
