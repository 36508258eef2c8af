"""Decoding a big table's PUTs where its rows already are: in the match+collapse task.

Otherwise a table's collapsed changes are decoded in a second pass (`decode`): the cached row bytes go to
Python again and the typed rows are cached a second time before the apply stage writes them. For the table
with most of the window's events, its PUTs are decoded right after collapsing instead, into columns of their
own beside the raw ones (`_d<table>_<segment>_<field>`, NULL on every other row), and the apply stage reads
them from the one cache. A bad row still fails the run before any commit. DELETEs stay raw and are decoded
later where needed: a first load never decodes them, and it must not fail on one it does not need.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import CodecError, TableSchema
from backfill.codec.keys import table_prefix
from backfill.sources.decode_tasks import DecodeTally
from backfill.sources.kvscan.range_collapse import COLLAPSED_ARROW, COLLAPSED_DDL
from backfill.sources.kvscan.row_decode import (
    decode_changes_batch,
    decode_error,
    decoded_spark_ddl,
    input_columns,
    nullable_output_schema,
)
from tidelake.sparkerrors import in_task

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from backfill.sources.kvscan.format import ScanManifest
    from backfill.tables import TrackedTable

# The biggest table, if it has this many events in the window or more, and this share of them: its columns
# are NULL on every other table's rows, and those cells cost the cache more than a small table saves
# (bench/NOTES.md "Eager decode of the biggest table").
EAGER_DECODE_EVENTS = 100_000
EAGER_DECODE_SHARE = 0.5
RAW_PUT_COLUMNS = ("value", "old_value", "first_old_value")  # not kept on a decoded PUT


@dataclass(frozen=True)
class EagerDecode:
    """The (table, segment)s whose PUTs the match+collapse task decodes, with what the decode reports to."""

    schemas: Mapping[tuple[int, int], TableSchema] = field(default_factory=dict)
    verify_checksums: bool = True
    zero_dates: Accumulator[int] | None = None
    tallies: Mapping[int, DecodeTally] = field(default_factory=dict)  # table -> where its tasks are noted

    def column(self, table: int, segment: int, position: int) -> str:
        return f"_d{table}_{segment}_{position}"

    def spark_schema(self) -> StructType:
        """The collapsed rows' Spark schema with the decoded columns (on the driver: parses DDL)."""
        from pyspark.sql.types import StructField, StructType

        def parsed(ddl: str) -> list[StructField]:
            struct = StructType.fromDDL(ddl)
            assert isinstance(struct, StructType)
            return list(struct.fields)

        fields = parsed(COLLAPSED_DDL)
        for (table, segment), schema in self.schemas.items():
            decoded = parsed(decoded_spark_ddl(schema))
            fields += [
                StructField(self.column(table, segment, i), f.dataType, nullable=True)
                for i, f in enumerate(decoded)
            ]
        return StructType(fields)

    def arrow_schema(self) -> pa.Schema:
        fields = list(COLLAPSED_ARROW)
        for (table, segment), schema in self.schemas.items():
            decoded = nullable_output_schema(schema)
            fields += [pa.field(self.column(table, segment, i), f.type) for i, f in enumerate(decoded)]
        return pa.schema(fields)

    def decode(self, collapsed: pa.Table) -> pa.Table:
        """`collapsed` (COLLAPSED_ARROW) with the decoded columns; a decoded PUT's raw value columns are
        NULL. Raises (`in_task`) on a row that cannot be decoded."""
        if not self.schemas:
            return collapsed
        target = self.arrow_schema()
        table_idx = collapsed.column("table_idx").to_numpy(zero_copy_only=False)
        segment = collapsed.column("segment").to_numpy(zero_copy_only=False)
        is_put = pc.fill_null(pc.equal(collapsed.column("op"), "PUT"), False).to_numpy(zero_copy_only=False)
        done = np.zeros(collapsed.num_rows, dtype=bool)
        parts = []
        for (table, seg), schema in self.schemas.items():
            mask = is_put & (table_idx == table) & (segment == seg)
            if not mask.any():
                continue
            done |= mask
            rows = collapsed.filter(pa.array(mask))
            if table in self.tallies:
                self.tallies[table].note()
            batch = rows.select(input_columns(schema)).combine_chunks().to_batches(max_chunksize=None)[0]
            try:
                decoded, zeros = decode_changes_batch(schema, batch, verify_checksums=self.verify_checksums)
            except CodecError as exc:
                raise in_task(decode_error(schema, exc)) from None
            if zeros and self.zero_dates is not None:
                self.zero_dates.add(zeros)
            for name in RAW_PUT_COLUMNS:
                position = rows.schema.get_field_index(name)
                rows = rows.set_column(position, name, pa.nulls(rows.num_rows, pa.binary()))
            parts.append(self._with_columns(rows, target, {(table, seg): decoded}))
        parts.insert(0, self._with_columns(collapsed.filter(pa.array(~done)), target, {}))
        return pa.concat_tables(parts)

    def widen(self, collapsed: pa.Table) -> pa.Table:
        """Rows without decoded values (matcher errors), in the output schema."""
        return self._with_columns(collapsed, self.arrow_schema(), {}) if self.schemas else collapsed

    def _with_columns(
        self, rows: pa.Table, target: pa.Schema, decoded: Mapping[tuple[int, int], pa.RecordBatch]
    ) -> pa.Table:
        """`rows` with `target`'s decoded columns: those of `decoded`'s segments, NULL for the others."""
        given = {
            self.column(table, segment, i): column
            for (table, segment), batch in decoded.items()
            for i, column in enumerate(batch.columns)
        }
        added = (
            given.get(f.name, pa.nulls(rows.num_rows, f.type)) for f in list(target)[len(COLLAPSED_ARROW) :]
        )
        return pa.Table.from_arrays([*rows.columns, *added], schema=target)

    def rows(self, collapsed: DataFrame, table: int, segment: int) -> DataFrame:
        """The segment's decoded PUTs, as `decode.decode_changes` gives them."""
        from pyspark.sql import functions as F

        decoded = nullable_output_schema(self.schemas[(table, segment)])
        return collapsed.filter(
            (F.col("table_idx") == table) & (F.col("segment") == segment) & (F.col("op") == "PUT")
        ).select(*(F.col(self.column(table, segment, i)).alias(f.name) for i, f in enumerate(decoded)))


