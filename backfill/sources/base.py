"""The seam between an input and the shared apply stage (docs/architecture.md "The row-change contract").

A source knows its input's layout and completeness rules. Given the tables' checkpoints it says which
window can be applied (`Window`: the resolved ts it can prove, the tables with their schema versions — each
version change a DDL barrier —, what holds it back) and then produces that window's row changes in one
canonical shape (`RowChanges`). Everything after it (MERGE per DDL segment, DDL steps, transaction tags,
report) is shared and never looks at where a change came from.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from backfill.changes.contract import NoWindow, RowChanges, Window
from backfill.clock import StageClock
from backfill.tables import TrackedTable
from tidelake import conventions, delta, fs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class CheckpointBook:
    """The tables' checkpoints, read from their Delta logs: the transaction version our app id recorded
    there is the resolved ts the table reached (docs/architecture.md "The commit contract"). Reads are
    cached."""

    def __init__(self, spark: SparkSession, warehouse: str, app_id: str) -> None:
        self.spark, self.warehouse, self.app_id = spark, warehouse, app_id
        self._recorded: dict[str, int | None] = {}

    def path(self, database: str | None, table: str) -> str:
        return conventions.table_path(self.warehouse, database, table)

    def recorded_at(self, path: str) -> int | None:
        """The transaction version recorded for our app id in the table at `path` (None: none there)."""
        if path not in self._recorded:
            self._recorded[path] = delta.recorded_txn_version(self.spark, path, self.app_id)
        return self._recorded[path]

    def of_table(self, table: TrackedTable) -> int | None:
        """The highest version recorded under any name the table has in the window."""
        found = [self.recorded_at(self.path(db, name)) for db, name in table.names()]
        return max((v for v in found if v is not None), default=None)

    def existing(self) -> list[tuple[str, str, int | None]]:
        """(db, table, recorded version) of every Delta table under `<warehouse>/<db>/<table>`."""
        found = []
        for db in fs.list_dir(self.spark, self.warehouse):
            if not db.is_dir or db.name.startswith(("_", ".")):
                continue
            for table in fs.list_dir(self.spark, db.path):
                if table.is_dir and fs.exists(self.spark, fs.join(table.path, "_delta_log")):
                    found.append((db.name, table.name, self.recorded_at(self.path(db.name, table.name))))
        return found


@dataclass(frozen=True)
class SourceStatus:
    """What `backfill status` says of the input: how far it reaches and what it holds."""

    description: str  # e.g. "3 complete captures"
    newest_ts: int | None  # the highest ts the input covers (lag is measured against it)
    details: Mapping[str, Any] = field(default_factory=dict)


W = TypeVar("W", bound=Window)


class Source(ABC, Generic[W]):
    """One kind of input (`source.kind`), generic over the window it plans: `row_changes` gets the very
    window its `plan` returned, with the source's own fields (files, events, captures), typed."""

    kind: ClassVar[str]

    @abstractmethod
    def plan(
        self, spark: SparkSession, checkpoints: CheckpointBook, clock: StageClock, until_ts: int | None
    ) -> W | NoWindow:
        """The window this run can apply, never past `until_ts`; raises InputError on bad input."""

    @abstractmethod
    def row_changes(self, spark: SparkSession, window: W, clock: StageClock) -> RowChanges:
        """The window's row changes."""

    @abstractmethod
    def status(self, spark: SparkSession) -> SourceStatus:
        """How far the input reaches, for `backfill status`."""

    def progress(self, spark: SparkSession, checkpoints: CheckpointBook) -> Mapping[str, Any]:
        """Where the job stands in the input beyond the tables' checkpoints, for `backfill status` (Kafka:
        per-partition offsets and watermarks, and which partition holds the job back)."""
        return {}
