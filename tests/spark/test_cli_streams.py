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


def test_what_the_jvm_prints_goes_to_stderr_not_to_the_result(tmp_path) -> None:
    """Delta's VACUUM prints "Deleted N files ..." on the JVM's stdout; a `backfill maintain --json`
    scheduler reads stdout as one JSON document, so the JVM we start writes to our stderr."""
    script = (
        "import json\n"
        "from tidelake.config import SparkConfig\n"
        "from tidelake.spark import build_session\n"
        "spark = build_session('streams', SparkConfig(master='local[1]', shuffle_partitions=1))\n"
        "spark._jvm.java.lang.System.out.println('the jvm printed this')\n"
        "spark._jvm.java.lang.System.out.flush()\n"
        "print(json.dumps({'result': 1}))\n"
        "spark.stop()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"result": 1}, done.stdout
    assert "the jvm printed this" in done.stderr
