"""How many Python tasks decode a table's changes, and which tasks ran.

Every Python task is a round trip (~0.15 s on 2 cores) even where its input partition holds none of the
table's rows, and a window of many small tables pays it per table and partition (key ranges of a capture,
partitions of a Kafka topic). So a table's changes are decoded by one task per `DECODE_ROWS_PER_TASK`
rows, never by more tasks than its input has partitions (`coalesce`: no shuffle). Which tasks did decode
rows is gathered in an accumulator, without another Spark job, for the report's `decode_tasks`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from pyspark.accumulators import AccumulatorParam

DECODE_ROWS_PER_TASK = 100_000


def decode_task_count(rows: int) -> int:
    """Tasks for a table's `rows` changes (at least one)."""
    return max(1, -(-rows // DECODE_ROWS_PER_TASK))


class TaskSet(AccumulatorParam):
    """Accumulates sets: which (table, task) pairs ran a decode."""

    def zero(self, value: set) -> set:
        return set()

    def addInPlace(self, value1: set, value2: set) -> set:
        value1 |= value2
        return value1


def note_decoding_task(tasks: Any, tag: Hashable) -> None:
    """Inside a task that runs the decode of the table `tag`: record it in the `TaskSet` accumulator."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is not None:
        tasks.add({(tag, context.partitionId())})


def tasks_per_table(tasks: Any) -> Mapping[int, int]:
    """Tasks that ran a decode, per table index, from a `TaskSet` accumulator (read on the driver)."""
    per_table: dict[int, set[int]] = {}
    for index, partition in tasks.value:
        per_table.setdefault(index, set()).add(partition)
    return {index: len(parts) for index, parts in per_table.items()}


__all__ = ["DECODE_ROWS_PER_TASK", "TaskSet", "decode_task_count", "note_decoding_task", "tasks_per_table"]
