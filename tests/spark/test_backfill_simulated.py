"""End to end from the simulator: after each capture, every Delta table equals the expected state."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.run import run_backfill
from tests.expected import warehouse_differences
from tidbsim import SimulationConfig, load_index, simulate
from tidelake.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("seed", [23])
def test_every_checkpoint_matches_the_expected_state(
    spark, tmp_path: Path, seed: int, decode_on: str
) -> None:
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


@pytest.mark.parametrize("seed", [5])
def test_region_streams_split_over_key_ranges_match_like_whole_ones(spark, tmp_path: Path, seed: int) -> None:
    """With eight key ranges and a hot table, region streams are cut between ranges (each piece gets the
    region's INITIALIZED and RESOLVED events); the tables still reach the expected state."""
    from backfill.sources.kvscan import keyranges as ch
    from backfill.sources.kvscan.captures import list_scans
    from backfill.sources.kvscan.source import survey_regions

    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=seed, tables=3, rows=60, txns=300, scans=3, hot_table_share=0.7))
    conf = tmp_path / "job.toml"
    conf.write_text(f'[job]\nname = "sim"\n[source]\npath = "{out / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "8")
    try:
        scans = list_scans(spark, str(out / "scans"))
        counts = survey_regions(spark, scans).event_counts
        starts = {(s.scan_id, r.region_id): r.start_key for s in scans for r in s.regions}
        ranges = ch.KeyRanges(tuple(ch.key_range_splits([(starts[k], n) for k, n in counts.items()], 8)), ())
        cut = [r for s in scans for r in s.regions if len(ranges.covering(r.start_key, r.end_key)) > 1]
        assert cut, "the workload must cut some region stream between key ranges"

        result = run_backfill(spark, load_config(conf))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    last = load_index(out)[-1]
    assert result.resolved_ts == last["resolved_ts"], result.to_dict()
    assert warehouse_differences(spark, tmp_path / "wh", out, last["scan_id"]) == []
