"""`backfill demo` (the README's first command) on a small workload: two windows, checkpoint carried over."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backfill.cli import main
from tests.expected import warehouse_differences
from tidbsim import load_expected, load_index

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_runs_two_windows_and_ends_equal(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "demo.toml"
    sim, wh = tmp_path / "sim", tmp_path / "wh"
    conf.write_text(
        f'[job]\nname = "demo"\n[source]\npath = "{sim / "scans"}"\n[target]\nwarehouse = "{wh}"\n'
        f'[reconcile.upstream]\nkind = "files"\nformat = "expected"\npath = "{sim / "expected"}"\n'
        f'[demo]\nout = "{sim}"\nseed = 4\ntables = 3\nrows = 30\ntxns = 80\nscans = 3\n'
    )
    assert main(["demo", "--config", str(conf), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    first, second = report["windows"]
    scans = load_index(sim)
    assert first["resolved_ts"] == scans[0]["resolved_ts"]
    assert second["checkpoint_ts"] == first["resolved_ts"], "the second window starts where the first ended"
    assert second["resolved_ts"] == scans[-1]["resolved_ts"]
    assert warehouse_differences(spark, wh, sim, scans[-1]["scan_id"]) == []
    reconciled = report["reconcile"]
    assert reconciled["status"] == "equal"
    expected = load_expected(sim, scans[-1]["scan_id"])
    assert {t["table"]: (t["status"], t["upstream_rows"]) for t in reconciled["tables"]} == {
        f"{db}.{name}": ("equal", rows.num_rows) for (db, name), rows in expected.items()
    }

    # a second demo starts over in the folders it made, and refuses folders it did not make
    assert main(["demo", "--config", str(conf), "--json"]) == 0
    capsys.readouterr()
    (tmp_path / "foreign").mkdir()
    conf.write_text(conf.read_text().replace(f'warehouse = "{wh}"', f'warehouse = "{tmp_path / "foreign"}"'))
    assert main(["demo", "--config", str(conf)]) == 2
    assert "was not made by the demo" in capsys.readouterr().err
