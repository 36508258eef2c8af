"""Tables that predate a changefeed: without a schema folder, their schema comes from the upstream's SHOW
CREATE TABLE (`[upstream]`), here the real MariaDB the simulator replays its history into: DECIMAL, ENUM and
SET names, BIT(n) exact, the same Delta tables a schema folder gives. An upstream that cannot be reached
stops the run (exit 2) before any table is written."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

from backfill.cli import main
from backfill.run import run_backfill
from tests.expected import warehouse_differences
from tidbsim import SimulationConfig, load_index, simulate
from tidbsim.kafka import Changefeed, open_protocol_messages, publish
from tidelake.config import load_config

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(
    tmp_path: Path, name: str, bootstrap: str, topic: str, source_lines: str = "", tail: str = ""
) -> Path:
    conf = tmp_path / f"{name}.toml"
    conf.write_text(
        f'[job]\nname = "{name}"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\nbootstrap_servers = "{bootstrap}"\n'
        f'topic = "{topic}"\n{source_lines}[target]\nwarehouse = "{tmp_path / name}"\ntables = ["*.*"]\n{tail}'
    )
    return conf


def test_the_schema_of_tables_that_predate_the_changefeed_comes_from_the_upstream(
    spark, kafka_broker, mariadb_url, tmp_path, capsys
):
    out = tmp_path / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=5, tables=4, rows=10, txns=60, scans=2, ddl_kinds=(), ticdc_changelog=True,
            mysql_url=mariadb_url,
        )
    )  # fmt: skip
    last = load_index(out)[-1]
    topic = "upstream-schema"
    publish(
        open_protocol_messages(out, Changefeed(topic=topic, partitions=2)),
        kafka_broker.bootstrap,
        partitions=2,
    )
    url = urlparse(mariadb_url)
    server = f'host = "{url.hostname}"\nport = {url.port}\nuser = "{url.username}"\n'

    unreachable = _config(
        tmp_path, "text", kafka_broker.bootstrap, topic,
        tail=f'[upstream]\nkind = "mariadb"\nhost = "127.0.0.1"\nport = {_closed_port()}\nuser = "root"\n',
    )  # fmt: skip
    assert main(["run", "--config", str(unreachable)]) == 2
    assert "mariadb upstream 127.0.0.1" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "text").exists()

    conf = _config(
        tmp_path, "text", kafka_broker.bootstrap, topic, tail=f'[upstream]\nkind = "mariadb"\n{server}'
    )
    result = run_backfill(spark, load_config(conf))
    assert result.resolved_ts == last["resolved_ts"], result.to_dict()
    assert warehouse_differences(spark, tmp_path / "text", out, last["scan_id"]) == []
    assert run_backfill(spark, load_config(conf)).note == "nothing new"

    folder = out / "scans" / load_index(out)[0]["scan_id"] / "schema"
    by_folder = _config(
        tmp_path, "folder", kafka_broker.bootstrap, topic, source_lines=f'schema = "{folder}"\n'
    )
    run_backfill(spark, load_config(by_folder))
    for db in (tmp_path / "folder").iterdir():
        for table in db.iterdir():
            theirs = spark.read.format("delta").load(str(table)).schema
            ours = spark.read.format("delta").load(str(tmp_path / "text" / db.name / table.name)).schema
            assert ours == theirs, f"{db.name}.{table.name}"
