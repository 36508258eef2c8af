"""The metastore goes away (issue 52): Spark's real Hive metastore, its database reached over the network.

The metastore's database is Derby's network server (the Derby pyspark ships, as a server), behind a
Toxiproxy proxy; `backfill run` subprocesses use it through `[spark.conf]` (JDBC URL and client driver)
and register their tables there. Gone before the run: the run stops before writing anything, exit 2
naming the metastore. Gone after the Delta commits (the run held at its first table's commit while the
proxy closes): the commits stay, whole and tagged, the registration stops the run with exit 2 naming the
metastore, and the rerun registers every table, which then hold the simulator's expected state.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.expected import warehouse_differences
from tests.faults.conftest import APP_ID, Workload
from tests.faults.harness import (
    REPO,
    assert_no_secret,
    command,
    delta_tables,
    environment,
    run,
    untagged_commits,
)
from tests.servers import DerbyNetworkServer, derby_jars
from tests.toxiproxy import Proxy

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.drill, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def metastore_proxy(toxiproxy, tmp_path_factory) -> Iterator[Proxy]:
    server = DerbyNetworkServer(tmp_path_factory.mktemp("derby")).start()
    proxy = toxiproxy.proxy("metastore", server.port)
    yield proxy
    toxiproxy.call("DELETE", f"/proxies/{proxy.name}")
    server.stop()


def metastore_url(proxy: Proxy, name: str) -> str:
    return f"jdbc:derby://127.0.0.1:{proxy.port}/{name};create=true"


def job_config(workload: Workload, folder: Path, proxy: Proxy) -> Path:
    client = next(derby_jars().glob("derbyclient-*.jar"))
    spark_conf = (
        "[spark.conf]\n"
        f'"spark.hadoop.javax.jdo.option.ConnectionURL" = "{metastore_url(proxy, folder.name)}"\n'
        '"spark.hadoop.javax.jdo.option.ConnectionDriverName" = "org.apache.derby.jdbc.ClientDriver"\n'
        f'"spark.driver.extraClassPath" = "{client}"\n'
    )
    return workload.config(folder, "kv-scan", folder / "wh", spark_conf)


def registered_tables(proxy: Proxy, name: str) -> list[str]:
    """`db.table` of every table the metastore database `name` holds (read with Derby's `ij`)."""
    script = (
        f"connect '{metastore_url(proxy, name).replace(';create=true', '')}';\n"
        'select d."NAME" || \'.\' || t."TBL_NAME" from "APP"."TBLS" t join "APP"."DBS" d on t."DB_ID" = d."DB_ID";\n'
    )
    done = subprocess.run(
        ["java", "-cp", f"{derby_jars()}/*", "org.apache.derby.tools.ij"],
        input=script, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return sorted(
        line.strip() for line in done.stdout.splitlines() if "." in line and " " not in line.strip()
    )


def test_metastore_gone_before_the_run_stops_it_before_any_write(
    spark, workload: Workload, metastore_proxy: Proxy, tmp_path: Path
) -> None:
    conf = job_config(workload, tmp_path, metastore_proxy)
    metastore_proxy.disable()
    started = time.monotonic()
    try:
        done = run("backfill", "run", "--config", str(conf), "--quiet", timeout=900)
    finally:
        metastore_proxy.enable()
    print(f"\nfault outcome: exit {done.code} in {time.monotonic() - started:.0f} s: {done.stderr[-400:]}")
    assert done.code == 2, done.stderr[-3000:]
    assert f"127.0.0.1:{metastore_proxy.port}" in done.stderr and "Traceback" not in done.stderr
    assert delta_tables(tmp_path / "wh") == []
    assert run("backfill", "run", "--config", str(conf), "--quiet", timeout=900).code == 0
    assert warehouse_differences(spark, tmp_path / "wh", workload.sim, workload.last_scan) == []
    assert registered_tables(metastore_proxy, tmp_path.name) == sorted(
        f"{t.parent.name}.{t.name}" for t in delta_tables(tmp_path / "wh")
    )


def test_metastore_gone_after_the_delta_commits_keeps_them_and_the_rerun_registers(
    spark, workload: Workload, metastore_proxy: Proxy, tmp_path: Path
) -> None:
    conf = job_config(workload, tmp_path, metastore_proxy)
    signal, resume = tmp_path / "reached", tmp_path / "resume"
    env = environment(
        TIDELAKE_FAULT_POINT="apply.after_merge",
        TIDELAKE_FAULT_SIGNAL=str(signal),
        TIDELAKE_FAULT_RESUME=str(resume),
    )
    proc = subprocess.Popen(
        command("backfill", "run", "--config", str(conf), "--quiet"),
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 900
        while not signal.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert signal.exists(), "the run never reached its first table's commit"
        metastore_proxy.disable()
        resume.touch()
        _, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
        metastore_proxy.enable()
    assert_no_secret(err)
    print(f"\nfault outcome: exit {proc.returncode}: {err[-400:]}")
    assert proc.returncode == 2, err[-3000:]
    assert f"127.0.0.1:{metastore_proxy.port}" in err and "Traceback" not in err
    committed = delta_tables(tmp_path / "wh")
    assert committed, "the Delta commit before the outage stays"
    assert untagged_commits(tmp_path / "wh", APP_ID) == []

    assert run("backfill", "run", "--config", str(conf), "--quiet", timeout=900).code == 0
    assert warehouse_differences(spark, tmp_path / "wh", workload.sim, workload.last_scan) == []
    assert registered_tables(metastore_proxy, tmp_path.name) == sorted(
        f"{t.parent.name}.{t.name}" for t in delta_tables(tmp_path / "wh")
    )
