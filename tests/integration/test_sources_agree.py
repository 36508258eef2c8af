"""One upstream history, three inputs, the same Delta tables (docs/architecture.md "The data flow of
`backfill run`").

The simulator replays a workload with DDLs into MariaDB and writes it as kv-scan captures and as the
folders a TiCDC storage-sink changefeed writes (CSV with commit ts, canal-json with the TiDB extension,
restarts and repeats included). Each input is back-filled into its own warehouse: the tables must hold the
same rows, and reconcile against MariaDB must say equal for each warehouse.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.run import run_backfill
from tidbsim import SimulationConfig, load_expected, load_index, simulate
from tidbsim.config import StorageSink
from tidbsim.storage_codec import CsvOptions
from tidelake import fs
from tidelake.config import load_config
from tidelake.conventions import COMMIT_TS, ROWID

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

SINKS = (
    StorageSink(
        protocol="csv", date_separator="day", csv=CsvOptions(output_old_value=True), restarts=1, seed=5
    ),
    # The new architecture's schema files carry ENUM/SET elements, so canal-json's numbers map to names
    # (a tiflow sink without content-compatible keeps them as numbers, as the README says).
    StorageSink(protocol="canal-json", flavor="ticdc", date_separator="none", restarts=1, seed=5),
)
# Tables keyed by a clustered string under a _ci collation: kv-scan sees a respelled key ('abc' -> 'ABC')
# as a PUT on the same record key with its old value, TiCDC's outputs as an update whose old row has the
# other spelling; both must end with 'ABC' alone.
COLLATIONS = ("utf8mb4_general_ci", "utf8mb4_unicode_ci")
SOURCE_LINES = {
    "kv-scan": "",
    "csv": 'kind = "ticdc-storage"\n[source.storage]\nprotocol = "csv"\ndate_separator = "day"\n'
    "output_old_value = true\n",
    "canal-json": 'kind = "ticdc-storage"\n[source.storage]\nprotocol = "canal-json"\ndate_separator = "none"\n',
}


def table_rows(spark, path: str) -> list[str]:
    """The rows of a Delta table, without `_tidb_rowid` (TiCDC's outputs do not carry it). A table without
    a primary key is a multiset of whole rows for TiCDC's sources: an update that leaves a row's values as
    they were nets out there and keeps the row's older `_tidb_commit_ts`, where kv-scan, keyed by the
    handle, takes the update's ts; such tables are compared without `_tidb_commit_ts` as well."""
    frame = spark.read.format("delta").load(path)
    drop = [ROWID, COMMIT_TS] if ROWID in frame.columns else []
    return sorted(repr(tuple(r)) for r in frame.drop(*drop).collect())


def warehouse_tables(spark, warehouse: Path) -> dict[str, list[str]]:
    return {
        f"{db.name}.{t.name}": table_rows(spark, t.path)
        for db in fs.list_dir(spark, str(warehouse))
        for t in fs.list_dir(spark, db.path)
    }


def test_kv_scan_and_storage_sink_give_equal_tables_and_reconcile_equal(spark, mariadb_url, tmp_path) -> None:
    from reconcile.cli import main as reconcile_main

    out = tmp_path / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=9, tables=3, rows=30, txns=120, scans=3, ddls_per_scan=1,
            mysql_url=mariadb_url, storage_sinks=SINKS, collation_tables=COLLATIONS,
        )
    )  # fmt: skip
    last = load_index(out)[-1]
    # the shared MariaDB holds other tests' databases too: reconcile the simulator's only
    databases = sorted({db for db, _ in load_expected(out, last["scan_id"])})
    results, tables = {}, {}
    for name, source_lines in SOURCE_LINES.items():
        path = out / "scans" if name == "kv-scan" else out / "storage" / name
        conf = tmp_path / f"{name}.toml"
        conf.write_text(
            f'[job]\nname = "agree"\n[target]\nwarehouse = "{tmp_path / name}"\n'
            f'[reconcile.upstream]\nkind = "mariadb"\n{_server(mariadb_url)}'
            f'[source]\npath = "{path}"\n{source_lines}'
        )
        results[name] = run_backfill(spark, load_config(conf))
        tables[name] = warehouse_tables(spark, tmp_path / name)
        only = [arg for db in databases for arg in ("--table", f"{db}.*")]
        assert reconcile_main(["run", "--config", str(conf), "--ignore-column", ROWID, *only]) == 0, name
    assert results["kv-scan"].resolved_ts == last["resolved_ts"]
    for name in ("csv", "canal-json"):
        assert results[name].resolved_ts == last["resolved_ts"], name  # the sink's last checkpoint
        assert tables[name].keys() == tables["kv-scan"].keys(), name
        for table, rows in tables["kv-scan"].items():
            assert tables[name][table] == rows, f"{name}: {table} differs from the kv-scan source's table"


def _server(url: str) -> str:
    """The `[reconcile.upstream]` host/port/user lines of a `mysql://user@host:port/` URL."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    password = f'password = "{parsed.password}"\n' if parsed.password else ""
    return f'host = "{parsed.hostname}"\nport = {parsed.port}\nuser = "{parsed.username}"\n{password}'
