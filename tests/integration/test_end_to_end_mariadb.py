"""The whole product as a user runs it (issue 12): `backfill simulate --mysql` into the test MariaDB with
every DDL kind the simulator knows, `backfill run` as each capture arrives, `reconcile run` equal on every
table after every capture (against the simulator's expected state at the table's own resolved ts) and
against MariaDB after the last; then one upstream change that reconcile finds (exit 1) and repairs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pymysql
import pytest

from backfill.cli import main as backfill
from reconcile.cli import main as reconcile
from tidbsim.config import DDL_KINDS
from tidbsim.mysql_apply import parse_mysql_url

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _json(capsys) -> dict:
    out = capsys.readouterr().out
    return json.loads(out) if out.strip() else {}


def _config(path: Path, source: Path, warehouse: Path, upstream: list[str]) -> Path:
    lines = [
        "[job]",
        'name = "e2e"',
        "[source]",
        f'path = "{source}"',
        "[target]",
        f'warehouse = "{warehouse}"',
    ]
    # the simulator's databases: the shared MariaDB also holds other tests' tables, never back-filled here
    lines += [
        "[reconcile]",
        'tables = ["shop.*", "ops.*"]',
        "chunk_size = 50",
        "[reconcile.upstream]",
        *upstream,
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _keyed_table(conn) -> tuple[str, str, str, str]:
    """(db, table, a primary key column, an integer column outside the key) of some replicated table that
    holds rows."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.table_schema, c.table_name, k.column_name, c.column_name"
            " FROM information_schema.columns c JOIN information_schema.key_column_usage k"
            "   ON k.table_schema = c.table_schema AND k.table_name = c.table_name"
            "  AND k.constraint_name = 'PRIMARY' AND k.column_name <> '_tidb_rowid'"
            " WHERE c.table_schema IN ('shop', 'ops') AND c.column_key = '' AND c.data_type = 'int'"
            " ORDER BY 1, 2, 4"
        )
        for db, table, key, column in cur.fetchall():
            cur.execute(f"SELECT COUNT(*) FROM `{db}`.`{table}`")
            if cur.fetchone()[0]:
                return db, table, key, column
    raise AssertionError("no replicated table with an integer column holds rows")


def test_simulate_backfill_and_reconcile_against_mariadb(
    spark, tmp_path: Path, mariadb_url: str, capsys
) -> None:
    sim = tmp_path / "sim"
    # Two captures of six DDLs each over three tables: every kind comes up (seed 17), and the second run
    # starts from the first one's checkpoint; each capture or table more costs a backfill segment per DDL
    # and a reconcile of every table.
    assert backfill(["simulate", "--out", str(sim), "--seed", "17", "--tables", "3", "--rows", "20",
                     "--txns", "120", "--scans", "2", "--ddls-per-scan", "6", "--mysql", mariadb_url,
                     "--json"]) == 0  # fmt: skip
    simulated = _json(capsys)
    assert simulated["mysql_applied"]
    assert [k for k in DDL_KINDS if not simulated["stats"].get(f"ddl_{k}")] == []
    assert len(simulated["scans"]) == 2

    arriving, warehouse = tmp_path / "arriving", tmp_path / "wh"
    arriving.mkdir()
    index = json.loads((sim / "expected" / "index.json").read_text())
    for k, scan in enumerate(simulated["scans"]):
        shutil.copytree(sim / "scans" / scan["scan_id"], arriving / scan["scan_id"])
        known = tmp_path / f"expected-{k}"  # the expected states known when this capture arrived
        known.mkdir()
        (known / "index.json").write_text(json.dumps(index | {"scans": index["scans"][: k + 1]}))
        (known / scan["scan_id"]).symlink_to(sim / "expected" / scan["scan_id"])
        for earlier in index["scans"][:k]:
            (known / earlier["scan_id"]).symlink_to(sim / "expected" / earlier["scan_id"])
        expected = _config(tmp_path / "expected.toml", arriving, warehouse,
                           ['kind = "files"', 'format = "expected"', f'path = "{known}"'])  # fmt: skip
        assert backfill(["run", "--config", str(expected), "--json"]) == 0
        assert _json(capsys)["resolved_ts"] == scan["resolved_ts"]
        assert reconcile(["run", "--config", str(expected), "--json"]) == 0, scan["scan_id"]
        assert _json(capsys)["status"] == "equal"

    target = parse_mysql_url(mariadb_url)
    live = _config(tmp_path / "mariadb.toml", arriving, warehouse,
                   ['kind = "mariadb"', 'host = "127.0.0.1"', f"port = {target.port}", f'user = "{target.user}"',
                    f"password = {json.dumps(target.password or '')}"])  # fmt: skip
    with pymysql.connect(host="127.0.0.1", port=target.port, user=target.user, password=target.password or "",
                         autocommit=True) as conn:  # fmt: skip
        db, table, key, column = _keyed_table(conn)
        with conn.cursor() as cur:
            cur.execute(
                f"UPDATE `{db}`.`{table}` SET `{column}` = COALESCE(`{column}`, 0) + 1 ORDER BY `{key}` LIMIT 1"
            )
            assert cur.rowcount == 1
    # Against MariaDB every table is equal but the changed one, which differs by that one value.
    assert reconcile(["run", "--config", str(live), "--json"]) == 1
    found = _json(capsys)
    differing = [t for t in found["tables"] if t["status"] != "equal"]
    assert [t["table"] for t in differing] == [f"{db}.{table}"], differing
    assert (differing[0]["missing"], differing[0]["extra"], differing[0]["changed"]) == (0, 0, 1), differing
    assert differing[0]["changed_by_column"] == {column: 1}, differing
    assert reconcile(["run", "--config", str(live), "--table", f"{db}.{table}", "--json", "--repair"]) in (
        0,
        1,
    )
    capsys.readouterr()
    assert reconcile(["run", "--config", str(live), "--table", f"{db}.{table}", "--json"]) == 0
    assert _json(capsys)["status"] == "equal"
