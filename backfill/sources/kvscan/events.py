"""Reading the captures' events into Spark, in the layout of `format.EVENT_SCHEMA`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from backfill.sources.kvscan.format import EVENTS_DDL, EVENTS_DIR, ScanManifest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_events(spark: SparkSession, scans: Sequence[ScanManifest]) -> DataFrame:
    """All events of `scans`, each row tagged with `scan_id` and the capture's `scan_checkpoint_ts`."""
    from pyspark.sql import functions as F

    frames = []
    for scan in scans:
        frame = (
            spark.read.schema(EVENTS_DDL)
            .option("mergeSchema", "false")
            .parquet(scan.file(EVENTS_DIR))
            .withColumn("scan_id", F.lit(scan.scan_id))
            .withColumn("scan_checkpoint_ts", F.lit(scan.checkpoint_ts).cast("bigint"))
        )
        frames.append(frame)
    if not frames:
        return spark.createDataFrame([], EVENTS_DDL + ", scan_id STRING, scan_checkpoint_ts BIGINT")
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result
