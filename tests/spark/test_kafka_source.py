"""The Kafka source against a real broker: the simulator publishes a changefeed's open-protocol messages
(several partitions, dispatchers, re-sent duplicates after producer restarts, resolved events) and
`run_backfill` must build the simulator's expected tables, the same ones the kv-scan source builds,
exactly once, also when more messages arrive between runs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from backfill.run import run_backfill
from tests.expected import warehouse_differences
from tidbsim import SimulationConfig, load_index, simulate
from tidbsim.kafka import Changefeed, open_protocol_messages, publish, write_schema_folder
from tidelake import delta
from tidelake.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

_topics = itertools.count()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kafka-source") / "sim"
    simulate(
        SimulationConfig(
            out=out,
            seed=5,
            tables=3,
            rows=20,
            txns=120,
            scans=3,
            ddl_kinds=(),
            ticdc_changelog=True,
            collation_tables=("utf8mb4_general_ci", "utf8mb4_unicode_ci"),  # respelled keys: update events
        )
    )
    return out


def job_config(tmp_path: Path, bootstrap: str, topic: str, sim: Path, *, extra: str = "") -> Path:
    first = load_index(sim)[0]["scan_id"]
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "kafka"\n[source]\nkind = "ticdc-kafka"\n'
        f'[source.kafka]\nbootstrap_servers = "{bootstrap}"\ntopic = "{topic}"\n'
        f'schema = "{sim / "scans" / first / "schema"}"\n{extra}'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\n'
    )
    return conf


def versions(warehouse: Path, spark) -> dict[str, int]:
    return {
        f"{db.name}.{t.name}": delta.table_version(spark, str(t))
        for db in warehouse.iterdir()
        for t in db.iterdir()
    }


@pytest.mark.parametrize(
    "feed",
    [
        Changefeed(dispatcher="default", partitions=3, restarts=2, max_batch_size=8, compression="snappy"),
        pytest.param(  # long tier (`pytest --drill`); the kill and canal-json tests below dispatch by index value
            Changefeed(dispatcher="index-value", partitions=4, restarts=2, compression="snappy"),
            marks=pytest.mark.drill,
        ),
        pytest.param(  # long tier (`pytest --drill`): a third dispatcher, the same path as the two above
            Changefeed(dispatcher="ts", partitions=2, restarts=3, time_zone="Asia/Shanghai"),
            marks=pytest.mark.drill,
        ),
    ],
    ids=lambda f: f.dispatcher,
)
def test_a_published_changefeed_builds_the_expected_tables_once(spark, kafka_broker, sim, tmp_path, feed):
    topic = f"open-{next(_topics)}"
    feed = Changefeed(**{**feed.__dict__, "topic": topic})
    codec = {"default": "none", "index-value": "zstd", "ts": "lz4"}[feed.dispatcher]  # Kafka's own codec
    sent = publish(
        open_protocol_messages(sim, feed),
        kafka_broker.bootstrap,
        partitions=feed.partitions,
        kafka_compression=codec,
    )
    assert len(sent) == feed.partitions
    extra = f'compression = "{feed.compression}"\ntime_zone = "{feed.time_zone}"\n'
    config = load_config(job_config(tmp_path, kafka_broker.bootstrap, topic, sim, extra=extra))

    result = run_backfill(spark, config)
    last = load_index(sim)[-1]
    assert result.resolved_ts == last["resolved_ts"], result.to_dict()
    assert warehouse_differences(spark, tmp_path / "wh", sim, last["scan_id"]) == []
    # a few hundred changes a table: each table is typed by one Python task, not one per topic partition
    # (`decode_tasks` counts the tasks that ran the table's decode, rows or not)
    assert {t.table: t.decode_tasks for t in result.tables if t.upserted} == {
        t.table: 1 for t in result.tables if t.upserted
    }

    before = versions(tmp_path / "wh", spark)
    again = run_backfill(spark, config)
    assert again.resolved_ts == last["resolved_ts"] and again.note == "nothing new", again.to_dict()
    assert versions(tmp_path / "wh", spark) == before


def test_a_table_of_many_changes_is_typed_by_several_tasks(spark, kafka_broker, sim, tmp_path, monkeypatch):
    """At 10 changes a task (`sources.decode_tasks`), a table whose row events the index-value dispatcher
    spread over the partitions is typed by more than one task, never by more than the topic has partitions,
    to the same tables."""
    from backfill.sources import decode_tasks

    monkeypatch.setattr(decode_tasks, "DECODE_ROWS_PER_TASK", 10)
    topic = f"open-{next(_topics)}"
    feed = Changefeed(topic=topic, dispatcher="index-value", partitions=3)
    publish(open_protocol_messages(sim, feed), kafka_broker.bootstrap, partitions=feed.partitions)

    result = run_backfill(spark, load_config(job_config(tmp_path, kafka_broker.bootstrap, topic, sim)))

    last = load_index(sim)[-1]
    assert warehouse_differences(spark, tmp_path / "wh", sim, last["scan_id"]) == []
    tasks = {t.table: t.decode_tasks for t in result.tables if t.upserted}
    assert max(tasks.values()) > 1 and all(1 <= n <= feed.partitions for n in tasks.values()), tasks


@pytest.mark.drill  # long tier (`pytest --drill`): CI keeps the one-run, rerun and kill cases of this source
def test_runs_between_arrivals_reach_each_resolved_point_and_equal_kv_scan(
    spark, kafka_broker, sim, tmp_path
):
    """Messages arrive in three parts; each run applies what the partitions resolved so far and reads
    again what was above it. The end state equals the kv-scan source's tables for the same workload."""
    topic = f"open-{next(_topics)}"
    feed = Changefeed(topic=topic, dispatcher="default", partitions=3, restarts=2, max_batch_size=4)
    messages = list(open_protocol_messages(sim, feed))
    config = load_config(job_config(tmp_path, kafka_broker.bootstrap, topic, sim))
    cuts = [len(messages) // 3, 2 * len(messages) // 3, len(messages)]
    done = 0
    reached = []
    for cut in cuts:
        publish(messages[done:cut], kafka_broker.bootstrap, partitions=feed.partitions)
        done = cut
        result = run_backfill(spark, config)
        reached.append(result.resolved_ts)
    assert reached == sorted(reached) and reached[0] and reached[0] < reached[-1]
    last = load_index(sim)[-1]
    assert reached[-1] == last["resolved_ts"]
    assert warehouse_differences(spark, tmp_path / "wh", sim, last["scan_id"]) == []

    kv = tmp_path / "kv.toml"
    kv.write_text(
        f'[job]\nname = "kv"\n[source]\npath = "{sim / "scans"}"\n[target]\nwarehouse = "{tmp_path / "kvwh"}"\n'
    )
    run_backfill(spark, load_config(kv))
    for db in (tmp_path / "kvwh").iterdir():
        for table in db.iterdir():
            ours = spark.read.format("delta").load(str(tmp_path / "wh" / db.name / table.name))
            theirs = spark.read.format("delta").load(str(table))
            assert ours.schema == theirs.schema, table
            assert ours.exceptAll(theirs).count() == 0 and theirs.exceptAll(ours).count() == 0, table


def test_ddl_events_are_barriers_with_a_schema_folder(spark, kafka_broker, tmp_path):
    """Online DDLs (add/drop column, truncate, rename, partitions, ...) with the schema history given as
    a folder (the first capture's TableInfo plus every DDL job): each DDL is applied once every partition
    passed it, rows before it keep the old schema; the end state is the simulator's."""
    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=2, tables=3, rows=10, txns=90, scans=3, ticdc_changelog=True))
    scans = load_index(out)
    schema = write_schema_folder(out, tmp_path / "schema")
    assert (schema / "ddl_jobs.jsonl").read_text(), "the workload must hold DDL jobs"
    topic = f"open-{next(_topics)}"
    feed = Changefeed(topic=topic, dispatcher="table", partitions=3, restarts=1)
    publish(open_protocol_messages(out, feed), kafka_broker.bootstrap, partitions=3)
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "kafka"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\n'
        f'bootstrap_servers = "{kafka_broker.bootstrap}"\ntopic = "{topic}"\nschema = "{schema}"\n'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\n'
    )
    result = run_backfill(spark, load_config(conf))
    assert result.resolved_ts == scans[-1]["resolved_ts"], result.to_dict()
    assert sum(t.ddl_steps for t in result.tables) > 0
    assert warehouse_differences(spark, tmp_path / "wh", out, scans[-1]["scan_id"]) == []


