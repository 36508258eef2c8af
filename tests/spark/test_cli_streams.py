"""What a scheduler sees from a real `reconcile` process: one JSON document on stdout, and progress as
plain lines on stderr (a pipe, not a terminal), the Spark JVM's output included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.test_reconcile_files import config, rows, write_delta, write_expected

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_a_reconcile_process_keeps_stdout_to_the_json_result(spark, tmp_path) -> None:
    expected, warehouse = tmp_path / "expected", tmp_path / "wh"
    write_expected(expected, [("scan-1", 100, rows(20))], ["id"])
    write_delta(spark, warehouse / "shop" / "items", rows(20, bump=4), 100)
    cfg = config(tmp_path, warehouse, expected, "expected")
    cfg.write_text(
        cfg.read_text() + '[spark]\nmaster = "local[1]"\nshuffle_partitions = 1\ndriver_memory = "1g"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "reconcile", "run", "--config", str(cfg), "--json", "--progress-interval", "2"],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)  # the whole of stdout is the result
    assert doc["tables"][0]["changed"] == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("reconcile: ")]
    assert any(line.startswith("reconcile: shop.items: bucket checksums: ") for line in lines), done.stderr
    assert all(" done, " in line and "s elapsed" in line for line in lines)
