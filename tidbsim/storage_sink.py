"""The folder a TiCDC storage-sink changefeed (``file://`` sink) writes for a simulated workload.

Input: a simulation run with ``ticdc_changelog=True`` (``ticdc/changes.pkl``, ``expected/index.json``).
Output, flush by flush, under ``dest`` (reference ticdc-protocols.md §2, §3; tiflow
``cdc/sink/dmlsink/cloudstorage``, ``pkg/sink/cloudstorage/path.go``; ticdc
``downstreamadapter/sink/cloudstorage/writer.go``):

- ``<schema>/<table>/<table-version>/[<physical-id>/][<date>/]CDC<n>.{csv,json}`` (``CDC_<dispatcher>_<n>``
  with the new architecture's ``table_across_nodes``) and beside the files ``meta/CDC.index``
  (``meta/CDC_<dispatcher>.index``) naming the last file; tiflow writes the index *before* the data
  file, the new architecture *after* it;
- ``<schema>/<table>/meta/schema_<version>_<checksum>.json`` before a version's first file (empty
  ``Query``: a table that existed when the changefeed started, version = its start ts), and for each DDL
  at its finished ts with the ``Query`` (database DDLs under ``<schema>/meta/``), after every row
  committed before it;
- the root ``metadata`` (``{"checkpoint-ts":N}``): written after everything at or below N is in files,
  at each scan's resolved ts (so a consumer at that checkpoint holds the simulator's expected state) and
  every ``checkpoint_every`` flushes in between, never past the last scan's resolved ts. Files are
  flushed every ``flush_rows`` changes (a transaction may span files), so data beyond the checkpoint is
  normal.
- ``restarts`` times, at a checkpoint, the changefeed crashes in the middle of a flush (tiflow: an index
  naming a file that was not written; new architecture: a file its index does not name yet) and
  restarts from the previous checkpoint: every change since is written again into new files
  (at-least-once duplicates). With ``restart_new_version`` the restarted writer does not find the
  tables' schema files and starts each table at a new version named by the restart checkpoint, with an
  empty-``Query`` schema file (path.go Case 3). The sink's clock advances ``flush_interval_s`` per flush,
  so date folders roll over (and a crashed index may then name a file that is never written).

Memory stays bounded: the buffered changes of one flush and the changes since the last checkpoint.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backfill.codec.schema import TableSchema
from tidbsim.changelog import CHANGELOG_PATH, read_changelog
from tidbsim.config import DATE_SEPARATORS, StorageSink
from tidbsim.expected import load_index
from tidbsim.storage_codec import CanalJsonEncoder, CsvEncoder, csv_header
from tidbsim.storage_schema import go_marshal_indent, schema_file_path, table_definition
from tidelake.tso import physical_ms

STORAGE_DIR = "storage"


# (db, table, physical id or None, table version, dispatcher slot)
VersionedTable = tuple[str, str, int | None, int, int]


class _Crash(Exception):
    """The simulated process died in the middle of a flush."""


@dataclass
class _Pending:
    schema: TableSchema
    lines: list[bytes] = field(default_factory=list)
    size: int = 0


class _Writer:
    """One storage-sink process: path generator, per-table buffers and file writes (dml_worker.go)."""

    def __init__(self, sink: StorageSink, dest: Path, rng: random.Random, clock_ms: int) -> None:
        self.sink = sink
        self.dest = dest
        self.rng = rng
        self.clock_ms = clock_ms
        self.pending: dict[VersionedTable, _Pending] = {}
        self.rows = 0
        self.flushes = 0
        self.files = 0
        self.crash_next_flush = False
        self._start_process()

    def _start_process(self) -> None:
        self.file_index: dict[VersionedTable, tuple[int, str]] = {}
        self.schema_checked: set[VersionedTable] = set()
        self.dispatcher_ids: dict[tuple[str, str, int | None, int], str] = {}

    def restart(self) -> None:
        self.pending.clear()
        self.rows = 0
        self._start_process()

    # -------------------------------------------------------------- files

    def write(self, rel: str, data: bytes) -> None:
        """``ExternalStorage.WriteFile`` on a local folder: a temporary file renamed into place."""
        path = self.dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)

    def write_schema(self, definition: dict[str, Any]) -> None:
        self.write(schema_file_path(definition), go_marshal_indent(definition))

    def _dispatcher(self, vt: VersionedTable) -> str:
        key = (vt[0], vt[1], vt[2], vt[4])
        if key not in self.dispatcher_ids:  # a GID: Low and High in decimal, back to back
            self.dispatcher_ids[key] = f"{self.rng.getrandbits(64)}{self.rng.getrandbits(64)}"
        return self.dispatcher_ids[key]

    def _dir(self, vt: VersionedTable, date: str) -> str:
        db, table, pid, version, _ = vt
        parts = [db, table, str(version)]
        if self.sink.enable_partition_separator and pid is not None:
            parts.append(str(pid))
        if date:
            parts.append(date)
        return "/".join(parts)

    def _names(self, vt: VersionedTable, n: int) -> tuple[str, str]:
        width = self.sink.file_index_width
        if self.sink.table_across_nodes:
            d = self._dispatcher(vt)
            return f"CDC_{d}_{n:0{width}d}{self.sink.extension}", f"meta/CDC_{d}.index"
        return f"CDC{n:0{width}d}{self.sink.extension}", "meta/CDC.index"

    def _index_on_disk(self, vt: VersionedTable, date: str) -> int:
        """The next process's start (``getNextFileIdxFromIndexFile``): the index's number, one less for
        tiflow when that file is missing or empty (the number is reused)."""
        folder = self._dir(vt, date)
        index = self.dest / folder / self._names(vt, 0)[1]
        if not index.exists():
            return 0
        name = index.read_text(encoding="utf-8").strip()
        digits = name[: -len(self.sink.extension)].rsplit("_", 1)[-1].removeprefix("CDC")
        n = int(digits)
        if self.sink.flavor == "ticdc":
            return n
        last = self.dest / folder / name
        return n if last.exists() and last.stat().st_size > 0 else n - 1

    def _data_path(self, vt: VersionedTable, date: str) -> tuple[str, str]:
        n, last_date = self.file_index.get(vt, (-1, date))
        if n < 0:
            n = self._index_on_disk(vt, date)
        elif last_date != date:
            n = 0
        folder = self._dir(vt, date)
        while True:
            n += 1
            name, index = self._names(vt, n)
            # the new architecture never overwrites a file its stale index does not name
            if self.sink.flavor == "tiflow" or not (self.dest / folder / name).exists():
                break
        self.file_index[vt] = (n, date)
        return f"{folder}/{name}", f"{folder}/{index}"

    def _check_or_write_schema(self, vt: VersionedTable, schema: TableSchema) -> None:
        if vt in self.schema_checked:
            return
        self.schema_checked.add(vt)
        definition = table_definition(
            vt[0],
            schema,
            table_version=vt[3],
            output_column_id=self.sink.output_column_id,
            elems=self.sink.column_elems,
        )
        if not (self.dest / schema_file_path(definition)).exists():
            self.write_schema(definition)

    # -------------------------------------------------------------- buffering and flushing

    def add(self, vt: VersionedTable, schema: TableSchema, data: bytes) -> None:
        p = self.pending.get(vt)
        if p is None:
            p = self.pending[vt] = _Pending(schema)
        p.lines.append(data)
        p.size += len(data)
        self.rows += 1
        if p.size >= self.sink.file_size:
            self.flush([vt])
        elif self.rows >= self.sink.flush_rows:
            self.flush()

    def flush(self, only: list[VersionedTable] | None = None) -> None:
        keys = list(self.pending) if only is None else only
        if not keys:
            return
        self.clock_ms += int(self.sink.flush_interval_s * 1000)
        self.flushes += 1
        fmt = DATE_SEPARATORS[self.sink.date_separator]
        date = dt.datetime.fromtimestamp(self.clock_ms / 1000, dt.UTC).strftime(fmt) if fmt else ""
        crash = self.crash_next_flush
        for i, vt in enumerate(keys):
            p = self.pending.pop(vt)
            self.rows -= len(p.lines)
            self._check_or_write_schema(vt, p.schema)
            data_path, index_path = self._data_path(vt, date)
            body = b"".join(p.lines)
            if self.sink.protocol == "csv" and self.sink.csv.output_field_header:
                body = csv_header(p.schema, self.sink.csv) + body
            last = i == len(keys) - 1
            index = (data_path.rsplit("/", 1)[1] + "\n").encode()
            if self.sink.flavor == "tiflow":
                self.write(index_path, index)
                if crash and last:
                    raise _Crash
                self.write(data_path, body)
            else:
                self.write(data_path, body)
                if crash and last:
                    raise _Crash
                self.write(index_path, index)
            self.files += 1


class _Changefeed:
    """The changefeed's side of the sink: table versions, checkpoints, restarts (the DDL sink and the
    owner), feeding row changes to the current :class:`_Writer` process."""

    def __init__(self, sink: StorageSink, writer: _Writer, start_ts: int, rng: random.Random) -> None:
        self.sink = sink
        self.writer = writer
        self.rng = rng
        self.schemas: dict[Any, TableSchema] = {}
        self.encoders: dict[Any, CsvEncoder | CanalJsonEncoder] = {}
        self.versions: dict[tuple[str, str], int] = {}
        self.base_version = start_ts  # the version of a table the (re)started feed has no schema file for
        self.checkpoint_ts = start_ts
        self.checkpoint_versions: dict[tuple[str, str], int] = {}
        self.since_checkpoint: list[tuple[Any, ...]] = []
        self.txn: list[tuple[Any, ...]] = []  # the row changes of the commit ts being read
        self.restarts_left = sink.restarts
        self.flushes_at_checkpoint = 0
        writer.write("metadata", self._metadata(start_ts))

    @staticmethod
    def _metadata(ts: int) -> bytes:
        return f'{{"checkpoint-ts":{ts}}}'.encode()

    def process(self, rec: tuple[Any, ...]) -> None:
        if self.restarts_left:
            self.since_checkpoint.append(rec)
        self._apply(rec)

    def _apply(self, rec: tuple[Any, ...]) -> None:
        if rec[0] == "ddl":
            self.end_transaction()
            self._ddl(*rec[1:])
            return
        if self.txn and self.txn[0][1] != rec[1]:
            self.end_transaction()
        self.txn.append(rec)

    def end_transaction(self) -> None:
        """Hand the buffered transaction on, its deletes first: TiCDC's sorter puts a delete before a
        put of the same commit ts, so a moved primary key reads D (old key) then I (new key)."""
        txn, self.txn = self.txn, []
        for rec in sorted(txn, key=lambda r: r[6] is not None):
            self._row(*rec[1:])

    def _ddl(
        self, fts: int, db: str, table: str, query: str, action: int, info: dict[str, Any] | None
    ) -> None:
        self.writer.flush()  # every row committed before the DDL is written first
        schema = TableSchema.from_table_info(info, schema_name=db) if info is not None else None
        definition = table_definition(
            db,
            schema,
            table_version=fts,
            query=query,
            action=action,
            output_column_id=self.sink.output_column_id,
            elems=self.sink.column_elems,
        )
        self.writer.write_schema(definition)
        if schema is not None:
            self.versions[(db, schema.name)] = fts

    def _row(
        self,
        cts: int,
        db: str,
        table: str,
        skey: Any,
        ptn: int | None,
        new: dict[str, Any] | None,
        old: dict[str, Any] | None,
    ) -> None:
        sink = self.sink
        schema = self.schemas[skey]
        version = self.versions.setdefault((db, table), self.base_version)
        slot = 0
        if sink.dispatchers_per_table > 1:  # a key range of the table: a row's key picks it
            row = new if new is not None else old
            assert row is not None
            slot = zlib.crc32(repr(tuple(row.get(c) for c in schema.pk_columns)).encode())
            slot %= sink.dispatchers_per_table
        encoder = self.encoders.get(skey)
        if encoder is None:
            encoder = self.encoders[skey] = (
                CsvEncoder(schema, db, sink.csv, time_zone=sink.time_zone)
                if sink.protocol == "csv"
                else CanalJsonEncoder(
                    schema,
                    db,
                    terminator=sink.terminator,
                    time_zone=sink.time_zone,
                    enable_tidb_extension=sink.enable_tidb_extension,
                )
            )
        if isinstance(encoder, CsvEncoder):
            data = encoder.lines(cts, new, old)
        else:
            data = encoder.line(cts, new, old, build_ms=physical_ms(cts) + 3)
        if not sink.enable_partition_separator:
            ptn = None  # the partitions share the table's folder, so one numbering of its files
        self.writer.add((db, table, ptn, version, slot), schema, data)

    def _restart(self) -> None:
        """Crash in the middle of the next flush, then replay everything since the last checkpoint."""
        self.writer.crash_next_flush = True
        with contextlib.suppress(_Crash):
            self.writer.flush()
        self.writer.crash_next_flush = False
        self.writer.restart()
        self.txn = []
        self.versions = dict(self.checkpoint_versions)
        self.base_version = self.checkpoint_ts
        if self.sink.restart_new_version:
            self.versions = {k: max(v, self.checkpoint_ts) for k, v in self.versions.items()}
        for rec in self.since_checkpoint:
            self._apply(rec)
        self.end_transaction()

    def checkpoint(self, ts: int) -> bool:
        """Flush everything (restarting first, now and then) and write ``metadata``; False if not ahead."""
        if ts <= self.checkpoint_ts:
            return False
        self.end_transaction()
        rows_since = any(r[0] == "row" for r in self.since_checkpoint)
        if self.restarts_left and rows_since and self.rng.random() < 0.5:
            self.restarts_left -= 1
            self._restart()
        self.writer.flush()
        self.writer.write("metadata", self._metadata(ts))
        self.checkpoint_ts = ts
        self.checkpoint_versions = dict(self.versions)
        self.since_checkpoint.clear()
        self.flushes_at_checkpoint = self.writer.flushes
        return True

    @property
    def checkpoint_due(self) -> bool:
        return self.writer.flushes - self.flushes_at_checkpoint >= self.sink.checkpoint_every


def storage_sink_flushes(out: str | Path, sink: StorageSink, dest: str | Path | None = None) -> Iterator[int]:
    """Write the changefeed's folder for the simulation under ``out``; yields each checkpoint ts right
    after its ``metadata`` is written (the folder then is what a consumer would find)."""
    out = Path(out)
    dest = Path(dest) if dest is not None else out / STORAGE_DIR / sink.protocol
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty: write a storage sink into an empty folder")
    dest.mkdir(parents=True, exist_ok=True)
    scans = load_index(out)
    if not scans:
        return
    start_ts = 0 if sink.from_creation else scans[0]["checkpoint_ts"]
    if sink.start_ts is not None:
        start_ts = sink.start_ts
    marks = sorted({s["resolved_ts"] for s in scans})
    final = marks[-1]
    rng = random.Random(sink.seed)
    feed = _Changefeed(sink, _Writer(sink, dest, rng, physical_ms(scans[0]["checkpoint_ts"])), start_ts, rng)
    last_ts = start_ts
    for rec in read_changelog(out / CHANGELOG_PATH):
        if rec[0] == "schema":
            feed.schemas[rec[1]] = TableSchema.from_table_info(rec[3], schema_name=rec[2])
            continue
        ts = rec[1]
        if ts <= start_ts:
            continue
        if ts > last_ts:  # every change at or below last_ts has been seen
            while marks and marks[0] < ts:
                mark = marks.pop(0)
                if mark >= last_ts and feed.checkpoint(mark):
                    yield mark
            if feed.checkpoint_due and last_ts <= final and feed.checkpoint(last_ts):
                yield last_ts
            last_ts = ts
        feed.process(rec)
    for mark in marks:
        if mark >= last_ts and feed.checkpoint(mark):
            yield mark
    feed.end_transaction()
    feed.writer.flush()  # changes beyond the last checkpoint: files a consumer must leave for later


def write_storage_sink(out: str | Path, sink: StorageSink, dest: str | Path | None = None) -> int:
    """Write the whole folder; returns the last checkpoint ts."""
    last = 0
    for ts in storage_sink_flushes(out, sink, dest):
        last = ts
    return last


__all__ = ["STORAGE_DIR", "StorageSink", "storage_sink_flushes", "write_storage_sink"]
