"""TiCDC's Kafka sink as a source (`source.kind = "ticdc-kafka"`): a changefeed's topic read in batches by
offsets with Spark's Kafka source (`broker`), completeness from per-partition resolved events and the
offsets each run starts from recorded in the Delta commits (`progress`), the plan and typed changes
(`source`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from backfill.sources.kafka.settings import KafkaSourceConfig
from backfill.sources.registry import RegisteredSource, register

if TYPE_CHECKING:
    from backfill.sources.kafka.source import KafkaSource
    from tidelake.config import SourceConfig, UpstreamConfig


def _open(
    config: SourceConfig,
    settings: KafkaSourceConfig,
    tables: Sequence[str],
    upstream: UpstreamConfig | None,
) -> KafkaSource:
    from backfill.sources.kafka.source import KafkaSource

    return KafkaSource(config, settings, tables, upstream)


register(
    RegisteredSource(
        name="ticdc-kafka",
        factory=_open,
        table="kafka",
        settings=KafkaSourceConfig,
        needs_path=False,
        starts_from_snapshot=True,
    )
)