def test_without_a_schema_folder_the_schema_is_inferred_and_only_the_lossy_types_differ(
    spark, kafka_broker, sim, tmp_path
):
    """Open-protocol messages carry type codes and flags only: DECIMAL(p,s) becomes its text, ENUM and
    SET their numbers, BIT(n) 8 bytes (README). Every other column, and every key, matches."""
    from backfill.codec.schema import ColumnKind
    from tidbsim import load_expected

    topic = f"open-{next(_topics)}"
    feed = Changefeed(topic=topic, dispatcher="default", partitions=3, restarts=1)
    publish(open_protocol_messages(sim, feed), kafka_broker.bootstrap, partitions=3)
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "kafka"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\n'
        f'bootstrap_servers = "{kafka_broker.bootstrap}"\ntopic = "{topic}"\n'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\n'
    )
    result = run_backfill(spark, load_config(conf))
    last = load_index(sim)[-1]
    assert result.resolved_ts == last["resolved_ts"]
    lossy = {ColumnKind.DECIMAL, ColumnKind.ENUM, ColumnKind.SET, ColumnKind.BIT}
    schemas = {(s.schema_name, s.name): s for s in _first_capture_schemas(sim)}
    lossy_tables = 0
    for (db, name), want in load_expected(sim, last["scan_id"]).items():
        kept = [
            c
            for c in want.column_names
            if c not in {x.name for x in schemas[(db, name)].columns if x.kind in lossy}
        ]
        got = spark.read.format("delta").load(str(tmp_path / "wh" / db / name)).toArrow()
        assert sorted(map(repr, got.select(kept).to_pylist())) == sorted(
            map(repr, want.select(kept).to_pylist())
        )
        lossy_tables += len(kept) < len(want.column_names)
    assert lossy_tables > 0, "the simulated tables should include DECIMAL, ENUM, SET or BIT columns"


