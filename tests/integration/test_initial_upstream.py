"""`[source.initial] upstream_tso`: a TiCDC storage-sink job whose tables start from the upstream itself,
read over JDBC at the TSO — here the real MariaDB the simulator replays its history into up to its first
scan's resolved ts. The tables then equal the simulator's expected state after the sink's later changes,
with the Delta schemas a sink-only run gives; a rerun adds no version; an upstream that refuses the
connection or the login exits 2 naming host:port with nothing committed."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

from backfill.cli import main
from backfill.codec import TableSchema
from backfill.initial.jdbc import UpstreamTable, split_predicates, table_rows
from backfill.run import run_backfill
from backfill.sources.upstream_schema import upstream_table_infos
from tests.expected import warehouse_differences
from tidbsim import SimulationConfig, load_index, simulate
from tidbsim.engine import DATABASES
from tidbsim.kafka import Changefeed, open_protocol_messages, publish
from tidbsim.storage_codec import CsvOptions
from tidbsim.storage_sink import StorageSink
from tidelake import delta, fs
from tidelake.config import TidelakeConfig, load_config
from tidelake.conventions import COMMIT_TS, ROWID
from tidelake.sqlident import quote_ident
from tidelake.upstream import connect

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SINK = StorageSink(protocol="csv", csv=CsvOptions(output_old_value=True), seed=7)
TABLES = ", ".join(f'"{db}.*"' for db in DATABASES)  # the shared server holds other tests' databases too


def _job(
    tmp_path: Path, name: str, sink: Path, upstream: str = "", initial: str = "", tables: str = TABLES
) -> Path:
    conf = tmp_path / f"{name}.toml"
    conf.write_text(
        f'[job]\nname = "{name}"\n[source]\nkind = "ticdc-storage"\npath = "{sink}"\n'
        f'[source.storage]\nprotocol = "csv"\noutput_old_value = true\n{initial}'
        f'[target]\nwarehouse = "{tmp_path / name}"\ntables = [{tables}]\n{upstream}'
    )
    return conf


def _upstream(url: str, *, port: int | None = None, password: str = "") -> str:
    parsed = urlparse(url)
    secret = f'password = "{password}"\n' if password else ""
    user = "tidelake" if password else parsed.username
    return (
        f'[upstream]\nkind = "mariadb"\nhost = "{parsed.hostname}"\nport = {port or parsed.port}\n'
        f'user = "{user}"\n{secret}retries = 0\n'
    )


def _tables(spark, warehouse: Path) -> dict[str, str]:
    return {
        f"{db.name}.{t.name}": t.path
        for db in fs.list_dir(spark, str(warehouse))
        for t in fs.list_dir(spark, db.path)
    }


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory, mariadb_url: str) -> Path:
    """The simulation, its storage sink and changefeed, and MariaDB holding its history up to the first
    scan (this module's tests read it one after another; none writes to it)."""
    out = tmp_path_factory.mktemp("initial-upstream") / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=7, tables=3, rows=20, txns=60, scans=2, ddl_kinds=(), mysql_url=mariadb_url,
            mysql_until_scan=1, storage_sinks=(SINK,),
        )
    )  # fmt: skip
    return out


