"""What a source hands the apply stage (docs/architecture.md "The row-change contract"): the window it
can apply (`Window`, or `NoWindow` and why not) and that window's row changes in one canonical shape
(`RowChanges`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from backfill.tables import RowIdentity, TrackedTable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


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

    def segment_keys(self, segments: Iterable[tuple[int, int]]) -> dict[tuple[int, int], tuple[str, ...]]:
        """Per (table index, segment) the columns its changes collapse on (none: a multiset of whole rows)."""
        keys = {}
        for table, segment in segments:
            schema = self.tables[table].versions[segment].schema
            assert schema is not None, "a segment without a table has no rows"
            keys[(table, segment)] = tuple(self.identity(table).columns(schema))
        return keys


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
    the apply stage then also deletes that key where it differs (`changes.collapse.with_moved_key_deletes`).
    Frames are lazy; the apply stage materializes all of them before its first commit, so bad input
    surfaces while every table is still untouched.
    """

    @abstractmethod
    def counts(self) -> Mapping[tuple[int, int, str], int]:
        """Rows per (table index, segment, op)."""

    @abstractmethod
    def rows(self, table: int, segment: int, *, puts_only: bool) -> DataFrame:
        """The segment's changes; `puts_only` when the table is empty, so its DELETEs may be left out."""

    def zero_dates(self) -> int:
        """Zero dates written as NULL (read after the rows were materialized)."""
        return 0

    def release(self) -> None:  # noqa: B027 - most changes hold nothing to free
        """Free what the changes hold (cached frames)."""


# What some sources' changes can also do, declared by implementing it; the apply stage asks with
# `isinstance` and otherwise persists and computes each segment's rows itself.


@runtime_checkable
class ComputedRows(Protocol):
    """Changes some of whose segments are a filter and projection of a frame already persisted and
    computed: the apply stage need not persist them again."""

    def cached_rows(self, table: int, segment: int, *, puts_only: bool) -> bool:
        """True where `rows()` of the segment is already computed."""
        ...


@runtime_checkable
class DriverRows(Protocol):
    """Changes that hold some segments' rows on the driver (small tables typed there: no Spark job)."""

    def local_rows(self, table: int, segment: int, *, puts_only: bool) -> pa.Table | None:
        """The segment's `rows()` as an Arrow table where the source typed them on the driver, else None."""
        ...


@runtime_checkable
class DecodeParallelism(Protocol):
    """Changes that count the Spark tasks that produced each table's rows, for the run report."""

    def tasks_per_table(self) -> Mapping[int, int]:
        """Tasks per table index (read after materializing)."""
        ...