def _first_capture_schemas(sim: Path):
    from backfill.codec import TableSchema
    from backfill.sources.kvscan.format import parse_tables_jsonl

    path = sim / "scans" / load_index(sim)[0]["scan_id"] / "schema" / "tables.jsonl"
    return [
        TableSchema.from_table_info(doc.table_info, schema_name=doc.schema_name)
        for doc in parse_tables_jsonl(path.read_text(), str(path))
    ]


def test_backfill_simulate_publishes_to_a_broker(kafka_broker, tmp_path, capsys):
    from confluent_kafka import Consumer, TopicPartition

    from backfill.cli import main

    topic = f"cli-{next(_topics)}"
    args = ["simulate", "--out", str(tmp_path / "sim"), "--tables", "2", "--rows", "5", "--txns", "20"]
    args += ["--kafka", kafka_broker.bootstrap, "--kafka-topic", topic, "--kafka-partitions", "2", "--json"]
    assert main(args) == 0
    published = json.loads(capsys.readouterr().out)["kafka"]
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "tidelake-tests"})
    ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)]
    consumer.close()
    assert published["messages"] == sum(ends) > 0 and all(ends)
    assert main([*args[:2], str(tmp_path / "sim2"), *args[3:9], "--dispatcher", "nope"]) == 2
    assert "dispatcher" in capsys.readouterr().err


def test_publish_returns_once_the_broker_holds_each_message_in_order(kafka_broker):
    """Every message of each call is in the log, in order, at the offsets after the earlier calls; a broker
    that holds other than was acknowledged is an error naming the partition (not a silent short topic)."""
    from confluent_kafka import Consumer, TopicPartition

    from tidbsim.kafka import KafkaMessage, _await_written

    topic = f"pub-{next(_topics)}"
    messages = [KafkaMessage(topic, i % 2, b"k%d" % i, b"v%d" % i) for i in range(9)]
    assert publish(messages[:5], kafka_broker.bootstrap, partitions=2) == {(topic, 0): 3, (topic, 1): 2}
    assert publish(messages[5:], kafka_broker.bootstrap, partitions=2) == {(topic, 1): 2, (topic, 0): 2}
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "tidelake-tests"})
    sent = {p: [m.value for m in messages if m.partition == p] for p in (0, 1)}
    held = {}
    for p in (0, 1):
        consumer.assign([TopicPartition(topic, p, 0)])
        held[p] = [m.value() for m in consumer.consume(len(sent[p]), timeout=10)]
    consumer.close()
    assert held == sent
    with pytest.raises(RuntimeError, match=rf"{topic}\[1\] 4 of 5"):
        _await_written(kafka_broker.bootstrap, {(topic, 1): 5}, {}, timeout_s=1)


