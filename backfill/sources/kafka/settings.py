"""`[source.kafka]`: where the changefeed's topic is and how it was written, parsed at the edge (the config
loader, through the `ticdc-kafka` registration in this package's `__init__`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

_TIME_ZONE_OFFSET = re.compile(r"^[+-]\d{2}:\d{2}$")


@dataclass(frozen=True)
class KafkaSourceConfig:
    """A TiCDC changefeed's Kafka topic (`source.kind = "ticdc-kafka"`), read in batches by offsets."""

    bootstrap_servers: str
    topic: str | None = None
    topic_pattern: str | None = None  # a Java regex; the matching topics are read together
    protocol: Literal["open-protocol", "canal-json"] = (
        "open-protocol"  # canal-json: with enable-tidb-extension
    )
    # The changefeed's `large-message-handle-compression`: row and DDL values are compressed with it.
    compression: Literal["none", "snappy", "lz4"] = "none"
    time_zone: str = "UTC"  # the changefeed's time zone: TIMESTAMP values are printed in it
    # Optional: a folder with tables.jsonl (+ ddl_jobs.jsonl), as in a kv-scan capture's schema/. Without it
    # the schema comes from the DDL text in the topic, [upstream], or the messages (docs/kafka.md).
    schema: str | None = None
    # Extra Kafka consumer settings (security.protocol, sasl.*, ...), given to Spark as `kafka.<name>`.
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    timeout_seconds: int = 30  # for metadata and offset requests to the brokers

    def __post_init__(self) -> None:
        if not self.bootstrap_servers.strip():
            raise ValueError("bootstrap_servers must name at least one host:port")
        if (self.topic is None) == (self.topic_pattern is None):
            raise ValueError("give exactly one of topic and topic_pattern")
        if self.topic_pattern is not None:
            try:
                re.compile(self.topic_pattern)
            except re.error as exc:
                raise ValueError(f"topic_pattern {self.topic_pattern!r}: {exc}") from None
        if not _TIME_ZONE_OFFSET.match(self.time_zone):
            import zoneinfo

            try:
                zoneinfo.ZoneInfo(self.time_zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"time_zone {self.time_zone!r} is not a zone name or +HH:MM") from None
        if self.timeout_seconds < 1:
            raise ValueError(f"timeout_seconds must be at least 1, got {self.timeout_seconds}")
        for name in self.options:
            if name.startswith("kafka."):
                raise ValueError(f"options: give {name!r} without the 'kafka.' prefix")

    def __repr__(self) -> str:  # options may hold credentials (sasl.jaas.config)
        where = self.topic if self.topic is not None else f"/{self.topic_pattern}/"
        return f"KafkaSourceConfig(bootstrap_servers={self.bootstrap_servers!r}, topic={where!r})"
