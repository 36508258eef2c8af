"""The TiCDC storage-sink source (`source.kind = "ticdc-storage"`).

- :mod:`layout` - the sink's folder layout, as pure path parsing;
- :mod:`plan` - which files a run reads, table versions, segments and rename chains (pure);
- :mod:`decode` - one data file to typed row changes (pure, run on the executors);
- :mod:`source` - the `Source`: listing, schema files, the window, Spark reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from backfill.sources.registry import RegisteredSource, register
from backfill.sources.storage.settings import StorageSourceConfig

if TYPE_CHECKING:
    from backfill.sources.storage.source import StorageSource
    from tidelake.config import SourceConfig, UpstreamConfig


def _open(
    config: SourceConfig,
    settings: StorageSourceConfig,
    tables: Sequence[str],
    upstream: UpstreamConfig | None,
) -> StorageSource:
    from backfill.sources.storage.source import StorageSource

    return StorageSource(config, settings, tables, upstream)


register(
    RegisteredSource(
        name="ticdc-storage",
        factory=_open,
        table="storage",
        settings=StorageSourceConfig,
        starts_from_snapshot=True,
    )
)
