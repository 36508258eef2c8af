"""How many Python tasks decode a table's changes, and which tasks ran.

Every Python task is a round trip (~0.15 s on 2 cores) even where its input partition holds none of the
table's rows, and a window of many small tables pays it per table and partition (key ranges of a capture,
partitions of a Kafka topic). So a table's changes are decoded by one task per `DECODE_ROWS_PER_TASK`
rows, never by more tasks than its input has partitions (`coalesce`: no shuffle). The tasks that ran a
table's decode, rows or not, are gathered in an accumulator, without another Spark job, for the report's
`decode_tasks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.accumulators import AccumulatorParam

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DECODE_ROWS_PER_TASK = 100_000


def decode_task_count(rows: int) -> int:
    """Tasks for a table's `rows` changes (at least one)."""
    return max(1, -(-rows // DECODE_ROWS_PER_TASK))


class _TaskSet(AccumulatorParam):
    """Accumulates sets: which (table, task) pairs ran a decode."""

    def zero(self, value: set) -> set:
        return set()

    def addInPlace(self, value1: set, value2: set) -> set:
        value1 |= value2
        return value1


@dataclass(frozen=True)
class DecodeTally:
    """What one table's decode function carries to the executors to record the task it runs in."""

    seen: Any  # the run's accumulator of (table, partition) pairs
    table: int

    def note(self) -> None:
        """Inside a task, once, before its first batch: record it (a task that gets no rows counts too)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None:
            self.seen.add({(self.table, context.partitionId())})


class DecodeTasks:
    """The Python tasks that ran each table's decode in one run."""

    def __init__(self, spark: SparkSession) -> None:
        self._seen = spark.sparkContext.accumulator(set(), _TaskSet())

    def tally(self, table: int) -> DecodeTally:
        return DecodeTally(self._seen, table)

    def per_table(self) -> Mapping[int, int]:
        """Tasks per table index (read on the driver, after the decode ran)."""
        per_table: dict[int, set[int]] = {}
        for index, partition in self._seen.value:
            per_table.setdefault(index, set()).add(partition)
        return {index: len(parts) for index, parts in per_table.items()}


__all__ = ["DECODE_ROWS_PER_TASK", "DecodeTally", "DecodeTasks", "decode_task_count"]
