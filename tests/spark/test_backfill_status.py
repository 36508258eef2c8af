"""`backfill status` names the region and physical id that hold a table back, and whether the id is retired."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backfill.cli import main
from backfill.codec import table_span
from tests.captures import Capture, ddl_job, users_table

pytestmark = pytest.mark.spark

TRUNCATE_TABLE = 11


def test_status_names_the_lagging_region_and_the_retired_id_behind_it(spark, tmp_path: Path, capsys) -> None:
    before, after = users_table(100, "users"), users_table(101, "users")
    _, old_hi = table_span(100)
    cap = Capture(
        tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=300, tables=[("app", before)],
        jobs=[ddl_job(1, TRUNCATE_TABLE, "app", after, 160, table_id=100)],
        regions=[(1, b"", old_hi), (2, old_hi, b"")],
    )  # fmt: skip
    cap.put(1, before, 1, {2: "a", 3: 1}, 110, 111)
    cap.event(1, "INITIALIZED").event(1, "RESOLVED", resolved_ts=140)  # the old id lags below the TRUNCATE
    cap.event(2, "INITIALIZED").event(2, "RESOLVED", resolved_ts=150)  # the new id is below it too
    cap.write()
    conf = tmp_path / "job.toml"
    conf.write_text(f'[job]\nname = "st"\n[source]\npath = "{tmp_path / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    assert main(["status", "--config", str(conf), "--json"]) == 0
    held = json.loads(capsys.readouterr().out)["held_back"]
    assert held == [
        {"table": "app.users", "resolved_ts": 140, "region": 1, "physical_id": 100, "retired_at": 160,
         "reason": "app.users, region 1 (table id 100, retired at ts 160)"},
    ]  # fmt: skip
    assert main(["status", "--config", str(conf)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "held back at ts 140: app.users, region 1 (table id 100, retired at ts 160)" in text
