"""Cluster behaviour from the package: a Spark standalone master and worker on 127.0.0.1 run `backfill run`
and `reconcile run` as docs/cluster.md shows them: spark-submit from the wheel's venv, the package's
`__main__.py` files as applications (our session factory under spark-submit), that venv packed for the
executors (venv-pack, `--archives env.tar.gz#environment`: PySpark's documented way), never a PYTHONPATH
into the checkout."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.packaging import InstalledWheel, clean_env, run
from tests.servers import SparkStandalone
from tidelake.jars import cached_jars

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    cluster = SparkStandalone(tmp_path_factory.mktemp("cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()
    assert all(p.poll() is not None for p in cluster.processes), "the master and worker must be stopped"


@pytest.fixture(scope="module")
def packed_env(installed_wheel: InstalledWheel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel's venv as one archive for the executors. Spark's jars stay out: the executors' JVM is
    the cluster's own Spark."""
    packed = tmp_path_factory.mktemp("packed") / "tidelake-env.tar.gz"
    venv_pack = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "venv-pack"
    run([str(venv_pack), "-p", str(installed_wheel.venv), "-o", str(packed), "-q", "--compress-level", "1",
         "--exclude", "lib/python*/site-packages/pyspark/jars/*"])  # fmt: skip
    return packed


def spark_submit(
    installed_wheel: InstalledWheel, packed: Path, cluster: SparkStandalone, cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = clean_env(
        cwd / "home",
        PYSPARK_DRIVER_PYTHON=installed_wheel.bin("python"),
        PYSPARK_PYTHON="./environment/bin/python",  # the unpacked archive, in each executor's folder
        SPARK_LOCAL_IP="127.0.0.1",
    )
    command = [
        installed_wheel.bin("spark-submit"),
        "--master", cluster.master_url,
        "--archives", f"{packed}#environment",
        "--jars", ",".join(cached_jars()),
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.executor.cores=1",
        "--conf", "spark.cores.max=1",
        "--conf", "spark.sql.shuffle.partitions=2",
        # Delta rebuilds a table's state in 50 tasks by default: on one executor core, seconds for 2 files
        "--conf", "spark.databricks.delta.snapshotPartitions=2",
        *args,
    ]  # fmt: skip
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=cwd)


def test_backfill_and_reconcile_submitted_from_the_package(
    installed_wheel: InstalledWheel, packed_env: Path, cluster: SparkStandalone, tmp_path: Path
) -> None:
    """The result goes to `--output`: spark-submit gives the driver's stderr (progress) to its stdout."""
    sim = tmp_path / "sim"
    simulate = ["simulate", "--out", str(sim), "--seed", "3", "--tables", "2", "--rows", "50", "--txns", "30",
                "--scans", "1", "--ddls-per-scan", "0", "--json"]  # fmt: skip
    run([installed_wheel.bin("backfill"), *simulate], env=clean_env(tmp_path / "home"))
    job = tmp_path / "job.toml"
    job.write_text(
        f'[job]\nname = "cluster"\n[source]\npath = "{sim / "scans"}"\n'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\nregister = false\n'
        f'[reconcile.upstream]\nkind = "files"\nformat = "expected"\npath = "{sim / "expected"}"\n'
    )
    site = installed_wheel.site_packages
    results = {}
    for command in ("backfill", "reconcile"):
        out = tmp_path / f"{command}.json"
        done = spark_submit(installed_wheel, packed_env, cluster, tmp_path, str(site / command / "__main__.py"),
                            "run", "--config", str(job), "--quiet", "--output", str(out))  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        results[command] = json.loads(out.read_text())
    assert len(results["backfill"]["tables"]) == 2 and results["backfill"]["resolved_ts"] > 0
    # Both applications ran their tasks in the cluster's executors, with Python from the unpacked archive.
    unpacked = sorted((cluster.base / "work").glob("app-*/*/environment/bin/python"))
    assert len(unpacked) == 2, unpacked
    tables = results["reconcile"]["tables"]
    assert len(tables) == 2 and {t["status"] for t in tables} == {"equal"}, tables
