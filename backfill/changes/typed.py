"""Row changes of sources that read them already typed (TiCDC's storage sink and Kafka topics).

The source hands over, per (table, segment), a lazy frame of typed changes in the canonical shape
(`changes.contract.RowChanges`) plus `_tidb_line`, possibly several per key and with at-least-once repeats of
whole transactions already dropped; here they are collapsed by the shared rule (`changes.collapse`),
persisted and counted, so the apply stage sees them like any other source's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from backfill.changes.collapse import COPIES, last_change_per_key, net_copies
from backfill.changes.contract import ComputedRows, DecodeParallelism, RowChanges
from tidelake.conventions import OP

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PARALLEL_JOBS = 4


class TypedRowChanges(RowChanges, ComputedRows, DecodeParallelism):
    def __init__(
        self,
        keys: Mapping[tuple[int, int], Sequence[str]],
        raw: Mapping[tuple[int, int], DataFrame],
        *,
        zero_dates: Callable[[], int] = lambda: 0,
        decode_tasks: Callable[[], Mapping[int, int]] = dict,
    ) -> None:
        self._zero_dates = zero_dates
        self._decode_tasks = decode_tasks
        self._frames: dict[tuple[int, int], DataFrame] = {}
        for (table, segment), frame in raw.items():
            on = keys[(table, segment)]  # `Window.segment_keys`; none: a multiset of whole rows
            collapsed = last_change_per_key(frame, on) if on else net_copies(frame)
            self._frames[(table, segment)] = collapsed.persist()
        self._counts: dict[tuple[int, int, str], int] = {}
        with ThreadPoolExecutor(max_workers=PARALLEL_JOBS) as pool:
            for (table, segment), per_op in zip(
                self._frames, pool.map(_count_by_op, self._frames.values()), strict=False
            ):
                for op, count in per_op.items():
                    self._counts[(table, segment, op)] = count

    def counts(self) -> Mapping[tuple[int, int, str], int]:
        return self._counts

    def rows(self, table: int, segment: int, *, puts_only: bool) -> DataFrame:
        frame = self._frames[(table, segment)]
        return frame.filter(frame[OP] == "PUT") if puts_only else frame

    def cached_rows(self, table: int, segment: int, *, puts_only: bool) -> bool:
        return True  # collapsed, persisted and counted here

    def zero_dates(self) -> int:
        return self._zero_dates()

    def tasks_per_table(self) -> Mapping[int, int]:
        return self._decode_tasks()

    def release(self) -> None:
        for frame in self._frames.values():
            frame.unpersist()


def _count_by_op(frame: DataFrame) -> dict[str, int]:
    """Changes per op; a multiset's net rows count their copies."""
    from pyspark.sql import functions as F

    weight = F.col(COPIES) if COPIES in frame.columns else F.lit(1)
    return {r[OP]: int(r["n"]) for r in frame.groupBy(OP).agg(F.sum(weight).alias("n")).collect()}
