"""End to end from the simulator: after each capture, every Delta table equals the expected state."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.pipeline import run_backfill
from backfill.simulate import SimulationConfig, load_index, simulate
from tests.expected import warehouse_differences
from tidelake.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("seed", [2, 11, 23])
def test_every_checkpoint_matches_the_expected_state(spark, tmp_path: Path, seed: int) -> None:
    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=seed, tables=3, rows=40, txns=150, scans=3))
    conf = tmp_path / "job.toml"
    conf.write_text(f'[job]\nname = "sim"\n[source]\npath = "{out / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    config = load_config(conf)

    for scan in load_index(out):
        result = run_backfill(spark, config, until_ts=scan["resolved_ts"])
        assert result.resolved_ts == scan["resolved_ts"], result.to_dict()
        assert warehouse_differences(spark, tmp_path / "wh", out, scan["scan_id"]) == []
