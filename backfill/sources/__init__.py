"""The inputs tidelake reads, one package each, behind one `Source` interface (`base`).

`kvscan/` reads TiKV incremental-scan captures; `storage/` TiCDC's storage sink; `kafka/` TiCDC's Kafka
topics; `ticdc/` holds the TiCDC output formats the last two share. Each source package registers its
kind (`registry`); `open_source` picks one by `source.kind`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backfill.sources.registry import source_kinds
from tidelake.config import TidelakeConfig, load_config, parse_source_settings

if TYPE_CHECKING:
    from backfill.sources.base import Source
    from tidelake.config import SourceConfig, UpstreamConfig


def load_backfill_config(path: str | Path | None = None) -> TidelakeConfig:
    """The config with the source's kind and settings checked and parsed (`tidelake.config.load_config`
    given the registered kinds): a bad `[source.<table>]` stops a command before its Spark session."""
    return load_config(path, source_kinds=source_kinds())


def open_source(
    config: SourceConfig, tables: Sequence[str], upstream: UpstreamConfig | None = None
) -> Source[Any]:
    """The source for `config.kind`, reading `config.path`, tracking the tables matching `tables`;
    `upstream` gives TiCDC sources the schema of tables that predate the changefeed."""
    kinds = source_kinds()
    if config.settings is None:  # loaded without the kinds (a config built in code, a test)
        config = parse_source_settings(config, kinds)
    return kinds[config.kind].factory(config, config.settings, tables, upstream)
