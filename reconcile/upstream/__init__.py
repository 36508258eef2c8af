"""Where the upstream rows come from: a MySQL-protocol server (`sql`) or an export in files (`files`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from reconcile.engine import Upstream
    from tidelake.config import UpstreamConfig


def open_upstream(spark: SparkSession, config: UpstreamConfig, parallelism: int) -> Upstream:
    """The upstream the config names: `files` (dumpling, parquet, expected) or a TiDB/MySQL/MariaDB server."""
    if config.kind == "files":
        from reconcile.upstream.files import FilesUpstream

        return FilesUpstream(spark, config)
    from reconcile.upstream.sql import SqlUpstream

    return SqlUpstream(config, parallelism)
