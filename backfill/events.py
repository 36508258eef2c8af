"""Reading a capture's events into Spark, in the column layout of DESIGN.md's input contract."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from backfill.scans import ScanManifest
from tidelake.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EVENTS_DDL = (
    "region_id BIGINT, seq BIGINT, type STRING, start_ts BIGINT, commit_ts BIGINT, op_type STRING, "
    "key BINARY, value BINARY, old_value BINARY, generation BIGINT, resolved_ts BIGINT"
)
EVENT_COLUMNS = tuple(part.split()[0] for part in EVENTS_DDL.split(", "))


def read_events(spark: SparkSession, scans: Sequence[ScanManifest]) -> DataFrame:
    """All events of `scans`, each row tagged with `scan_id` and the capture's `scan_checkpoint_ts`."""
    from pyspark.sql import functions as F

    frames = []
    for scan in scans:
        frame = (
            spark.read.schema(EVENTS_DDL)
            .option("mergeSchema", "false")
            .parquet(scan.file("events"))
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


_FILE_IN_MESSAGE = re.compile(r"(?:reading file|file|path)\s+['\"`]?((?:file:|s3a?:|hdfs:|/)[^\s'\"`]+)")


@contextmanager
def input_errors(what: str) -> Iterator[None]:
    """Turn Spark's failures on unreadable input files into an InputError that names the file."""
    try:
        yield
    except Exception as exc:  # Py4J / Spark exceptions carry the JVM message as text
        if isinstance(exc, InputError):
            raise
        message = str(exc)
        markers = ("FAILED_READ_FILE", "CANNOT_READ_FILE", "not a Parquet file", "Parquet column cannot be converted",
                   "PATH_NOT_FOUND", "ParquetDecodingException", "Could not read footer")  # fmt: skip
        if not any(marker in message for marker in markers):
            raise
        found = _FILE_IN_MESSAGE.search(message)
        place = found.group(1).rstrip(".") if found else "an events file"
        reason = message.strip().splitlines()[0][:300]
        raise InputError(f"{place}: cannot read {what}: {reason}") from None
