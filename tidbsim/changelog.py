"""The row changes and DDLs TiCDC would see, in commit-ts order, spooled to disk (bounded memory).

TiCDC mounts each committed key change with the schema valid at ``commit_ts - 1`` (the done version when
the transaction commits) and emits it with the row before it (old value) and after it; DDLs come at
their finished ts. ``World.changes`` records exactly that while the simulation runs, when
``SimulationConfig.ticdc_changelog`` asks for it; :mod:`tidbsim.kafka` turns the log into the
messages a changefeed publishes. The log is a series of pickles, each a :class:`ColumnarChunk` of up to
``RECORDS_PER_CHUNK`` records whose row values are typed Arrow columns per table version (logs written
before, as lists of records or single records, read too). Records, as :func:`read_changelog` gives them:

- ``("schema", key, db, table_info)``: a table version, written before the first row that uses it;
- ``("row", commit_ts, db, table, key, physical_id, new, old)``: ``new``/``old`` map column names to
  values (codec value domain, ``_tidb_rowid`` included for tables without a clustered key); ``new`` is
  None for a delete, ``old`` None for an insert; ``physical_id`` is the partition id (None unpartitioned);
- ``("ddl", finished_ts, db, table, query, action_type, table_info)``: ``table_info`` is the table after
  the DDL (the dropped table for DROP TABLE; None for a database DDL, whose ``table`` is empty). The
  CREATE DATABASE / CREATE TABLE of the initial tables come first, at their creation ts (below the
  initial snapshot ts, where a changefeed usually starts).
"""

from __future__ import annotations

import datetime as dt
import pickle
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import pyarrow as pa

from backfill.codec import decode_record_key
from backfill.codec.schema import ROWID_NAME
from tidbsim.catalog import decode_phys

if TYPE_CHECKING:
    from tidbsim.catalog import Catalog
    from tidbsim.store import Store, Version
    from tidbsim.table_versions import TableVersion


class RowHistory(Protocol):
    """What the log reads of the simulated cluster (`tidbsim.world.World`): the stored versions and the
    row a consumer holds for one of them."""

    catalog: Catalog
    store: Store

    def logical_row(
        self, uid: int, pid: int, key: bytes, v: Version, to_index: int
    ) -> dict[int, Any] | None: ...


CHANGELOG_PATH = Path("ticdc") / "changes.pkl"
RECORDS_PER_CHUNK = 4096
"""Records per pickled :class:`ColumnarChunk`: the publisher writes a chunk's values per table version and
column, so a chunk this long makes each Arrow call cover thousands of values."""
COLUMNAR_TAG = "tidbsim-columnar-1"


@dataclass(frozen=True)
class RowGroup:
    """The row images of one table version (and one set of column names) in a chunk, as typed columns;
    ``tags`` say which Python type each column's values had (:func:`typed_column`)."""

    skey: Any
    names: tuple[str, ...]
    tags: tuple[str, ...]
    batch: pa.RecordBatch

    def python_column(self, i: int, rows: pa.Array | None = None) -> list[Any]:
        """Column ``i``'s values as the simulator wrote them (of the ``rows`` taken, when given)."""
        column = self.batch.column(i)
        return python_values(column if rows is None else column.take(rows), self.tags[i])

    def rows(self) -> list[dict[str, Any]]:
        columns = [self.python_column(i) for i in range(len(self.names))]
        return [dict(zip(self.names, values, strict=True)) for values in zip(*columns, strict=True)]


@dataclass(frozen=True)
class ColumnarChunk:
    """Records in log order; a row record's ``new``/``old`` is ``(group, row)`` in ``groups`` (or None)."""

    records: list[tuple[Any, ...]]
    groups: list[RowGroup]

    def python_records(self) -> list[tuple[Any, ...]]:
        """The records with their rows as dicts (what the simulator wrote)."""
        rows = [group.rows() for group in self.groups]
        out = []
        for rec in self.records:
            if rec[0] == "row":
                new, old = rec[6], rec[7]
                rec = (
                    *rec[:6],
                    None if new is None else rows[new[0]][new[1]],
                    None if old is None else rows[old[0]][old[1]],
                )
            out.append(rec)
        return out