@pytest.mark.parametrize("protocol", ["open-protocol", "canal-json"])
def test_processes_publishing_their_partitions_fill_the_topic_as_one_process(kafka_broker, sim, protocol):
    """`publish_changefeed(processes=2)`: every partition holds, in order, the messages one process
    writes for it, and the row events counted are the changefeed's."""
    from confluent_kafka import Consumer, TopicPartition

    from tidbsim.kafka import changefeed_messages, publish_changefeed

    topic = f"shares-{next(_topics)}"
    feed = Changefeed(topic=topic, dispatcher="index-value", partitions=4, restarts=1, protocol=protocol)
    want: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(4)}
    rows = 0
    for m in changefeed_messages(sim, feed):
        want[m.partition].append((m.key or None, m.value))
        rows += m.row_events
    sent, counted = publish_changefeed(sim, feed, kafka_broker.bootstrap, processes=2)
    assert counted == rows > 100
    assert sent == {(topic, p): len(want[p]) for p in range(4)}
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "tidelake-tests"})
    held = {}
    for p in range(4):
        consumer.assign([TopicPartition(topic, p, 0)])
        held[p] = [(m.key() or None, m.value()) for m in consumer.consume(len(want[p]), timeout=10)]
    consumer.close()
    assert held == want


def test_a_run_killed_between_tables_loses_nothing(spark, kafka_broker, sim, tmp_path):
    """The last commit of one table is gone, as if the run was killed before that table's MERGE: the
    rerun reads that run's messages again and the table catches up; the others add no version."""
    topic = f"open-{next(_topics)}"
    feed = Changefeed(topic=topic, dispatcher="index-value", partitions=3, restarts=1)
    publish(open_protocol_messages(sim, feed), kafka_broker.bootstrap, partitions=3)
    config = load_config(job_config(tmp_path, kafka_broker.bootstrap, topic, sim))
    run_backfill(spark, config)
    before = versions(tmp_path / "wh", spark)
    victim = max(before)  # a table with rows: its data commit goes
    log = tmp_path / "wh" / victim.replace(".", "/") / "_delta_log"
    for file in [*log.glob(f"{before[victim]:020d}.*"), *log.glob(f".{before[victim]:020d}.*")]:
        file.unlink()  # the commit and its checksum files
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # the JVM caches table snapshots

    result = run_backfill(spark, config)
    last = load_index(sim)[-1]
    assert result.resolved_ts == last["resolved_ts"]
    assert warehouse_differences(spark, tmp_path / "wh", sim, last["scan_id"]) == []
    assert versions(tmp_path / "wh", spark) == before


def test_canal_json_topic_builds_the_same_tables_as_kv_scan(spark, kafka_broker, sim, tmp_path):
    """canal-json with the TiDB extension (one message per change, DDLs to partition 0, watermarks to
    every partition, re-sent duplicates): the expected state, the kv-scan source's tables, once."""
    from tests.integration.test_sources_agree import warehouse_tables
    from tidbsim.kafka import changefeed_messages

    topic = f"canal-{next(_topics)}"
    feed = Changefeed(topic=topic, protocol="canal-json", dispatcher="index-value", partitions=3, restarts=2)
    publish(changefeed_messages(sim, feed), kafka_broker.bootstrap, partitions=feed.partitions)
    config = load_config(
        job_config(tmp_path, kafka_broker.bootstrap, topic, sim, extra='protocol = "canal-json"\n')
    )
    result = run_backfill(spark, config)
    last = load_index(sim)[-1]
    assert result.resolved_ts == last["resolved_ts"], result.to_dict()
    before = versions(tmp_path / "wh", spark)
    again = run_backfill(spark, config)
    assert again.note == "nothing new" and versions(tmp_path / "wh", spark) == before

    kv = tmp_path / "kv.toml"
    kv.write_text(
        f'[job]\nname = "kv"\n[source]\npath = "{sim / "scans"}"\n[target]\nwarehouse = "{tmp_path / "kvwh"}"\n'
    )
    run_backfill(spark, load_config(kv))
    ours, theirs = warehouse_tables(spark, tmp_path / "wh"), warehouse_tables(spark, tmp_path / "kvwh")
    assert ours.keys() == theirs.keys() and ours
    for table, rows in theirs.items():
        assert ours[table] == rows, table


