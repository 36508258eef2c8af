"""Issue 53's proof on the simulator: tidbsim exports its upstream with Dumpling at the first scan's resolved
ts (CSV with and without a header, SQL; plain and compressed), then a storage sink or a Kafka topic from that
TSO; `backfill run` with `[source.initial]` builds the tables of the last scan's expected state, and
reconcile against MariaDB (loaded with the same history) says equal. A changefeed started after the TSO
is exit 2 naming the gap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backfill.cli import main as backfill
from backfill.run import run_backfill
from reconcile.cli import main as reconcile
from tests.expected import warehouse_differences
from tidbsim import DumplingExport, SimulationConfig, StorageSink, load_index, simulate
from tidbsim.dumpling import DUMPLING_DIR
from tidbsim.kafka import Changefeed, open_protocol_messages, publish
from tidbsim.mysql_apply import parse_mysql_url
from tidbsim.storage_sink import write_storage_sink
from tidelake.config import load_config

pytestmark = pytest.mark.spark

# a snapshot row's `_tidb_commit_ts` is the TSO, not its last change's (what the export cannot tell)
WITHOUT = ("_tidb_commit_ts",)


def simulated(out: Path, *exports: DumplingExport, mysql_url: str | None = None) -> Path:
    simulate(
        SimulationConfig(
            out=out, seed=3, tables=2, rows=30, txns=90, scans=3, ddl_kinds=(), ticdc_changelog=True,
            dumpling_exports=exports, mysql_url=mysql_url,
        )
    )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulated(
        tmp_path_factory.mktemp("initial-sim") / "sim",
        DumplingExport("csv"),
        DumplingExport("csv-no-header-gz", header=False, compression="gz"),
        DumplingExport("late", scan=1),
    )


def storage_job(tmp_path: Path, sim: Path, export: str, extra: str = "") -> Path:
    sink = tmp_path / "sink"
    if not sink.exists():
        tso = load_index(sim)[0]["resolved_ts"]
        write_storage_sink(sim, StorageSink(start_ts=tso), sink)
    conf = tmp_path / "storage.toml"
    conf.write_text(
        f'[job]\nname = "snap"\n[source]\nkind = "ticdc-storage"\npath = "{sink}"\n[source.storage]\n'
        f'protocol = "csv"\n[source.initial]\ndumpling = "{sim / DUMPLING_DIR / export}"\n{extra}'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\ntables = ["shop.*"]\n'
    )
    return conf


def test_a_storage_sink_from_the_exports_tso_builds_the_expected_tables(spark, sim, tmp_path) -> None:
    result = run_backfill(spark, load_config(storage_job(tmp_path, sim, "csv")))
    last = load_index(sim)[-1]
    assert result.resolved_ts == last["resolved_ts"], result.to_dict()
    assert warehouse_differences(spark, tmp_path / "wh", sim, last["scan_id"], without=WITHOUT) == []


def kafka_job(
    tmp_path: Path,
    bootstrap: str,
    sim: Path,
    topic: str,
    start_ts: int,
    name: str,
    *,
    schema_folder: bool = True,
) -> Path:
    """A topic from `start_ts` and a job reading it from the headerless gz export (and, with `schema_folder`,
    the first scan's schema folder; without one, the tables' schema is what the topic and the export say)."""
    feed = Changefeed(topic=topic, partitions=2, start_ts=start_ts, restarts=1)
    publish(open_protocol_messages(sim, feed), bootstrap, partitions=feed.partitions)
    schema = (
        f'schema = "{sim / "scans" / load_index(sim)[0]["scan_id"] / "schema"}"\n' if schema_folder else ""
    )
    conf = tmp_path / f"{name}.toml"
    conf.write_text(
        f'[job]\nname = "{name}"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\n'
        f'bootstrap_servers = "{bootstrap}"\ntopic = "{topic}"\n{schema}[source.initial]\n'
        f'dumpling = "{sim / DUMPLING_DIR / "csv-no-header-gz"}"\nheader = false\n'
        f'[target]\nwarehouse = "{tmp_path / name}"\ntables = ["shop.*"]\n'
    )
    return conf


@pytest.mark.kafka
def test_a_kafka_topic_from_the_exports_tso_builds_the_expected_tables_and_a_later_one_stops(
    spark, kafka_broker, sim, tmp_path, capsys
) -> None:
    """The changefeed's start-ts is in no message: its first resolved event per partition (the start-ts)
    shows it; a topic whose changefeed started at the second scan's resolved ts (above the export's TSO)
    is exit 2 naming the partition and both ts, and a topic started at the TSO goes on from the tables
    the export gave."""
    scans = load_index(sim)
    late = kafka_job(tmp_path, kafka_broker.bootstrap, sim, "initial-late", scans[1]["resolved_ts"], "late")
    assert backfill(["run", "--config", str(late)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Kafka topic 'initial-late' partition 0: its first resolved event (offset 0) is at ts " in err, err
    assert f"above the snapshot's TSO {scans[0]['resolved_ts']}" in err, err

    at = kafka_job(tmp_path, kafka_broker.bootstrap, sim, "initial-at-tso", scans[0]["resolved_ts"], "at")
    result = run_backfill(spark, load_config(at))
    assert result.resolved_ts == scans[-1]["resolved_ts"], result.to_dict()
    assert warehouse_differences(spark, tmp_path / "at", sim, scans[-1]["scan_id"], without=WITHOUT) == []


@pytest.mark.kafka
def test_a_kafka_topic_without_a_schema_folder_takes_each_tables_schema_from_the_export(
    spark, kafka_broker, sim, tmp_path
) -> None:
    """A topic from the TSO carries no CREATE TABLE of the exported tables, and a row event says too little
    of them (DECIMAL(p,s), ENUM names, BIT width, column order): the snapshot commit records the export's
    TableInfo, and the Kafka runs type the changes by it. Two runs (the second from the first's record)."""
    scans = load_index(sim)
    conf = kafka_job(
        tmp_path, kafka_broker.bootstrap, sim, "initial-no-schema", scans[0]["resolved_ts"], "bare",
        schema_folder=False,
    )  # fmt: skip
    until = run_backfill(spark, load_config(conf), until_ts=scans[1]["resolved_ts"])
    assert until.resolved_ts == scans[1]["resolved_ts"], until.to_dict()
    assert warehouse_differences(spark, tmp_path / "bare", sim, scans[1]["scan_id"], without=WITHOUT) == []
    result = run_backfill(spark, load_config(conf))
    assert result.resolved_ts == scans[-1]["resolved_ts"], result.to_dict()
    assert warehouse_differences(spark, tmp_path / "bare", sim, scans[-1]["scan_id"], without=WITHOUT) == []
    orders = spark.read.format("delta").load(str(tmp_path / "bare" / "shop" / "orders")).schema
    assert orders.fieldNames()[0] == "id"  # the message orders columns by name
    types = {f.name: f.dataType.simpleString() for f in orders.fields}
    assert (types["amount"], types["c_big_u"]) == ("decimal(12,3)", "decimal(20,0)"), types
    items = spark.read.format("delta").load(str(tmp_path / "bare" / "shop" / "items")).schema
    assert items.fieldNames()[:2] == ["sku", "seq"]  # the key: not the message's first columns
    assert {f.name: f.dataType.simpleString() for f in items.fields}["c_varbin"] == "binary"


def test_a_storage_sink_started_after_the_export_stops(spark, sim, tmp_path, capsys) -> None:
    """An export older than the changefeed's start is fine (the overlap skipped: the CSV test above starts
    the sink at the TSO exactly); one whose TSO the sink's start is above is exit 2."""
    tso = load_index(sim)[1]["resolved_ts"]
    write_storage_sink(sim, StorageSink(start_ts=tso), tmp_path / "sink")
    assert backfill(["run", "--config", str(storage_job(tmp_path, sim, "csv"))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"the storage sink begins at table version {tso}" in err, err


@pytest.mark.integration
def test_reconcile_against_mariadb_with_the_same_history_says_equal(
    spark, tmp_path, mariadb_url, capsys
) -> None:
    """A SQL export (zstd) and a storage sink from its TSO; MariaDB replays the whole history."""
    sim = simulated(
        tmp_path / "sim", DumplingExport("sql", file_type="sql", compression="zst"), mysql_url=mariadb_url
    )
    conf = storage_job(tmp_path, sim, "sql")
    assert backfill(["run", "--config", str(conf)]) == 0
    last = load_index(sim)[-1]
    assert warehouse_differences(spark, tmp_path / "wh", sim, last["scan_id"], without=WITHOUT) == []
    target = parse_mysql_url(mariadb_url)
    with conf.open("a") as f:
        f.write(
            '[reconcile]\ntables = ["shop.*"]\n[reconcile.upstream]\nkind = "mariadb"\nhost = "127.0.0.1"\n'
            f'port = {target.port}\nuser = "{target.user}"\npassword = {json.dumps(target.password or "")}\n'
        )
    capsys.readouterr()
    assert reconcile(["run", "--config", str(conf), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["status"] == "equal" and len(found["tables"]) == 2, found
