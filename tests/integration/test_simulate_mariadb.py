"""With ``mysql_url`` the simulator replays its history into a real MariaDB: the server must then hold
exactly the expected state of the last scan (what a correct consumer reaches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidbsim import SimulationConfig, load_expected, load_index, simulate
from tidbsim.engine import DATABASES
from tidbsim.expected import COMMIT_TS, primary_key
from tidbsim.mysql_apply import fetch_table, list_tables, parse_mysql_url

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_mariadb_holds_the_expected_state_of_the_last_scan(
    tmp_path: Path, mariadb_url: str, seed: int
) -> None:
    out = tmp_path / "sim"
    result = simulate(
        SimulationConfig(
            out=out, seed=seed, rows=24, txns=200, scans=4, ddls_per_scan=3, mysql_url=mariadb_url
        )
    )
    assert result.mysql_applied
    expected = load_expected(out, load_index(out)[-1]["scan_id"])
    target = parse_mysql_url(mariadb_url)
    assert set(list_tables(target, DATABASES)) == set(expected)
    for (db, name), table in expected.items():
        want = table.drop_columns([COMMIT_TS])
        got = fetch_table(target, db, name, want.schema, primary_key(table))
        assert got.to_pylist() == want.to_pylist(), f"{db}.{name}"
    assert sum(t.num_rows for t in expected.values()) > 0


def test_mysql_url_parsing_keeps_the_password_out_of_repr() -> None:
    t = parse_mysql_url("mysql://app:s%3Acret@db.example:3307/shop")
    assert (t.host, t.port, t.user, t.password, t.database) == ("db.example", 3307, "app", "s:cret", "shop")
    assert "s:cret" not in repr(t)
    with pytest.raises(ValueError, match=r"expected a mysql://user\[:password\]@host"):
        parse_mysql_url("postgres://x@y/")
