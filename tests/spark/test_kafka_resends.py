"""Changes TiCDC sends again after a restart: a restarted owner or processor resumes from the checkpoint it
persisted, older than the resolved events it already sent, so rows and DDLs follow resolved events at or
above their ts (in every partition, or where the resolved event reached only some). The simulator
publishes such a changefeed from before its databases exist (CREATE DATABASE / TABLE in the topic), open
protocol and canal-json, with `tables = ["*.*"]`, with the schema folder or from the DDL text in the topic
alone: run step by step as the topic grows (and with until-ts) or all at once, every run reaches the
simulator's expected state, the re-sends are skipped and counted per partition, and a rerun adds no
version."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from backfill.run import run_backfill
from tests.expected import warehouse_differences
from tests.spark.test_kafka_source import versions
from tidbsim import SimulationConfig, load_index, simulate
from tidbsim.kafka import (
    Changefeed,
    KafkaMessage,
    changefeed_messages,
    publish,
    write_schema_folder,
)
from tidelake.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

_topics = itertools.count()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A workload with online DDLs, and its schema folder from before the databases exist."""
    base = tmp_path_factory.mktemp("kafka-resends")
    out = base / "sim"
    simulate(SimulationConfig(out=out, seed=2, tables=3, rows=10, txns=90, scans=3, ticdc_changelog=True))
    return out, write_schema_folder(out, base / "schema", from_creation=True)


def _config(
    tmp_path: Path, bootstrap: str, topic: str, schema: Path | None, protocol: str, name: str
) -> Path:
    conf = tmp_path / f"{name}.toml"
    folder = f'schema = "{schema}"\n' if schema is not None else ""
    conf.write_text(
        f'[job]\nname = "resends"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\n'
        f'bootstrap_servers = "{bootstrap}"\ntopic = "{topic}"\n{folder}protocol = "{protocol}"\n'
        f'[target]\nwarehouse = "{tmp_path / name}"\ntables = ["*.*"]\n'
    )
    return conf


@pytest.mark.parametrize(
    ("protocol", "schema_from"),
    [
        ("open-protocol", "folder"),
        ("canal-json", "folder"),
        ("open-protocol", "ddl text"),
        ("canal-json", "ddl text"),
    ],
)
def test_resent_changes_are_skipped_step_by_step_and_at_once(
    spark, kafka_broker, sim, tmp_path, protocol, schema_from
):
    out, folder = sim
    schema = folder if schema_from == "folder" else None  # without it: CREATE TABLE and ALTERs from the topic
    scans = load_index(out)
    feed = Changefeed(
        protocol=protocol, dispatcher="index-value", partitions=3, restarts=1, late_restarts=12,
        resolved_every=8, seed=1, from_creation=True,
    )  # fmt: skip
    messages = list(changefeed_messages(out, feed))
    # canal-json carries no row id: a table without a primary key is a multiset of whole rows, where an
    # update that leaves a row as it was cancels out and keeps the row's earlier commit ts
    rowid = ("_tidb_rowid", "_tidb_commit_ts") if protocol == "canal-json" else ()

    # step by step: the topic grows; a run stops at the first scan's resolved ts first
    topic = f"resends-{protocol}-{next(_topics)}"
    config = load_config(_config(tmp_path, kafka_broker.bootstrap, topic, schema, protocol, "steps"))
    skipped = 0
    done = 0
    for cut in (len(messages) // 3, 2 * len(messages) // 3, len(messages)):
        publish(_on(topic, messages[done:cut]), kafka_broker.bootstrap, partitions=feed.partitions)
        done = cut
        if cut == len(messages):
            first = run_backfill(spark, config, until_ts=scans[0]["resolved_ts"])
            skipped += _skipped(first)
            if first.resolved_ts == scans[0]["resolved_ts"]:
                assert (
                    warehouse_differences(spark, tmp_path / "steps", out, scans[0]["scan_id"], without=rowid)
                    == []
                )
        result = run_backfill(spark, config)
        skipped += _skipped(result)
    assert result.resolved_ts == scans[-1]["resolved_ts"], result.to_dict()
    assert warehouse_differences(spark, tmp_path / "steps", out, scans[-1]["scan_id"], without=rowid) == []
    assert skipped > 0
    before = versions(tmp_path / "steps", spark)
    again = run_backfill(spark, config)
    assert again.note == "nothing new" and versions(tmp_path / "steps", spark) == before

    # all at once
    topic = f"resends-{protocol}-{next(_topics)}"
    publish(_on(topic, messages), kafka_broker.bootstrap, partitions=feed.partitions)
    config = load_config(_config(tmp_path, kafka_broker.bootstrap, topic, schema, protocol, "once"))
    result = run_backfill(spark, config)
    assert result.resolved_ts == scans[-1]["resolved_ts"], result.to_dict()
    assert warehouse_differences(spark, tmp_path / "once", out, scans[-1]["scan_id"], without=rowid) == []
    assert _skipped(result) > 0 and {p for _, p, _ in result.resent_skipped} <= {0, 1, 2}
    assert result.to_dict()["resent_skipped"][0].keys() == {"topic", "partition", "changes"}
    before = versions(tmp_path / "once", spark)
    again = run_backfill(spark, config)
    assert again.note == "nothing new" and versions(tmp_path / "once", spark) == before


def _on(topic: str, messages: list[KafkaMessage]) -> list[KafkaMessage]:
    return [dataclasses.replace(m, topic=topic) for m in messages]


def _skipped(result) -> int:
    return sum(n for _, _, n in result.resent_skipped)