def test_tables_start_from_the_upstream_at_the_tso_and_the_sink_continues(
    spark, sim, mariadb_url, tmp_path, capsys
) -> None:
    out = sim
    index = load_index(out)
    tso, last = index[0]["resolved_ts"], index[-1]
    sink = out / "storage" / "csv"
    initial = f"[source.initial]\nupstream_tso = {tso}\nupstream_fetch_size = 7\n"
    conf = _job(tmp_path, "jdbc", sink, _upstream(mariadb_url), initial)

    result = run_backfill(spark, load_config(conf))
    assert result.resolved_ts == last["resolved_ts"], result.to_dict()
    # rows untouched since the snapshot carry its TSO as their commit ts, and TiCDC leaves _tidb_rowid NULL
    assert (
        warehouse_differences(spark, tmp_path / "jdbc", out, last["scan_id"], without=(ROWID, COMMIT_TS))
        == []
    )
    tables = _tables(spark, tmp_path / "jdbc")
    for name, path in tables.items():
        first = json.loads(delta.commit_user_metadata(spark, path, 1) or "{}")
        assert first["step"] == "snapshot" and first["snapshot"]["tso"] == tso, name
        low = spark.read.format("delta").load(path).agg({COMMIT_TS: "min"}).first()[0]
        assert low is None or low >= tso, f"{name}: a change at or below the TSO was applied"

    # the same Delta schemas as a run from the whole sink (its CREATE TABLEs, no snapshot)
    run_backfill(spark, load_config(_job(tmp_path, "sink", sink)))
    by_sink = _tables(spark, tmp_path / "sink")
    assert by_sink.keys() == tables.keys()
    for name, path in tables.items():
        ours = spark.read.format("delta").load(path).schema
        assert ours == spark.read.format("delta").load(by_sink[name]).schema, name

    # the reads TiDB splits by key ranges (here on the server as it stood at the TSO): the same rows
    _split_reads_give_the_snapshot_rows(spark, load_config(conf), tables, tso)

    versions = {name: delta.table_version(spark, path) for name, path in tables.items()}
    assert run_backfill(spark, load_config(conf)).note == "nothing new"
    assert {name: delta.table_version(spark, path) for name, path in tables.items()} == versions

    capsys.readouterr()
    assert main(["status", "--config", str(conf), "--json"]) == 0
    started = [t["started_from"] for t in json.loads(capsys.readouterr().out)["tables"]]
    server = urlparse(mariadb_url)
    assert started and all(
        s == {"kind": "upstream", "path": f"mariadb://{server.hostname}:{server.port}", "tso": tso}
        for s in started
    )


@pytest.mark.kafka
def test_a_kafka_topic_continues_from_the_upstream_at_the_tso(
    spark, sim, mariadb_url, kafka_broker, tmp_path
) -> None:
    """The same snapshot over JDBC, then a Kafka topic (open protocol) from its TSO, no schema folder: the
    tables' schemas are the snapshot's (recorded in its commit), their rows the expected state (ops.events,
    without a primary key, merged as whole rows: the snapshot has no row ids)."""
    out = sim
    index = load_index(out)
    tso, last = index[0]["resolved_ts"], index[-1]
    feed = Changefeed(topic="jdbc-then-kafka", partitions=2, start_ts=tso)
    publish(open_protocol_messages(out, feed), kafka_broker.bootstrap, partitions=feed.partitions)
    conf = tmp_path / "kafka.toml"
    conf.write_text(
        f'[job]\nname = "kafka"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\n'
        f'bootstrap_servers = "{kafka_broker.bootstrap}"\ntopic = "{feed.topic}"\n'
        f"[source.initial]\nupstream_tso = {tso}\n"
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\ntables = [{TABLES}]\n{_upstream(mariadb_url)}'
    )
    # two runs: the second merges ops.events as whole rows because the first's record says so
    middle = (tso + last["resolved_ts"]) // 2
    assert run_backfill(spark, load_config(conf), until_ts=middle).resolved_ts == middle
    result = run_backfill(spark, load_config(conf))
    assert result.resolved_ts == last["resolved_ts"], result.to_dict()
    differences = warehouse_differences(
        spark, tmp_path / "wh", out, last["scan_id"], without=(ROWID, COMMIT_TS)
    )
    assert differences == []
    events = delta.last_commit(spark, str(tmp_path / "wh" / "ops" / "events"), "tidelake:kafka")
    assert events is not None and events.user_metadata["kafka"]["without_rowid"] == ["ops.events"]
    assert {name: _started(spark, path) for name, path in _tables(spark, tmp_path / "wh").items()} == {
        name: tso for name in ("shop.orders", "shop.items", "ops.events")
    }


def _started(spark, path: str) -> int:
    first = json.loads(delta.commit_user_metadata(spark, path, 1) or "{}")
    assert first["step"] == "snapshot" and first["table_info"]["cols"], path
    return int(first["snapshot"]["tso"])


