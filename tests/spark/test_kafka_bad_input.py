"""The Kafka source on bad input, against a real broker: exit 2 with a message naming topic, partition and
offset (or the brokers, or the lost offsets), every table left as it was; and `backfill status`."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from pathlib import Path

import pytest

from backfill.cli import main
from backfill.sources.ticdc.open_protocol import RESOLVED, Where, frame, split_frames
from tidbsim import SimulationConfig, load_index, simulate
from tidbsim.kafka import Changefeed, KafkaMessage, open_protocol_messages, publish
from tidbsim.ticdc_open import key_json
from tidelake import delta

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

_topics = itertools.count()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kafka-bad") / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=3, tables=2, rows=8, txns=30, scans=2, ddl_kinds=(), ticdc_changelog=True
        )
    )
    return out


def write_config(tmp_path: Path, bootstrap: str, topic: str, sim: Path) -> Path:
    schema = sim / "scans" / load_index(sim)[0]["scan_id"] / "schema"
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "bad"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\nbootstrap_servers = "{bootstrap}"\n'
        f'topic = "{topic}"\nschema = "{schema}"\ntimeout_seconds = 5\n[target]\nwarehouse = "{tmp_path / "wh"}"\n'
    )
    return conf


@pytest.fixture
def landed(spark, kafka_broker, sim, tmp_path):
    """A topic of two partitions whose changefeed already landed: (config, topic, table versions)."""
    topic = f"bad-{next(_topics)}"
    publish(
        open_protocol_messages(sim, Changefeed(topic=topic, partitions=2)),
        kafka_broker.bootstrap,
        partitions=2,
    )
    conf = write_config(tmp_path, kafka_broker.bootstrap, topic, sim)
    assert main(["run", "--config", str(conf)]) == 0
    return conf, topic, versions(spark, tmp_path / "wh")


def versions(spark, warehouse: Path) -> dict[str, int]:
    return {
        f"{d.name}.{t.name}": delta.table_version(spark, str(t))
        for d in warehouse.iterdir()
        for t in d.iterdir()
    }


def resolved(topic: str, partition: int, ts: int) -> KafkaMessage:
    return KafkaMessage(
        topic,
        partition,
        frame([key_json(ts, "", "", type_=RESOLVED)], version=True),
        frame([b""], version=False),
    )


def table_rows(spark, warehouse: Path) -> dict[str, list[str]]:
    return {
        table: sorted(
            map(repr, spark.read.format("delta").load(str(warehouse / table.replace(".", "/"))).collect())
        )
        for table in versions(spark, warehouse)
    }


def fails(conf: Path, capsys, *needles: str) -> None:
    assert main(["run", "--config", str(conf)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    for needle in needles:
        assert needle in err, err


def latest_offset(broker, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tidelake-tests"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        consumer.close()


def test_broken_framing_names_topic_partition_and_offset(spark, kafka_broker, sim, tmp_path, landed, capsys):
    conf, topic, before = landed
    offset = latest_offset(kafka_broker, topic, 1)
    bad = KafkaMessage(topic, 1, frame([b'{"ts":1,"t":3}'], version=True)[:-3], b"")
    publish([bad], kafka_broker.bootstrap, partitions=2)
    fails(conf, capsys, f"topic '{topic}' partition 1 offset {offset}", "runs past the end")
    assert versions(spark, tmp_path / "wh") == before


def test_a_row_value_that_is_not_json_names_its_offset(spark, kafka_broker, sim, tmp_path, landed, capsys):
    conf, topic, before = landed
    db, table = next(iter(versions(spark, tmp_path / "wh"))).split(".")
    last = load_index(sim)[-1]["resolved_ts"]
    offset = latest_offset(kafka_broker, topic, 0)
    row = KafkaMessage(
        topic,
        0,
        frame([key_json(last + 10, db, table)], version=True),
        frame([b'{"u": {"id": '], version=False),
    )
    publish(
        [row, resolved(topic, 0, last + 20), resolved(topic, 1, last + 20)],
        kafka_broker.bootstrap,
        partitions=2,
    )
    fails(conf, capsys, f"topic '{topic}' partition 0 offset {offset}")
    assert versions(spark, tmp_path / "wh") == before


def test_an_unreachable_broker_is_named_and_nothing_is_written(spark, sim, tmp_path, capsys):
    conf = write_config(tmp_path, "127.0.0.1:9", "nowhere", sim)
    fails(conf, capsys, "Kafka at 127.0.0.1:9", "cannot read topic metadata")
    assert not (tmp_path / "wh").exists()


def source_progress(conf: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "--config", str(conf), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["source_progress"]


def test_offsets_deleted_by_retention_are_named(spark, kafka_broker, sim, tmp_path, landed, capsys):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    conf, topic, before = landed
    next_offset = source_progress(conf, capsys)["partitions"][0]["next_offset"]
    last = load_index(sim)[-1]["resolved_ts"]
    publish(
        [resolved(topic, p, last + 5 * (i + 1)) for i in range(3) for p in (0, 1)],
        kafka_broker.bootstrap,
        partitions=2,
    )
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, next_offset + 2)]).values():
        future.result(30)
    fails(
        conf,
        capsys,
        f"topic '{topic}' partition 0: offsets {next_offset}..{next_offset + 1} are needed but already deleted",
    )
    assert versions(spark, tmp_path / "wh") == before


def test_status_shows_partitions_offsets_and_watermarks(spark, kafka_broker, sim, tmp_path, landed, capsys):
    """The workload goes on past the last resolved event: those messages wait for the next run."""
    conf, topic, _ = landed
    doc = source_progress(conf, capsys)
    parts = doc["partitions"]
    last = load_index(sim)[-1]["resolved_ts"]
    assert [(p["topic"], p["partition"]) for p in parts] == [(topic, 0), (topic, 1)]
    for p in parts:
        assert p["latest_offset"] == latest_offset(kafka_broker, topic, p["partition"])
        assert p["next_offset"] <= p["latest_offset"]
        assert p["waiting_messages"] == p["latest_offset"] - p["next_offset"]
        assert p["watermark"] == last
    assert any(p["waiting_messages"] for p in parts)
    assert doc["resolved_ts"] == last
    assert f"topic '{topic}' partition 0" in doc["held_back_by"]


def test_a_handle_key_only_message_fails_without_an_upstream(
    spark, kafka_broker, sim, tmp_path, landed, capsys
):
    """TiCDC's large-message handling may send only the handle columns; the full row must be fetched
    upstream, which is not configured here: a clear error, nothing written."""
    conf, topic, before = landed
    last = load_index(sim)[-1]["resolved_ts"]
    offset = latest_offset(kafka_broker, topic, 1)
    value = b'{"u": {"id": {"t": 8, "f": 10, "v": 104}}}'
    row = KafkaMessage(
        topic,
        1,
        frame([key_json(last + 10, "shop", "orders", handle_only=True)], version=True),
        frame([value], version=False),
    )
    publish(
        [row, resolved(topic, 0, last + 20), resolved(topic, 1, last + 20)],
        kafka_broker.bootstrap,
        partitions=2,
    )
    fails(
        conf, capsys, f"topic '{topic}' partition 1 offset {offset}", "handle-key-only event of shop.orders"
    )
    assert versions(spark, tmp_path / "wh") == before


def test_a_ddl_the_schema_folder_lacks_stops_the_run_naming_it(
    spark, kafka_broker, sim, tmp_path, landed, capsys
):
    """A DDL event of a tracked table that the schema folder's ddl_jobs.jsonl does not hold (the folder
    is older than the topic): passing over it would apply later rows to the wrong table or schema."""
    from backfill.sources.ticdc.open_protocol import DDL
    from tidbsim.ticdc_open import ddl_value_json

    conf, topic, before = landed
    table = sorted(before)[0]
    db, name = table.split(".")
    ts = load_index(sim)[-1]["resolved_ts"] + (1 << 18)
    query = f"TRUNCATE TABLE `{db}`.`{name}`"
    ddl = KafkaMessage(
        topic,
        0,
        frame([key_json(ts, db, name, type_=DDL)], version=True),
        frame([ddl_value_json(query, 11)], version=False),
    )
    after = [resolved(topic, p, ts + 1) for p in (0, 1)]
    publish([ddl, *after], kafka_broker.bootstrap, partitions=2)
    fails(conf, capsys, f"DDL of {table} at ts {ts}", "is not in the schema folder", "partition 0")
    assert versions(spark, tmp_path / "wh") == before


def test_changes_sent_again_after_a_resolved_event_are_skipped_and_counted(
    spark, kafka_broker, sim, tmp_path, landed, capsys
):
    """A restarted changefeed sends rows that already landed again, after the resolved events that
    covered them: the next run skips them (tiflow's consumer: fallback rows), counts them per partition
    in its result and in `backfill status`, and the tables stay as they were."""
    conf, topic, before = landed
    last = load_index(sim)[-1]["resolved_ts"]
    feed = Changefeed(topic=topic, partitions=2)
    rows = [m for m in open_protocol_messages(sim, feed) if m.partition == 0 and b'"t":1' in m.key]
    keys = [json.loads(k) for m in rows for k in split_frames(m.key[8:], Where(topic, 0, 0), "key")]
    events = sum(1 for k in keys if k["ts"] <= last)  # those above the last resolved ts are no re-sends
    assert 0 < events < len(keys)
    held = table_rows(spark, tmp_path / "wh")
    publish([*rows, *(resolved(topic, p, last + 20) for p in (0, 1))], kafka_broker.bootstrap, partitions=2)
    capsys.readouterr()
    assert main(["run", "--config", str(conf), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["resent_skipped"] == [{"topic": topic, "partition": 0, "changes": events}]
    assert result["resolved_ts"] == last + 20 and table_rows(spark, tmp_path / "wh") == held
    parts = {p["partition"]: p for p in source_progress(conf, capsys)["partitions"]}
    assert parts[0]["resent_skipped"] == events and parts[1]["resent_skipped"] == 0


def test_database_ddls_pass_and_drop_database_needs_its_job(
    spark, kafka_broker, sim, tmp_path, landed, capsys
):
    """CREATE / ALTER DATABASE change no table (the key names no table, `tbl` omitted as TiCDC does); a
    DROP DATABASE drops that database's tables, which the schema folder must show: without the job, exit
    2 naming it; with it, the database's tables go (folder and all), the others stay."""
    from backfill.sources.ticdc.open_protocol import DDL
    from tidbsim.ticdc_open import ddl_value_json

    conf, topic, before = landed
    folder = tmp_path / "schema"
    shutil.copytree(sim / "scans" / load_index(sim)[0]["scan_id"] / "schema", folder)
    conf.write_text(re.sub(r'schema = ".*"', f'schema = "{folder}"', conf.read_text()))
    db = sorted(before)[0].split(".")[0]
    ts = load_index(sim)[-1]["resolved_ts"] + (1 << 18)

    def ddl(at: int, query: str, action: int) -> list[KafkaMessage]:
        key = frame([key_json(at, db if "new" not in query else "newdb", "", type_=DDL)], version=True)
        messages = [
            KafkaMessage(topic, p, key, frame([ddl_value_json(query, action)], version=False)) for p in (0, 1)
        ]
        return [*messages, *(resolved(topic, p, at + 1) for p in (0, 1))]

    publish([*ddl(ts, "CREATE DATABASE `newdb`", 1), *ddl(ts + 10, f"ALTER DATABASE `{db}` CHARSET utf8mb4", 15)],
            kafka_broker.bootstrap, partitions=2)  # fmt: skip
    assert main(["run", "--config", str(conf)]) == 0
    assert versions(spark, tmp_path / "wh").keys() == before.keys()

    publish(ddl(ts + 20, f"DROP DATABASE `{db}`", 2), kafka_broker.bootstrap, partitions=2)
    fails(conf, capsys, f"'DROP DATABASE `{db}`' at ts {ts + 20} drops {db}.", "partition 0")
    job = {"id": 1 << 40, "type": 2, "schema_name": db, "table_id": 0, "state": 6,
           "query": f"DROP DATABASE `{db}`", "binlog": {"FinishedTS": ts + 20}}  # fmt: skip
    with (folder / "ddl_jobs.jsonl").open("a") as f:
        f.write(json.dumps(job) + "\n")
    assert main(["run", "--config", str(conf)]) == 0
    assert sorted(versions(spark, tmp_path / "wh")) == sorted(t for t in before if not t.startswith(f"{db}."))


def test_a_ddl_statement_the_parser_rejects_stops_the_run_naming_it(
    spark, kafka_broker, sim, tmp_path, capsys
):
    """Without a schema folder a DDL is applied from its text: a statement sqlglot cannot read (here
    MySQL's parenthesised ADD COLUMN list) stops the run naming topic, partition, offset and the statement;
    no table moves."""
    from backfill.sources.ticdc.open_protocol import DDL
    from tidbsim.ticdc_open import ddl_value_json

    topic = f"bad-{next(_topics)}"
    publish(
        open_protocol_messages(sim, Changefeed(topic=topic, partitions=2)),
        kafka_broker.bootstrap,
        partitions=2,
    )
    conf = write_config(tmp_path, kafka_broker.bootstrap, topic, sim)
    conf.write_text(
        "".join(line + "\n" for line in conf.read_text().splitlines() if not line.startswith("schema"))
    )
    assert main(["run", "--config", str(conf)]) == 0
    before = versions(spark, tmp_path / "wh")
    db, name = sorted(before)[0].split(".")
    ts = load_index(sim)[-1]["resolved_ts"] + (1 << 18)
    query = f"ALTER TABLE `{db}`.`{name}` ADD COLUMN (`x` INT, `y` INT)"
    offset = latest_offset(kafka_broker, topic, 0)
    ddl = KafkaMessage(
        topic,
        0,
        frame([key_json(ts, db, name, type_=DDL)], version=True),
        frame([ddl_value_json(query, 5)], version=False),
    )
    publish([ddl, *(resolved(topic, p, ts + 1) for p in (0, 1))], kafka_broker.bootstrap, partitions=2)
    fails(
        conf,
        capsys,
        f"topic '{topic}' partition 0 offset {offset}",
        f"DDL of {db}.{name}",
        "ADD COLUMN (`x` INT",
    )
    assert versions(spark, tmp_path / "wh") == before
