"""The inputs tidelake reads, one package each, behind one `Source` interface (`base`).

`kvscan/` reads TiKV incremental-scan captures; `storage/` TiCDC's storage sink; `kafka/` TiCDC's Kafka
topics; `ticdc/` holds the TiCDC output formats the last two share. `open_source` picks one by
`source.kind`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backfill.sources.base import Source
    from tidelake.config import SourceConfig, UpstreamConfig


def open_source(
    config: SourceConfig, tables: Sequence[str], upstream: UpstreamConfig | None = None
) -> Source:
    """The source for `config.kind`, reading `config.path`, tracking the tables matching `tables`;
    `upstream` gives TiCDC sources the schema of tables that predate the changefeed."""
    if config.kind == "kv-scan":
        from backfill.sources.kvscan.source import KvScanSource

        return KvScanSource(config, tables)
    if config.kind == "ticdc-storage":
        from backfill.sources.storage.source import StorageSource

        return StorageSource(config, tables, upstream)
    if config.kind == "ticdc-kafka":
        from backfill.sources.kafka.source import KafkaSource

        return KafkaSource(config, tables, upstream)
    raise AssertionError(f"source kind {config.kind!r} passed config validation but has no reader")
