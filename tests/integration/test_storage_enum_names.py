"""A tiflow storage sink writes canal-json ENUM/SET as numbers and its schema files without element names;
the names come from the DDL text the schema files carry (a changefeed started before the tables: their
CREATE TABLE) or, for tables that predate the changefeed, from the upstream's SHOW CREATE TABLE (here the
real MariaDB the simulator replays into). Either way the tables hold the names, as upstream."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest

from backfill.run import run_backfill
from tidbsim import SimulationConfig, load_expected, load_index, simulate
from tidbsim.config import StorageSink
from tidelake.config import load_config
from tidelake.conventions import COMMIT_TS, ROWID

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _rows(table) -> list[str]:
    keep = [c for c in table.column_names if c not in (ROWID, COMMIT_TS)]
    return sorted(map(repr, table.select(keep).to_pylist()))


@pytest.mark.parametrize("from_creation", [False, True], ids=["upstream", "create-table-text"])
def test_tiflow_canal_json_enum_and_set_hold_names(
    spark, mariadb_url, tmp_path: Path, from_creation: bool
) -> None:
    out = tmp_path / "sim"
    sink = StorageSink(
        protocol="canal-json", flavor="tiflow", date_separator="none", from_creation=from_creation
    )
    simulate(
        SimulationConfig(
            out=out, seed=5, tables=3, rows=10, txns=40, scans=2, ddl_kinds=(), storage_sinks=(sink,),
            mysql_url=None if from_creation else mariadb_url,
        )
    )  # fmt: skip
    url = urlparse(mariadb_url)
    upstream = "" if from_creation else (
        f'[upstream]\nkind = "mariadb"\nhost = "{url.hostname}"\nport = {url.port}\nuser = "{url.username}"\n'
    )  # fmt: skip
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "names"\n[source]\nkind = "ticdc-storage"\npath = "{out / "storage" / "canal-json"}"\n'
        f'[source.storage]\nprotocol = "canal-json"\ndate_separator = "none"\n'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\n{upstream}'
    )
    run_backfill(spark, load_config(conf))
    expected = load_expected(out, load_index(out)[-1]["scan_id"])
    named = 0
    for (db, name), want in expected.items():
        got = spark.read.format("delta").load(str(tmp_path / "wh" / db / name)).toArrow()
        assert _rows(got) == _rows(want), f"{db}.{name}"
        named += any(str(f.type) == "string" and f.name in ("status", "flags", "tag") for f in got.schema)
    assert named > 0, "the workload should hold ENUM or SET columns"