def _split_reads_give_the_snapshot_rows(
    spark, config: TidelakeConfig, tables: dict[str, str], tso: int
) -> None:
    """Each table read in 3 ranges of its integer key (`_tidb_rowid`, MariaDB's INVISIBLE stand-in for
    TiDB's handle, where it has no primary key): the rows of its snapshot commit, once each."""
    assert config.upstream is not None and config.source.initial is not None
    infos = upstream_table_infos(config.upstream, {tuple(name.split(".")): tso for name in tables})
    conn = connect(config.upstream)
    split = []
    try:
        for (db, name), info in infos.items():
            schema = TableSchema.from_table_info(info, schema_name=db)
            key = ROWID if schema.pk_kind == "rowid" else schema.pk_columns[0]
            with conn.cursor() as cur:
                cur.execute(
                    f"SELECT MIN({quote_ident(key)}), MAX({quote_ident(key)}) FROM {quote_ident(db)}.{quote_ident(name)}"
                )
                low, high = cur.fetchone()
            if not isinstance(low, int):
                continue  # a key that is not an integer: TiDB reads it whole too
            table = UpstreamTable(schema, "", False, key, split_predicates(key, low, high, 3))
            rows = table_rows(spark, config.upstream, config.source.initial, table, tso)
            assert rows.rdd.getNumPartitions() == 3
            snapshot = spark.read.format("delta").option("versionAsOf", 1).load(tables[f"{db}.{name}"])
            assert sorted(map(repr, rows.collect())) == sorted(map(repr, snapshot.collect())), f"{db}.{name}"
            split.append(f"{db}.{name}")
    finally:
        conn.close()
    assert {"shop.orders", "ops.events"} <= set(split), split  # an integer key, and _tidb_rowid


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _user_without_select(url: str) -> tuple[str, str]:
    """A user that may see `jdbcdeny.t` (SHOW CREATE TABLE) but not read its rows: the JDBC read fails."""
    from tidbsim.mysql_apply import parse_mysql_url

    conn = parse_mysql_url(url).connect()
    conn.autocommit(True)
    with conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS jdbcdeny")
        cur.execute("CREATE TABLE IF NOT EXISTS jdbcdeny.t (id INT PRIMARY KEY, v VARCHAR(8))")
        cur.execute("REPLACE INTO jdbcdeny.t VALUES (1, 'a')")
        cur.execute("CREATE USER IF NOT EXISTS 'noselect'@'%' IDENTIFIED BY 'noselect-pw'")
        cur.execute("GRANT INSERT ON jdbcdeny.t TO 'noselect'@'%'")
    return "noselect", "noselect-pw"


@pytest.mark.parametrize("fault", ["refused", "password", "no-select"])
def test_an_upstream_that_cannot_be_read_exits_2_naming_it_with_nothing_committed(
    spark, mariadb_url, tmp_path, capsys, fault
) -> None:
    server = urlparse(mariadb_url)
    port = _closed_port() if fault == "refused" else server.port
    user, password = _user_without_select(mariadb_url) if fault == "no-select" else ("tidelake", "s3cret-x")
    upstream = (
        f'[upstream]\nkind = "mariadb"\nhost = "{server.hostname}"\nport = {port}\nuser = "{user}"\n'
        f'password = "{password}"\nretries = 0\n'
    )
    sink = tmp_path / "sink"
    sink.mkdir()
    initial = "[source.initial]\nupstream_tso = 100\n"
    conf = _job(tmp_path, "jdbc", sink, upstream, initial, tables='"jdbcdeny.*"')
    assert main(["run", "--config", str(conf)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"mariadb upstream 127.0.0.1:{port}" in err, err
    expected = {
        "refused": "cannot connect",
        "password": "access denied",
        "no-select": "reading jdbcdeny.t at TSO 100 failed",
    }
    assert expected[fault] in err, err
    assert password not in err
    assert not list(tmp_path.glob("jdbc/*/*/_delta_log"))