def typed_column(values: Sequence[Any]) -> tuple[pa.Array, str]:
    """A column of Python values (None for NULL) as an Arrow array and the tag that turns it back
    (:func:`python_values`): int64/uint64, float64, string, binary, Decimal as its text, date32,
    timestamp[us] (naive, or UTC-aware as ``datetime_utc``); any other mix pickled value by value."""
    kinds = {type(v) for v in values if v is not None}
    try:
        if not kinds:
            return pa.nulls(len(values), pa.null()), "none"
        if len(kinds) == 1:
            kind = kinds.pop()
            if kind is int:
                try:
                    return pa.array(values, pa.int64()), "int"
                except (OverflowError, pa.ArrowException):
                    return pa.array(values, pa.uint64()), "int"
            if kind is float:
                return pa.array(values, pa.float64()), "float"
            if kind is str:
                return pa.array(values, pa.string()), "str"
            if kind is bytes:
                return pa.array(values, pa.binary()), "bytes"
            if kind is Decimal:
                return pa.array([None if v is None else str(v) for v in values], pa.string()), "decimal"
            if kind is dt.date:
                return pa.array(values, pa.date32()), "date"
            if kind is dt.datetime and not any(v.fold for v in values if v is not None):
                zones = {v.tzinfo for v in values if v is not None}
                if zones == {None}:
                    return pa.array(values, pa.timestamp("us")), "datetime"
                if zones == {dt.UTC}:
                    return pa.array(values, pa.timestamp("us", tz="UTC")), "datetime_utc"
    except (OverflowError, UnicodeError, pa.ArrowException):
        pass
    return pa.array([None if v is None else pickle.dumps(v) for v in values], pa.binary()), "pickle"


def python_values(column: pa.Array, tag: str) -> list[Any]:
    """:func:`typed_column`'s values back, the same Python objects (equal, of the same type)."""
    if tag == "none":
        return [None] * len(column)
    if tag == "datetime_utc":
        return [
            None if v is None else v.replace(tzinfo=dt.UTC)
            for v in column.cast(pa.timestamp("us")).to_pylist()
        ]
    values = column.to_pylist()
    if tag == "decimal":
        return [None if v is None else Decimal(v) for v in values]
    if tag == "pickle":
        return [None if v is None else pickle.loads(v) for v in values]
    return values


def columnar_chunk(records: Iterable[tuple[Any, ...]]) -> ColumnarChunk:
    """Records (rows as dicts) as a chunk: each table version's row images in typed columns."""
    groups: dict[tuple[Any, tuple[str, ...]], list[dict[str, Any]]] = {}
    order: dict[tuple[Any, tuple[str, ...]], int] = {}

    def place(skey: Any, row: dict[str, Any] | None) -> tuple[int, int] | None:
        if row is None:
            return None
        at = (skey, tuple(row))
        rows = groups.get(at)
        if rows is None:
            rows = groups[at] = []
            order[at] = len(order)
        rows.append(row)
        return order[at], len(rows) - 1

    out = []
    for rec in records:
        if rec[0] == "row":
            rec = (*rec[:6], place(rec[4], rec[6]), place(rec[4], rec[7]))
        out.append(rec)
    built = []
    for (skey, names), rows in groups.items():
        columns = [typed_column([row[n] for row in rows]) for n in names]
        batch = pa.RecordBatch.from_arrays(
            [a for a, _ in columns], names=[f"c{i}" for i in range(len(names))]
        )
        built.append(RowGroup(skey, names, tuple(tag for _, tag in columns), batch))
    return ColumnarChunk(out, built)


class ChangeLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: BinaryIO | None = path.open("wb")
        self._schemas: set[tuple[int, int]] = set()
        self._pending: list[tuple[Any, ...]] = []
        self.count = 0

    def _add(self, record: tuple[Any, ...]) -> None:
        self._pending.append(record)
        self.count += 1
        if len(self._pending) >= RECORDS_PER_CHUNK:
            self._write()

    def _write(self) -> None:
        # One pickle per chunk, each with its own memo: a memo shared across pickles breaks once it is
        # cleared (protocol 4+ memoizes by position, and the reader's memo would not be cleared with it).
        assert self._f is not None
        if self._pending:
            chunk = columnar_chunk(self._pending)
            groups = [(g.skey, g.names, g.tags, g.batch) for g in chunk.groups]
            self._f.write(
                pickle.dumps((COLUMNAR_TAG, chunk.records, groups), protocol=pickle.HIGHEST_PROTOCOL)
            )
            self._pending = []

    def row(
        self,
        world: RowHistory,
        commit_ts: int,
        version: TableVersion,
        pid: int,
        key: bytes,
        put: bool,
        phys: Any,
    ) -> None:
        """One key change of a committing transaction (called before the store holds the new version)."""
        cat = world.catalog
        skey = (version.uid, cat.latest_index(version.uid))
        if skey not in self._schemas:
            self._schemas.add(skey)
            self._add(("schema", skey, version.db, version.table_info()))
        prev = world.store.latest(pid, key)
        old = None
        if prev is not None and prev.put:
            row = world.logical_row(version.uid, pid, key, prev, skey[1])
            if row is not None:
                old = self._named(version, row, key)
        new = self._named(version, decode_phys(version, phys), key) if put else None
        if new is None and old is None:
            return
        ptn = pid if version.partition is not None else None
        self._add(("row", commit_ts, version.db, version.name, skey, ptn, new, old))

    @staticmethod
    def _named(version: TableVersion, row: dict[int, Any], key: bytes) -> dict[str, Any]:
        named = {c.name: row[c.id] for c in version.schema.columns}
        if version.pk_kind == "rowid":
            named[ROWID_NAME] = decode_record_key(key).handle
        return named

    def ddl(
        self, finished_ts: int, db: str, table: str, query: str, action: int, info: dict[str, Any] | None
    ) -> None:
        self._add(("ddl", finished_ts, db, table, query, action, info))

    def close(self) -> None:
        if self._f is not None:
            self._write()
            self._f.close()
            self._f = None


def read_changelog(path: Path) -> Iterator[tuple[Any, ...]]:
    """Every record, in order."""
    for chunk in read_changelog_chunks(path):
        yield from chunk


def read_changelog_chunks(path: Path) -> Iterator[list[tuple[Any, ...]]]:
    """The records in the chunks they were written in (rows as dicts)."""
    for chunk in _read_pickles(path):
        yield chunk.python_records() if isinstance(chunk, ColumnarChunk) else chunk


def read_changelog_columnar(path: Path, records: int = RECORDS_PER_CHUNK) -> Iterator[ColumnarChunk]:
    """The log as :class:`ColumnarChunk` s (an older log's records in chunks of about ``records``)."""
    pending: list[tuple[Any, ...]] = []
    for chunk in _read_pickles(path):
        if isinstance(chunk, ColumnarChunk):
            if pending:
                yield columnar_chunk(pending)
                pending = []
            yield chunk
        else:
            pending += chunk
            if len(pending) >= records:
                yield columnar_chunk(pending)
                pending = []
    if pending:
        yield columnar_chunk(pending)


def _read_pickles(path: Path) -> Iterator[ColumnarChunk | list[tuple[Any, ...]]]:
    """Each pickle: a chunk, or a list of records (a record alone: a list of one)."""
    with path.open("rb") as f:
        while True:
            try:
                loaded = pickle.load(f)
            except EOFError:
                return
            if isinstance(loaded, tuple) and loaded and loaded[0] == COLUMNAR_TAG:
                yield ColumnarChunk(loaded[1], [RowGroup(*g) for g in loaded[2]])
            else:
                yield loaded if isinstance(loaded, list) else [loaded]
