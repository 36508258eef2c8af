"""kv-scan: TiKV incremental-scan captures (docs/architecture.md "The kv-scan input").

`format` owns the layout (events Parquet schema, manifest, schema files, writers); `captures` lists
complete captures; `capture_tables` the tables a run tracks and their schema versions; `chain` and
`resolved` decide how far a run can go; `matcher`, `keyranges` and `range_collapse` turn region streams
into one change per row; `row_decode` turns TiDB row bytes into typed rows; `source` puts them behind the
`Source` interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from backfill.sources.registry import RegisteredSource, register

if TYPE_CHECKING:
    from backfill.sources.kvscan.source import KvScanSource
    from tidelake.config import SourceConfig, UpstreamConfig


def _open(
    config: SourceConfig, settings: None, tables: Sequence[str], upstream: UpstreamConfig | None
) -> KvScanSource:
    from backfill.sources.kvscan.source import KvScanSource

    return KvScanSource(config, tables)


register(RegisteredSource[None](name="kv-scan", factory=_open))
