"""Cluster behaviour: a Spark standalone master and worker on 127.0.0.1 run a job through our factory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import SparkStandalone
from tidelake.jars import cached_jars

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

JOB = Path(__file__).with_name("roundtrip_job.py")
ROOT = Path(__file__).resolve().parents[2]


def spark_submit(cluster: SparkStandalone, *args: str) -> subprocess.CompletedProcess[str]:
    python = sys.executable
    env = {
        **os.environ,
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    command = [
        str(Path(python).parent / "spark-submit"),
        "--master", cluster.master_url,
        "--jars", ",".join(cached_jars()),
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.executor.cores=1",
        "--conf", "spark.cores.max=1",
        "--conf", "spark.sql.shuffle.partitions=2",
        # Delta rebuilds a table's state in 50 tasks by default: on one executor core, seconds for 2 files
        "--conf", "spark.databricks.delta.snapshotPartitions=2",
        "--conf", f"spark.pyspark.python={python}",
        *args,
    ]  # fmt: skip
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_job_on_standalone_cluster_writes_and_reads_delta(tmp_path: Path) -> None:
    cluster = SparkStandalone(tmp_path).start()
    try:
        table = tmp_path / "roundtrip"
        done = spark_submit(cluster, str(JOB), str(table))
        assert done.returncode == 0, done.stderr[-4000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        cluster.stop()
    assert all(p.poll() is not None for p in cluster.processes), "the master and worker must be stopped"
    assert seen["master"] == cluster.master_url
    assert seen["executors"] >= 1
    assert seen["count"] == seen["distinct"] == 1000
    assert seen["sum"] == sum(range(1000))
    assert seen["txn_version"] == 42
    assert seen["table_version"] == 1, "the replayed MERGE must not commit again"
    assert (table / "_delta_log").is_dir()
