"""Small tables' collapsed changes fetched to the driver in one Spark job and decoded there.

A Spark job of its own costs a table about 0.3 s on 2 cores (planning, a Python task round trip, a second
job for the key bounds), while the driver decodes a few thousand rows in hundredths of a second. A window
of 200 tables of 100 changes spent 57 s decoding table by table. So the changes of every table with at
most `DRIVER_DECODE_ROWS` changes come to the driver together (smallest tables first, `DRIVER_DECODE_TOTAL`
rows in all) and are decoded there by the same `decode_changes_batch` the executors run; bigger tables
keep their decode job on the executors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import CodecError, TableSchema
from backfill.sources.kvscan.row_decode import (
    CHANGE_COLUMNS,
    OLD_VALUE_COLUMNS,
    decode_changes_batch,
    decode_error,
    input_columns,
    nullable_output_schema,
)
from tidelake.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DRIVER_DECODE_ROWS = 5_000  # a table with at most this many changes in the window is decoded on the driver
DRIVER_DECODE_TOTAL = 200_000  # changes fetched to the driver in all, at most


def small_tables(counts: Mapping[tuple[int, int, str], int]) -> list[int]:
    """The tables decoded on the driver, from the window's changes per (table, segment, op): each with at
    most `DRIVER_DECODE_ROWS` changes, the smallest first, up to `DRIVER_DECODE_TOTAL` changes in all."""
    per_table: dict[int, int] = {}
    for (table, _, _), count in counts.items():
        per_table[table] = per_table.get(table, 0) + count
    chosen, total = [], 0
    for table, count in sorted(per_table.items(), key=lambda item: (item[1], item[0])):
        if table < 0 or count > DRIVER_DECODE_ROWS or total + count > DRIVER_DECODE_TOTAL:
            continue
        chosen.append(table)
        total += count
    return sorted(chosen)


def fetch_segments(collapsed: DataFrame, tables: list[int]) -> dict[tuple[int, int], pa.Table]:
    """The collapsed changes of `tables`, in one Spark job, by (table, segment)."""
    from pyspark.sql import functions as F

    if not tables:
        return {}
    columns = [*CHANGE_COLUMNS, *OLD_VALUE_COLUMNS]
    raw = collapsed.filter(F.col("table_idx").isin(tables)).select("table_idx", "segment", *columns)
    fetched = raw.toArrow()
    if fetched.num_rows == 0:
        return {}
    fetched = fetched.take(
        pc.sort_indices(fetched, sort_keys=[("table_idx", "ascending"), ("segment", "ascending")])
    )
    ids = fetched.column("table_idx").to_numpy()
    segments = fetched.column("segment").to_numpy()
    starts = np.flatnonzero(np.r_[True, (ids[1:] != ids[:-1]) | (segments[1:] != segments[:-1])])
    ends = np.r_[starts[1:], len(ids)]
    return {
        (int(ids[start]), int(segments[start])): fetched.slice(start, end - start).select(columns)
        for start, end in zip(starts, ends, strict=True)
    }


def decode_on_driver(
    raw: pa.Table, schema: TableSchema, *, puts_only: bool, verify_checksums: bool = True
) -> tuple[pa.Table, int]:
    """One segment's fetched changes typed as `decode.decode_changes` types them on the executors (its
    PUTs only where `puts_only`); also the zero dates written as NULL. Bad rows raise the same InputError."""
    if puts_only:
        raw = raw.filter(pc.equal(raw.column("op"), "PUT"))
    raw = raw.select(input_columns(schema))
    target = nullable_output_schema(schema)
    if raw.num_rows == 0:
        return target.empty_table(), 0
    try:
        decoded, zeros = decode_changes_batch(
            schema, raw.combine_chunks().to_batches()[0], verify_checksums=verify_checksums
        )
    except CodecError as exc:
        raise InputError(decode_error(schema, exc)) from None
    return pa.Table.from_batches([decoded], schema=target), zeros