def events_per_table(
    tables: Sequence[TrackedTable], scans: Sequence[ScanManifest], event_counts: Mapping[tuple[str, int], int]
) -> dict[int, int]:
    """About how many events each table's records have: a region's events count for every table whose
    records its key span overlaps (in full: a region over several tables counts for each)."""
    per_scan: dict[str, tuple[list[bytes], list[tuple[bytes, int]]]] = {}
    for scan in scans:
        regions = sorted((r.start_key, r.end_key, event_counts.get((scan.scan_id, r.region_id), 0))
                         for r in scan.regions)  # fmt: skip
        per_scan[scan.scan_id] = ([start for start, _, _ in regions], [(end, n) for _, end, n in regions])
    estimate: dict[int, int] = {}
    for index, table in enumerate(tables):
        total = 0
        for pid in table.physical_ids():
            lo, hi = table_prefix(pid) + b"_r", table_prefix(pid) + b"_s"
            for starts, ends in per_scan.values():
                first = max(0, bisect.bisect_right(starts, lo) - 1)
                last = bisect.bisect_left(starts, hi)
                total += sum(n for end, n in ends[first:last] if not end or end > lo)
        estimate[index] = total
    return estimate


def eager_segments(
    tables: Sequence[TrackedTable], events: Mapping[int, int], total: int
) -> dict[tuple[int, int], TableSchema]:
    """The segments to decode in the match+collapse task: every schema version of the table with the most
    events (`events_per_table`), if it has `EAGER_DECODE_EVENTS` or more and `EAGER_DECODE_SHARE` of the
    window's `total`; none otherwise."""
    if not events:
        return {}
    count, index = max((n, -i) for i, n in events.items())
    if count < EAGER_DECODE_EVENTS or count < EAGER_DECODE_SHARE * total:
        return {}
    return {
        (-index, segment): version.schema
        for segment, version in enumerate(tables[-index].versions)
        if version.schema is not None
    }


__all__ = ["EAGER_DECODE_EVENTS", "EAGER_DECODE_SHARE", "EagerDecode", "eager_segments", "events_per_table"]