# Every DDL kind whose effect its text says (partition DDLs that remove rows need the schema folder).
TEXT_DDL_KINDS = (
    "create_table", "drop_table", "truncate_table", "add_column", "drop_column", "modify_column",
    "rename_column", "rename_table", "add_partition", "reorganize_partition",
)  # fmt: skip


def test_ddl_text_evolves_tables_without_a_schema_folder(spark, kafka_broker, tmp_path):
    """No schema folder, `tables = ["*.*"]`: tables that predate the changefeed are inferred from their first
    row event, tables created in the topic take their CREATE TABLE's exact types, and every later DDL is
    applied from its text as a barrier. Runs between arrivals reach the simulator's state (the inferred
    tables up to their lossy columns, README); a rerun adds no version."""
    from backfill.codec.schema import ColumnKind
    from tidbsim import load_expected

    out = tmp_path / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=2, tables=3, rows=10, txns=90, scans=3, ddls_per_scan=4, ddl_kinds=TEXT_DDL_KINDS,
            ticdc_changelog=True,
        )
    )  # fmt: skip
    scans = load_index(out)
    topic = f"open-{next(_topics)}"
    feed = Changefeed(topic=topic, dispatcher="table", partitions=3, restarts=1)
    messages = list(open_protocol_messages(out, feed))
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "kafka"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\n'
        f'bootstrap_servers = "{kafka_broker.bootstrap}"\ntopic = "{topic}"\n'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\ntables = ["*.*"]\n'
    )
    config = load_config(conf)
    done, steps = 0, 0
    for cut in (len(messages) // 2, len(messages)):
        publish(messages[done:cut], kafka_broker.bootstrap, partitions=feed.partitions)
        done = cut
        result = run_backfill(spark, config)
        steps += sum(t.ddl_steps for t in result.tables)
    assert result.resolved_ts == scans[-1]["resolved_ts"], result.to_dict()
    assert steps > 0
    before = versions(tmp_path / "wh", spark)
    assert run_backfill(spark, config).note == "nothing new"
    assert versions(tmp_path / "wh", spark) == before
    at_once = tmp_path / "at-once.toml"  # the whole topic in one run: the same tables
    at_once.write_text(conf.read_text().replace('name = "kafka"', 'name = "at-once"').replace("/wh", "/wh1"))
    assert run_backfill(spark, load_config(at_once)).resolved_ts == scans[-1]["resolved_ts"]
    for table in before:
        ours, theirs = (
            spark.read.format("delta").load(str(w / table.replace(".", "/")))
            for w in (tmp_path / "wh", tmp_path / "wh1")
        )
        assert (
            ours.schema == theirs.schema
            and ours.exceptAll(theirs).count() == theirs.exceptAll(ours).count() == 0
        )

    lossy = {ColumnKind.DECIMAL, ColumnKind.ENUM, ColumnKind.SET, ColumnKind.BIT}
    initial = {(s.schema_name, s.name): s for s in _first_capture_schemas(out)}
    expected = load_expected(out, scans[-1]["scan_id"])
    assert sorted(versions(tmp_path / "wh", spark)) == sorted(f"{db}.{name}" for db, name in expected)
    exact = 0
    for (db, name), want in expected.items():
        got = spark.read.format("delta").load(str(tmp_path / "wh" / db / name)).toArrow()
        assert sorted(got.column_names) == sorted(want.column_names), (db, name)
        origin = initial.get((db, name.split("_v")[0].split("_n")[0]))  # renamed tables keep their root name
        inferred = {c.name for c in origin.columns if c.kind in lossy} if origin is not None else set()
        kept = [c for c in want.column_names if c not in inferred]
        assert sorted(map(repr, got.select(kept).to_pylist())) == sorted(
            map(repr, want.select(kept).to_pylist())
        )
        exact += bool(inferred) and sorted(map(repr, got.to_pylist())) == sorted(map(repr, want.to_pylist()))
    assert exact > 0, "a table created in the topic should have its DECIMAL/ENUM/SET/BIT columns exact"
