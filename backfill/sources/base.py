"""The seam between an input and the shared apply stage (docs/architecture.md "The row-change contract").

A source knows its input's layout and completeness rules. Given the tables' checkpoints it says which
window can be applied (`Window`: the resolved ts it can prove, the tables with their schema versions — each
version change a DDL barrier —, what holds it back) and then produces that window's row changes in one
canonical shape (`RowChanges`). Everything after it (MERGE per DDL segment, DDL steps, transaction tags,
report) is shared and never looks at where a change came from.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from backfill.tables import RowIdentity, TrackedTable
from tidelake import conventions, delta, fs, output

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class StageClock:
    """Seconds per named stage of a run, for the report."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            with output.activity(name):
                yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


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
class Window:
    """What one run applies: every tracked table from its floor up to `resolved_ts`.

    A change of table i is applied when `floors[i] < commit_ts <= resolved_ts`; the rows of one schema
    version of a table form a segment, and the step to the next version is a DDL barrier.
    """

    checkpoint_ts: int  # the lowest table checkpoint: where the run starts
    resolved_ts: int  # what the run reaches; every table commits at it
    tables: tuple[TrackedTable, ...]
    floors: tuple[int, ...]  # per table: changes at or below it are in its Delta table already
    blocked: str | None = None  # what holds the resolved ts back, if anything
    inputs: tuple[str, ...] = ()  # what the source read, for the report (kv-scan: capture ids)
    commit_metadata: Mapping[str, Any] = field(default_factory=dict)  # recorded for the next run
    identities: Mapping[int, RowIdentity] = field(default_factory=dict)  # per table; default: the handle
    # (input, partition, changes): changes read again after a producer restart, recognised and skipped
    resent_skipped: tuple[tuple[str, int, int], ...] = ()

    def identity(self, table: int) -> RowIdentity:
        """How the rows of table `table` are told apart (`RowIdentity`)."""
        return self.identities.get(table, RowIdentity.HANDLE)


@dataclass(frozen=True)
class NoWindow:
    """Nothing to apply this run, and why."""

    checkpoint_ts: int | None
    note: str
    blocked: str | None = None
    resent_skipped: tuple[tuple[str, int, int], ...] = ()  # as `Window.resent_skipped`


class RowChanges(ABC):
    """A window's row changes in the canonical shape, per (table index, segment).

    The contract is docs/architecture.md "The row-change contract". `rows()` gives the typed rows of one
    segment: the table's output columns (`TableSchema.output_names`, Delta types of the type map) plus
    `_tidb_commit_ts` and `_tidb_op` ('PUT' or 'DELETE'), at most one change per key — the last by commit
    ts — within `floor < commit_ts <= resolved ts`. A DELETE needs only its key columns. A source that
    knows a row's key as it stood at the window's start may add it as
    `_tidb_before_<key column>` columns (kv-scan, from old values, for keys that hold collation sort keys);
    the apply stage then also deletes that key where it differs (`apply.collapse.with_moved_key_deletes`).
    Frames are lazy; the apply stage materializes all of them before its first commit, so bad input
    surfaces while every table is still untouched.
    """

    @abstractmethod
    def counts(self) -> Mapping[tuple[int, int, str], int]:
        """Rows per (table index, segment, op)."""

    @abstractmethod
    def rows(self, table: int, segment: int, *, puts_only: bool) -> DataFrame:
        """The segment's changes; `puts_only` when the table is empty, so its DELETEs may be left out."""

    def cached_rows(self, table: int, segment: int, *, puts_only: bool) -> bool:
        """True where `rows()` is a filter and projection of a frame already persisted and computed."""
        return False

    def local_rows(self, table: int, segment: int, *, puts_only: bool) -> pa.Table | None:
        """The segment's `rows()` as an Arrow table, where the source typed them on the driver (a small
        table: no Spark job of its own), else None."""
        return None

    def zero_dates(self) -> int:
        """Zero dates written as NULL (read after the rows were materialized)."""
        return 0

    def tasks_per_table(self) -> Mapping[int, int]:
        """Spark tasks that produced each table's rows (read after materializing): parallelism at work."""
        return {}

    def release(self) -> None:  # noqa: B027 - most changes hold nothing to free
        """Free what the changes hold (cached frames)."""


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
