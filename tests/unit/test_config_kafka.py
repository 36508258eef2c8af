"""`[source.kafka]`: parsed at the edge into a frozen dataclass; bad values are config errors (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.sources import load_backfill_config
from tidelake.errors import ConfigError

pytestmark = pytest.mark.unit


def load(tmp_path: Path, kafka: str, kind: str = 'kind = "ticdc-kafka"\n'):
    path = tmp_path / "job.toml"
    path.write_text(f"[source]\n{kind}{kafka}\n[target]\nwarehouse = '/wh'\n")
    return load_backfill_config(path)


def test_a_topic_with_options_loads(tmp_path):
    config = load(
        tmp_path,
        '[source.kafka]\nbootstrap_servers = "b1:9092,b2:9092"\ntopic = "tidb-cdc"\ntime_zone = "+08:00"\n'
        'compression = "lz4"\n[source.kafka.options]\n"security.protocol" = "SASL_SSL"\n',
    )
    kafka = config.source.settings
    assert config.source.kind == "ticdc-kafka" and kafka is not None
    assert (kafka.topic, kafka.topic_pattern, kafka.compression) == ("tidb-cdc", None, "lz4")
    assert kafka.options["security.protocol"] == "SASL_SSL"
    assert "SASL" not in repr(kafka)


@pytest.mark.parametrize(
    ("kafka", "message"),
    [
        ('bootstrap_servers = "b:9092"\n', "exactly one of topic and topic_pattern"),
        ('bootstrap_servers = "b:9092"\ntopic = "a"\ntopic_pattern = "a.*"\n', "exactly one"),
        ('bootstrap_servers = "b:9092"\ntopic_pattern = "a(("\n', "topic_pattern"),
        ('bootstrap_servers = "b:9092"\ntopic = "a"\ntime_zone = "Mars/Base"\n', "time_zone"),
        ('bootstrap_servers = "b:9092"\ntopic = "a"\nprotocol = "avro"\n', "protocol"),
        ('bootstrap_servers = "b:9092"\ntopic = "a"\ngroup = "x"\n', "group"),
        (
            'bootstrap_servers = "b:9092"\ntopic = "a"\n[source.kafka.options]\n"kafka.x" = "1"\n',
            "without the",
        ),
    ],
)
def test_bad_kafka_settings_are_config_errors(tmp_path, kafka, message):
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, f"[source.kafka]\n{kafka}")


def test_the_kind_needs_its_table_and_kv_scan_needs_a_path(tmp_path):
    with pytest.raises(ConfigError, match=r"needs a \[source.kafka\] table"):
        load(tmp_path, "")
    with pytest.raises(ConfigError, match="needs a path"):
        load(tmp_path, "", kind="")
