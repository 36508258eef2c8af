"""Network faults between a backfill and its Kafka broker, through Toxiproxy (issue 52).

The broker advertises the proxy's port, so every connection the clients make (metadata, offsets, the
Spark read's fetches) goes through the proxy. While a fault holds (latency spikes, connections reset at
random, the broker unreachable for a while), the backfill either finishes or stops with exit 2 or 3
naming the broker; then a rerun without the fault reaches the same tables as a run that met no fault,
and one more run adds no version.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest

from backfill.cli import main
from tests.faults.conftest import APP_ID, JOB, OBJECT_STORE_LINES, SPARK_LINES, Workload
from tests.faults.harness import (
    delta_tables,
    gone_for_a_while,
    report_outcome,
    resets,
    table_rows,
    untagged_commits,
    versions,
)
from tests.servers import KafkaBroker, free_port
from tests.toxiproxy import Proxy

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.drill]

TOPIC = "faults-open"
WAREHOUSES = itertools.count()


@dataclass
class Feed:
    proxy: Proxy
    source_lines: str
    reference: dict[str, list[str]]


@pytest.fixture(scope="module")
def feed(spark, toxiproxy, workload: Workload, tmp_path_factory) -> Iterator[Feed]:
    """A broker reached only through a proxy (it advertises the proxy's port), the workload's changefeed
    published to it, and the tables one run without faults makes from it."""
    from tidbsim.kafka import Changefeed, changefeed_messages, publish, write_schema_folder

    base = tmp_path_factory.mktemp("kafka-behind-proxy")
    broker = KafkaBroker(base, advertised_port=free_port())
    assert broker.advertised_port is not None
    proxy = toxiproxy.proxy("kafka", broker.port, listen_port=broker.advertised_port)
    broker.start()
    try:
        bootstrap = f"127.0.0.1:{proxy.port}"
        changefeed = Changefeed(topic=TOPIC, dispatcher="index-value", partitions=3, restarts=1)
        publish(changefeed_messages(workload.sim, changefeed), bootstrap, partitions=3)
        schema = write_schema_folder(workload.sim, base / "schema")
        lines = (
            f'kind = "ticdc-kafka"\n[source.kafka]\nbootstrap_servers = "{bootstrap}"\n'
            f'topic = "{TOPIC}"\nschema = "{schema}"\ntimeout_seconds = 10\n'
        )
        reference = base / "reference"
        assert main(["run", "--config", str(config(workload, base, reference, lines))]) == 0
        yield Feed(proxy, lines, table_rows(spark, reference))
    finally:
        broker.stop()


def config(workload: Workload, folder: Path, warehouse: Path, source_lines: str) -> Path:
    """The drill's job config for the proxied topic (as `Workload.config` writes one for "kafka")."""
    path = folder / f"kafka-{warehouse.name}.toml"
    path.write_text(
        f'[job]\nname = "{JOB}"\n[target]\nwarehouse = "{warehouse}"\n{SPARK_LINES}{OBJECT_STORE_LINES}'
        f"[source]\n{source_lines}"
    )
    return path


def run_then_rerun(
    spark,
    feed: Feed,
    workload: Workload,
    tmp_path: Path,
    fault: Callable[[], AbstractContextManager[None]],
    capsys,
) -> int:
    """A run with `fault` in force, then the checks: only tagged commits, the rerun reaches the
    reference, one more run adds no version. Returns the faulted run's exit code."""
    warehouse = tmp_path / f"wh-{next(WAREHOUSES)}"
    path = config(workload, tmp_path, warehouse, feed.source_lines)
    with fault():
        code = main(["run", "--config", str(path)])
    err = capsys.readouterr().err
    report_outcome(capsys, code, err)
    assert code in (0, 2, 3), err
    if code:
        assert f"127.0.0.1:{feed.proxy.port}" in err, err
    assert untagged_commits(warehouse, APP_ID) == []
    assert main(["run", "--config", str(path)]) == 0
    assert table_rows(spark, warehouse) == feed.reference
    before = versions(warehouse)
    assert main(["run", "--config", str(path)]) == 0
    assert versions(warehouse) == before
    return code


def test_latency_spikes_on_the_broker_change_nothing(spark, feed: Feed, workload, tmp_path, capsys) -> None:
    code = run_then_rerun(
        spark, feed, workload, tmp_path, lambda: feed.proxy.toxic("latency", latency=300, jitter=300), capsys
    )
    assert code == 0


def test_connections_reset_at_random_mid_read(spark, feed: Feed, workload, tmp_path, capsys) -> None:
    run_then_rerun(
        spark,
        feed,
        workload,
        tmp_path,
        lambda: resets(feed.proxy, "downstream", toxicity=0.3, after_ms=50),
        capsys,
    )


@pytest.mark.parametrize("after", [1.0, 4.0])  # about the plan, about the read (timing varies)
def test_the_broker_gone_for_a_while(spark, feed: Feed, workload, tmp_path, capsys, after: float) -> None:
    run_then_rerun(
        spark, feed, workload, tmp_path, lambda: gone_for_a_while(feed.proxy, after, lasting=6), capsys
    )


def test_the_broker_gone_between_plan_and_read_stops_with_exit_2_naming_it(
    spark, feed: Feed, workload, tmp_path, capsys, monkeypatch
) -> None:
    """The offsets are listed, then the broker goes away for good before the records are read: the run
    stops within its timeout (`timeout_seconds`), exit 2, naming the broker; nothing is committed.
    (Before, the read waited Spark's own 120 s poll timeout and ended in a raw JVM trace, exit 1.)"""
    from backfill.sources.kafka import broker

    read_records = broker.read_records

    def broker_gone_then_read(*args, **kwargs):  # the moment between plan and read; the read is real
        feed.proxy.disable()
        return read_records(*args, **kwargs)

    monkeypatch.setattr(broker, "read_records", broker_gone_then_read)
    warehouse = tmp_path / "wh-gone"
    path = config(workload, tmp_path, warehouse, feed.source_lines)
    started = time.monotonic()
    try:
        code = main(["run", "--config", str(path)])
    finally:
        feed.proxy.enable()
    err = capsys.readouterr().err
    report_outcome(capsys, code, err)
    assert code == 2, err
    assert f"127.0.0.1:{feed.proxy.port}" in err, err
    assert time.monotonic() - started < 200
    assert delta_tables(warehouse) == []
    monkeypatch.undo()
    assert main(["run", "--config", str(path)]) == 0
    assert table_rows(spark, warehouse) == feed.reference
