"""A Kafka partition whose leader is unavailable (issue 52), on a real 3-broker KRaft cluster.

The workload's changefeed is published to two topics of three partitions: one replicated to all three
brokers, one with a single replica per partition. The broker leading partition 0 is stopped: with three
replicas another broker takes the partition over and the run finishes; with one, the partition has no
leader until its broker is back, and the run either rides it out within `timeout_seconds` or stops
with exit 2 naming the brokers, committing nothing. In every case the rerun reaches the tables of a run
that met no fault, and one more run adds no version.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from backfill.cli import main
from tests.faults.conftest import APP_ID, JOB, OBJECT_STORE_LINES, SPARK_LINES, Workload
from tests.faults.harness import report_outcome, table_rows, untagged_commits, versions
from tests.servers import KafkaCluster

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.drill,
    pytest.mark.timeout(1800),
]

WAREHOUSES = itertools.count()
TIMEOUT_SECONDS = 20


@dataclass
class Topics:
    cluster: KafkaCluster
    schema: Path
    reference: dict[str, list[str]]

    def source_lines(self, topic: str) -> str:
        return (
            f'kind = "ticdc-kafka"\n[source.kafka]\nbootstrap_servers = "{self.cluster.bootstrap}"\n'
            f'topic = "{topic}"\nschema = "{self.schema}"\ntimeout_seconds = {TIMEOUT_SECONDS}\n'
        )

    def leader(self, topic: str, partition: int) -> int:
        from confluent_kafka.admin import AdminClient

        meta = AdminClient({"bootstrap.servers": self.cluster.bootstrap}).list_topics(topic, timeout=30)
        return int(meta.topics[topic].partitions[partition].leader)


def config(folder: Path, warehouse: Path, source_lines: str) -> Path:
    path = folder / f"kafka-{warehouse.name}.toml"
    path.write_text(
        f'[job]\nname = "{JOB}"\n[target]\nwarehouse = "{warehouse}"\n{SPARK_LINES}{OBJECT_STORE_LINES}'
        f"[source]\n{source_lines}"
    )
    return path


@pytest.fixture(scope="module")
def topics(spark, workload: Workload, tmp_path_factory) -> Iterator[Topics]:
    """The cluster, the changefeed on `replicated-3` and `replicated-1`, and the tables a run without
    faults makes (from `replicated-3`)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tidbsim.kafka import Changefeed, changefeed_messages, publish, write_schema_folder

    base = tmp_path_factory.mktemp("kafka-cluster")
    cluster = KafkaCluster(base).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for replicas in (3, 1):
            topic = f"replicated-{replicas}"
            admin.create_topics([NewTopic(topic, 3, replicas)])[topic].result(60)
            feed = Changefeed(topic=topic, dispatcher="index-value", partitions=3, restarts=1)
            publish(changefeed_messages(workload.sim, feed), cluster.bootstrap, partitions=3)
        schema = write_schema_folder(workload.sim, base / "schema")
        found = Topics(cluster, schema, {})
        reference = base / "reference"
        assert (
            main(["run", "--config", str(config(base, reference, found.source_lines("replicated-3")))]) == 0
        )
        found.reference = table_rows(spark, reference)
        yield found
    finally:
        cluster.stop()


def run_then_rerun(spark, topics: Topics, topic: str, tmp_path: Path, during, capsys) -> tuple[int, str]:
    """A run while `during` holds, then the checks: only tagged commits; after it the rerun reaches the
    reference and one more run adds no version. Returns the first run's exit code and stderr."""
    warehouse = tmp_path / f"wh-{next(WAREHOUSES)}"
    path = config(tmp_path, warehouse, topics.source_lines(topic))
    with during:
        code = main(["run", "--config", str(path)])
    err = capsys.readouterr().err
    report_outcome(capsys, code, err)
    assert untagged_commits(warehouse, APP_ID) == []
    assert main(["run", "--config", str(path)]) == 0
    assert table_rows(spark, warehouse) == topics.reference
    before = versions(warehouse)
    assert main(["run", "--config", str(path)]) == 0
    assert versions(warehouse) == before
    return code, err


class LeaderStopped:
    """The broker leading `partition` of `topic` stopped as the block starts; started again `back_after`
    seconds later (None: when the block ends), and waited for."""

    def __init__(self, topics: Topics, topic: str, partition: int, back_after: float | None) -> None:
        self.broker = topics.cluster.broker(topics.leader(topic, partition))
        self.back_after = back_after
        self.timer: threading.Timer | None = None

    def _back(self) -> None:
        if self.broker.process is not None and self.broker.process.poll() is not None:
            self.broker.launch()

    def __enter__(self) -> LeaderStopped:
        self.broker.stop()
        if self.back_after is not None:
            self.timer = threading.Timer(self.back_after, self._back)
            self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.join()
        self._back()
        self.broker.wait()
        time.sleep(2)  # its partitions' leadership settles


def test_with_three_replicas_another_broker_leads_and_the_run_finishes(
    spark, topics: Topics, tmp_path, capsys
) -> None:
    code, err = run_then_rerun(
        spark, topics, "replicated-3", tmp_path, LeaderStopped(topics, "replicated-3", 0, None), capsys
    )
    assert code == 0, err


def test_with_one_replica_a_leader_gone_for_good_stops_with_exit_2_naming_the_brokers(
    spark, topics: Topics, tmp_path, capsys
) -> None:
    started = time.monotonic()
    code, err = run_then_rerun(
        spark, topics, "replicated-1", tmp_path, LeaderStopped(topics, "replicated-1", 0, None), capsys
    )
    assert code == 2, err
    assert topics.cluster.brokers[0].bootstrap in err, err
    assert "partition replicated-1[0] has no leader" in err, err
    assert "Traceback" not in err
    assert time.monotonic() - started < 900


def test_with_one_replica_a_leader_back_within_the_timeout_is_ridden_out_or_named(
    spark, topics: Topics, tmp_path, capsys
) -> None:
    code, err = run_then_rerun(
        spark, topics, "replicated-1", tmp_path, LeaderStopped(topics, "replicated-1", 0, 3.0), capsys
    )
    assert code in (0, 2), err
    if code == 2:
        assert topics.cluster.brokers[0].bootstrap in err, err
