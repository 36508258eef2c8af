"""The Kafka messages a TiCDC changefeed (open protocol or canal-json) publishes for a simulated workload.

Input: a simulation run with ``ticdc_changelog=True`` (its ``ticdc/changes.pkl`` and
``expected/index.json``). Output, streamed: :class:`KafkaMessage` (topic, partition, key, value), in order
per partition, as TiCDC's MQ sink would send them (reference ticdc-protocols.md §1, §1.4, §5):

- the changefeed starts at the initial snapshot ts (the first scan's checkpoint): earlier changes (the
  initial CREATE TABLEs) are not published;
- row events go to the partition the dispatcher picks and are batched per partition up to
  ``max_batch_size`` events / ``max_message_bytes`` (open_protocol_encoder.go); values are compressed
  with ``compression``;
- a DDL is one message broadcast to every partition, after every row committed before it;
- resolved events (value ``u64be(0)``) are broadcast to every partition after all rows at or below their
  ts; they are sent at each scan's resolved ts (so a consumer reaching the last one holds the simulator's
  expected state) and every ``resolved_every`` rows in between, never past the last scan's resolved ts;
- ``restarts`` times, at a resolved point, the producer "restarts": every row sent since the previous
  resolved event is sent again (same partitions, after the originals): at-least-once duplicates;
- ``late_restarts`` times, the changefeed restarts after a resolved event: a restarted owner or processor
  resumes from the checkpoint it persisted, the resolved point two before, and sends every row and DDL
  since it again (same partitions), then that older checkpoint as a resolved event (lower than what the
  partitions carry). Every other such restart happens after the resolved event reached only some
  partitions; the restarted changefeed sends it to all of them once it caught up;
- ``from_creation``: the changefeed starts before the databases exist (CREATE DATABASE / TABLE events).

With ``protocol="canal-json"`` (and the TiDB extension, as tidelake needs it): one message per row change
(``canal_json_row_event_encoder.go``, the storage simulator's encoder without a terminator), a DDL to
partition 0 only, and resolved points as ``TIDB_WATERMARK`` messages with ``_tidb.watermarkTs``.

Memory stays bounded: the pending batches and the rows since the last resolved event.
"""

from __future__ import annotations

import gc
import json
import random
import struct
import time
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec.schema import TableSchema
from backfill.sources.ticdc.compression import check_codec, compress
from backfill.sources.ticdc.open_protocol import BATCH_VERSION, RESOLVED, frame
from tidbsim.changelog import CHANGELOG_PATH, ColumnarChunk, RowGroup, read_changelog, read_changelog_columnar
from tidbsim.dispatch import Dispatcher
from tidbsim.storage_codec import CanalJsonEncoder
from tidbsim.ticdc_open import (
    FLAVORS,
    RowValueEncoder,
    _row_key_names,
    arrow_bytes,
    ddl_value_json,
    go_value,
    handle_columns,
    key_json,
)
from tidelake.conventions import ROWID

MAX_RECORD_OVERHEAD = 5 * 1048 + 29  # sarama's maximum record overhead, as TiCDC counts it


@dataclass(frozen=True)
class Changefeed:
    """A changefeed's sink settings (TiCDC's names): where and how the open protocol is published."""

    topic: str = "tidelake-open"
    partitions: int = 3
    dispatcher: str = "default"
    columns: tuple[str, ...] = ()
    max_batch_size: int = 16
    max_message_bytes: int = 10 * 1024 * 1024
    compression: str = "none"
    output_old_value: bool = True
    flavor: str = "tiflow"
    time_zone: str = "UTC"
    resolved_every: int = 64
    restarts: int = 1
    late_restarts: int = 0
    from_creation: bool = False
    start_ts: int | None = (
        None  # `--start-ts` (e.g. a Dumpling export's TSO); None: the first scan's checkpoint
    )
    seed: int = 0
    protocol: str = "open-protocol"  # or canal-json (enable-tidb-extension=true)

    def __post_init__(self) -> None:
        check_codec(self.compression)
        if self.protocol not in ("open-protocol", "canal-json"):
            raise ValueError(f"protocol must be open-protocol or canal-json, got {self.protocol!r}")
        Dispatcher(self.dispatcher, self.columns, self.flavor)
        if self.flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {FLAVORS}, got {self.flavor!r}")
        for name in ("partitions", "max_batch_size", "resolved_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


@dataclass(slots=True)  # not frozen: a frozen dataclass costs 3x to build, once per canal-json row event
class KafkaMessage:
    topic: str
    partition: int
    key: bytes
    value: bytes
    row_events: int = field(default=0, compare=False)  # what it carries (a bench counts them)


_BATCH_HEADER = struct.pack(">Q", BATCH_VERSION)


class _Producer:
    """Per-partition batches of one topic (TiCDC's open-protocol batch encoder, one per partition). Row
    events come framed (each key and value after its u64be length, as :func:`frame` writes them)."""

    def __init__(self, feed: Changefeed) -> None:
        self.feed = feed
        self.keys: list[list[bytes]] = [[] for _ in range(feed.partitions)]
        self.values: list[list[bytes]] = [[] for _ in range(feed.partitions)]
        self.sizes = [0] * feed.partitions

    def add(self, partition: int, key: bytes, value: bytes) -> KafkaMessage | None:
        """Add a row event (its framed key and value) to its partition's batch; the batch it closes, if any."""
        keys = self.keys[partition]
        size = len(key) + len(value)
        full = None
        if keys and (
            len(keys) >= self.feed.max_batch_size
            or self.sizes[partition] + size + 8 + MAX_RECORD_OVERHEAD > self.feed.max_message_bytes
        ):
            full = self._flush_one(partition)
            keys = self.keys[partition]
        keys.append(key)
        self.values[partition].append(value)
        self.sizes[partition] += size
        return full

    def _flush_one(self, partition: int) -> KafkaMessage:
        keys, values = self.keys[partition], self.values[partition]
        self.keys[partition], self.values[partition] = [], []
        self.sizes[partition] = 0
        return KafkaMessage(
            self.feed.topic, partition, _BATCH_HEADER + b"".join(keys), b"".join(values), len(keys)
        )

    def flush(self) -> Iterator[KafkaMessage]:
        for p in range(self.feed.partitions):
            if self.keys[p]:
                yield self._flush_one(p)

    def broadcast(
        self, key: bytes, value: bytes, partitions: Iterable[int] | None = None
    ) -> Iterator[KafkaMessage]:
        yield from self.flush()
        for p in range(self.feed.partitions) if partitions is None else partitions:
            yield KafkaMessage(self.feed.topic, p, frame([key], version=True), frame([value], version=False))


class _CanalProducer(_Producer):
    """canal-json: every message alone, no framing."""

    def add(self, partition: int, key: bytes, value: bytes) -> KafkaMessage | None:
        return KafkaMessage(self.feed.topic, partition, key, value, 1)

    def broadcast(
        self, key: bytes, value: bytes, partitions: Iterable[int] | None = None
    ) -> Iterator[KafkaMessage]:
        for p in range(self.feed.partitions) if partitions is None else partitions:
            yield KafkaMessage(self.feed.topic, p, key, value)


_CANAL_DDL_TYPES = (("CREATE TABLE", "CREATE"), ("DROP TABLE", "ERASE"), ("TRUNCATE", "TRUNCATE"),
                    ("RENAME", "RENAME"), ("ALTER", "ALTER"))  # fmt: skip


def _canal_head(db: str, table: str, kind: str, is_ddl: bool, ts_ms: int, sql: str) -> str:
    return (
        '{"id":0,"database":' + json.dumps(db) + ',"table":' + json.dumps(table) + ',"pkNames":null,"isDdl":'
        + ("true" if is_ddl else "false") + ',"type":"' + kind + '","es":' + str(ts_ms) + ',"ts":' + str(ts_ms)
        + ',"sql":' + json.dumps(sql) + ',"sqlType":null,"mysqlType":null,"data":null,"old":null'
    )  # fmt: skip


def canal_ddl_value(commit_ts: int, db: str, table: str, query: str) -> bytes:
    """A canal-json DDL message with the TiDB extension (``newJSONMessageForDDL``)."""
    upper = query.lstrip().upper()
    kind = next((k for prefix, k in _CANAL_DDL_TYPES if upper.startswith(prefix)), "QUERY")
    head = _canal_head(db, table, kind, True, commit_ts >> 18, query)
    return (head + f',"_tidb":{{"commitTs":{commit_ts}}}}}').encode()


def canal_watermark_value(ts: int) -> bytes:
    """A canal-json ``TIDB_WATERMARK`` message (``newJSONMessageForResolvedTs``)."""
    return (
        _canal_head("", "", "TIDB_WATERMARK", False, ts >> 18, "") + f',"_tidb":{{"watermarkTs":{ts}}}}}'
    ).encode()


def _index(out: Path) -> list[dict[str, Any]]:
    doc = json.loads((out / "expected" / "index.json").read_text(encoding="utf-8"))
    return list(doc["scans"])


def open_protocol_messages(out: str | Path, feed: Changefeed) -> Iterator[KafkaMessage]:
    """Every message the changefeed publishes for the simulation under ``out``, streamed (in
    ``feed.protocol``: open protocol, or canal-json; see :func:`changefeed_messages`)."""
    return changefeed_messages(out, feed)


def _start_ts(feed: Changefeed, scans: list[dict[str, Any]]) -> int:
    """Where the changefeed starts: ``--start-ts``, else before the databases exist or at the first
    scan's checkpoint."""
    if feed.start_ts is not None:
        return feed.start_ts
    return 0 if feed.from_creation else int(scans[0]["checkpoint_ts"])


def _new_encoder(feed: Changefeed, schema: TableSchema, db: str) -> CanalJsonEncoder | RowValueEncoder:
    if feed.protocol == "canal-json":
        return CanalJsonEncoder(schema, db, terminator="", time_zone=feed.time_zone)
    return RowValueEncoder(
        schema, flavor=feed.flavor, time_zone=feed.time_zone, output_old_value=feed.output_old_value
    )


class _Changefeed:
    """One changefeed's run over a changelog: what it has sent, to send again when its producer or
    itself restarts (the module docstring says when)."""

    def __init__(self, feed: Changefeed, start_ts: int, partitions: Collection[int] | None = None) -> None:
        self.feed = feed
        self.partitions = None if partitions is None else frozenset(partitions)
        self.rng = random.Random(feed.seed)
        self.dispatcher = Dispatcher(feed.dispatcher, feed.columns, feed.flavor)
        self.canal = feed.protocol == "canal-json"
        self.producer = _CanalProducer(feed) if self.canal else _Producer(feed)
        self.schemas: dict[Any, TableSchema] = {}
        self.encoders: dict[Any, CanalJsonEncoder | RowValueEncoder] = {}
        self.table_partitions: dict[tuple[str, str], int] = {}  # rules that hash the table name only
        self.since_resolved: list[tuple[int, bytes, bytes]] = []
        # every change since the resolved point two before the last: (ts, partitions or None for a row, key, value)
        self.history: list[tuple[int, tuple[int, ...] | int, bytes, bytes]] = []
        self.points: list[int] = [start_ts]  # the resolved points sent so far
        self.restarts_left = feed.restarts
        self.late_left = feed.late_restarts
        self.rows_since = 0
        self.last_resolved = 0

    def send_resolved(self, ts: int, partitions: Iterable[int] | None = None) -> Iterator[KafkaMessage]:
        if self.canal:
            yield from self.producer.broadcast(b"", canal_watermark_value(ts), partitions)
        else:
            yield from self.producer.broadcast(key_json(ts, "", "", type_=RESOLVED), b"", partitions)

    def resolved(self, ts: int) -> Iterator[KafkaMessage]:
        """The resolved event at ``ts``, after a producer restart or followed by a late restart (the rng
        decides)."""
        if ts <= self.last_resolved:
            return
        yield from self._maybe_restart_producer()
        self.since_resolved.clear()
        self.rows_since = 0
        self.last_resolved = ts
        feed = self.feed
        late = bool(self.late_left and self.history and self.rng.random() < 0.5)
        some = late and (feed.late_restarts - self.late_left) % 2 == 1 and feed.partitions > 1
        reached = (
            sorted(self.rng.sample(range(feed.partitions), self.rng.randint(1, feed.partitions - 1)))
            if some
            else None
        )
        yield from self.send_resolved(ts, reached)
        self.points.append(ts)
        older = self.points[max(0, len(self.points) - 3)]  # the checkpoint a restart resumes from
        del self.history[: sum(1 for h in self.history if h[0] <= older)]  # what it sends again
        if late:
            yield from self._late_restart(ts, older, reached)

    def _maybe_restart_producer(self) -> Iterator[KafkaMessage]:
        if self.restarts_left and self.since_resolved and self.rng.random() < 0.5:
            self.restarts_left -= 1
            yield from self.producer.flush()
            for p, k, v in self.since_resolved:  # the restarted producer sends them again
                if (full := self.producer.add(p, k, v)) is not None:
                    yield full

    def _late_restart(self, ts: int, older: int, reached: list[int] | None) -> Iterator[KafkaMessage]:
        """Restarted from the checkpoint it persisted (``older``), older than what it had sent."""
        self.late_left -= 1
        yield from self.producer.flush()
        for _, where, k, v in self.history:
            if isinstance(where, int):
                if (full := self.producer.add(where, k, v)) is not None:
                    yield full
            else:
                yield from self.producer.broadcast(k, v, where)
        yield from self.producer.flush()
        if older:
            yield from self.send_resolved(older)  # its checkpoint, below the partitions' watermarks
        if reached is not None:
            yield from self.send_resolved(ts)  # caught up: the resolved ts reaches every partition

    def schema(self, skey: Any, db: str, info: Any) -> None:
        self.schemas[skey] = TableSchema.from_table_info(info, schema_name=db)
        self.encoders.pop(skey, None)

    def ddl(self, rec: tuple[Any, ...]) -> Iterator[KafkaMessage]:
        _, fts, db, table, query, action, _info = rec
        feed = self.feed
        to: tuple[int, ...] = (0,)  # canal-json: partition 0 only (mq_ddl_sink.go)
        if self.canal:  # after every row before it
            key, value = b"", canal_ddl_value(fts, db, table, query)
        else:
            value = compress(feed.compression, ddl_value_json(query, action))
            key, to = key_json(fts, db, table, type_=2, flavor=feed.flavor), tuple(range(feed.partitions))
        yield from self.producer.broadcast(key, value, to)
        self.history.append((fts, to, key, value))
        self.since_resolved.clear()

    def encode(self, chunk: ColumnarChunk, start_ts: int) -> list[tuple[int, bytes, bytes] | None]:
        """Partition, key and value of each row record after ``start_ts`` (None for the other records),
        the values of a table version's rows written together by Arrow (``RowValueEncoder.arrow_values``,
        ``CanalJsonEncoder.arrow_lines``); schema records are taken in on the way."""
        records = chunk.records
        out: list[tuple[int, bytes, bytes] | None] = [None] * len(records)
        by_group: dict[int, list[int]] = {}
        for i, rec in enumerate(records):
            if rec[0] == "schema":
                self.schema(rec[1], rec[2], rec[3])
            elif rec[0] == "row" and rec[1] > start_ts:
                ref = rec[6] if rec[6] is not None else rec[7]
                by_group.setdefault(ref[0], []).append(i)
        feed, mine = self.feed, self.partitions
        for g, every in by_group.items():
            group = chunk.groups[g]
            rows = [records[i] for i in every]
            partitions = self._partitions(group, rows)
            at = every
            if mine is not None:
                at = []
                for i, partition in zip(every, partitions, strict=True):
                    if partition in mine:
                        at.append(i)
                    else:  # another process publishes it: what it holds is not sent
                        out[i] = (partition, b"", b"")
                if not at:
                    continue
                partitions = [p for p in partitions if p in mine]
                rows = [records[i] for i in at]
            new = [-1 if r[6] is None else r[6][1] for r in rows]
            old = [-1 if r[7] is None else r[7][1] for r in rows]
            if any(r[7] is not None and r[7][0] != g for r in rows):
                raise ValueError(
                    f"change log: an update's old and new rows of {group.skey} differ in columns"
                )
            encoder = self.encoders.get(group.skey)
            if encoder is None:
                encoder = self.encoders[group.skey] = _new_encoder(feed, self.schemas[group.skey], rows[0][2])
            if isinstance(encoder, CanalJsonEncoder):
                texts = encoder.arrow_lines(group, [r[1] for r in rows], new, old, build_ms=0)
                keys = [b""] * len(rows)
            else:
                if not feed.output_old_value:
                    old = [o if n < 0 else -1 for n, o in zip(new, old, strict=True)]
                texts = encoder.arrow_values(group, new, old)
                keys = self._keys(group, rows, new, old)
            if isinstance(encoder, CanalJsonEncoder):
                values = arrow_bytes(texts)
                if feed.compression != "none":
                    values = [compress(feed.compression, v) for v in values]
            elif feed.compression != "none":
                values = [_framed(compress(feed.compression, v)) for v in arrow_bytes(texts)]
            else:
                values = arrow_bytes(framed(texts))
            for i, partition, key, value in zip(at, partitions, keys, values, strict=True):
                out[i] = (partition, key, value)
        return out

    def _partitions(self, group: RowGroup, rows: list[tuple[Any, ...]]) -> list[int]:
        """The partition of each row record (of ``group``)."""
        rule = self.dispatcher.rule
        if rule == "ts":
            return [r[1] % self.feed.partitions for r in rows]
        schema = self.schemas[group.skey]
        if rule in ("default", "table"):  # the table's name only
            tables = {(r[2], r[3]) for r in rows}
            if len(tables) == 1:
                db, table = tables.pop()
                return [self._partition(schema, db, table, 0, {})] * len(rows)
            return [self._partition(schema, r[2], r[3], r[1], {}) for r in rows]
        names = [n for n in {*handle_columns(schema), *self.feed.columns} if n in group.names]
        taken = pa.array([r[6][1] if r[6] is not None else r[7][1] for r in rows])
        columns = {n: group.python_column(group.names.index(n), taken) for n in names}
        return [
            self._partition(schema, r[2], r[3], r[1], {n: values[k] for n, values in columns.items()})
            for k, r in enumerate(rows)
        ]

    def _keys(
        self, group: RowGroup, rows: list[tuple[Any, ...]], new: list[int], old: list[int]
    ) -> list[bytes]:
        """The open-protocol keys of row records (of ``group``; ``new``/``old``: their rows in it), framed."""
        schema = self.schemas[group.skey]
        name = (
            ROWID if schema.pk_kind == "rowid" else schema.pk_columns[0] if schema.pk_kind == "int" else None
        )
        if name is None or name not in group.names:
            if schema.pk_kind == "int":
                raise KeyError(name)
            row_ids: list[Any] = [None] * len(rows)
        else:
            taken = pa.array([n if n >= 0 else o for n, o in zip(new, old, strict=True)])
            row_ids = group.python_column(group.names.index(name), taken)
        flavor = self.feed.flavor
        if flavor != "tiflow" or not all(r[2] and r[3] for r in rows):
            return [
                _framed(key_json(r[1], r[2], r[3], flavor=flavor, row_id=rid, physical_id=r[5]))
                for r, rid in zip(rows, row_ids, strict=True)
            ]
        names = {(r[2], r[3]) for r in rows}
        ptns = {r[5] for r in rows}
        text = pc.binary_join_element_wise(
            '{"ts":',
            pa.array([r[1] for r in rows], pa.uint64()).cast(pa.string()),
            _row_key_names(*names.pop())
            if len(names) == 1
            else pa.array([_row_key_names(r[2], r[3]) for r in rows], pa.string()),
            pa.array([',"rid":' + str(rid) if rid else "" for rid in row_ids], pa.string())
            if any(row_ids)
            else "",
            ("" if None in ptns else ',"ptn":' + str(next(iter(ptns))))
            if len(ptns) == 1
            else pa.array([',"ptn":' + str(r[5]) if r[5] is not None else "" for r in rows], pa.string()),
            ',"t":1}',
            "",
        )
        return arrow_bytes(framed(text))

    def row(self, cts: int, partition: int, key: bytes, value: bytes) -> KafkaMessage | None:
        """Send a row event (:meth:`encode` wrote it); the batch it closes, if any. What is sent again
        is kept only while a restart is to come."""
        if self.restarts_left:
            self.since_resolved.append((partition, key, value))
        if self.late_left:
            self.history.append((cts, partition, key, value))
        self.rows_since += 1
        return self.producer.add(partition, key, value)

    def _partition(self, schema: TableSchema, db: str, table: str, cts: int, row: dict[str, Any]) -> int:
        rule = self.dispatcher.rule
        if rule == "ts":
            return cts % self.feed.partitions
        if rule in ("default", "table"):  # the table's name only: once per table
            known = self.table_partitions.get((db, table))
            if known is None:
                known = self.dispatcher.partition(self.feed.partitions, db, table, cts, {}, ())
                self.table_partitions[(db, table)] = known
            return known
        handle = handle_columns(schema)
        names = set(handle) | set(self.feed.columns)
        values = {
            n: go_value(schema.by_name[n], row.get(n), self.feed.time_zone)
            for n in names
            if n in schema.by_name
        }
        return self.dispatcher.partition(self.feed.partitions, db, table, cts, values, handle)


def framed(texts: pa.Array) -> pa.Array:
    """Each value after its u64be length (a piece of :func:`frame`'s batch)."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + len(texts) + 1]
    prefix = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(8), len(texts), [None, pa.py_buffer(np.diff(offsets).astype(">u8").tobytes())]
    )
    return pc.binary_join_element_wise(prefix.cast(pa.binary()), texts.cast(pa.binary()), b"")


def _framed(value: bytes) -> bytes:
    return _LENGTH.pack(len(value)) + value


_LENGTH = struct.Struct(">Q")


def changefeed_messages(
    out: str | Path, feed: Changefeed, partitions: Collection[int] | None = None
) -> Iterator[KafkaMessage]:
    """Every message the changefeed publishes for the simulation under ``out``, streamed; with
    ``partitions``, only those to these partitions (the row values of the others are not written: each of
    several processes publishes its own partitions, :func:`publish_changefeed`)."""
    if partitions is None:
        yield from _changefeed_messages(out, feed, None)
    else:
        yield from (m for m in _changefeed_messages(out, feed, partitions) if m.partition in partitions)


def _changefeed_messages(
    out: str | Path, feed: Changefeed, partitions: Collection[int] | None
) -> Iterator[KafkaMessage]:
    out = Path(out)
    scans = _index(out)
    if not scans:
        return
    start_ts = _start_ts(feed, scans)
    marks = sorted({s["resolved_ts"] for s in scans if s["resolved_ts"] >= start_ts})
    final = marks[-1]
    run = _Changefeed(feed, start_ts, partitions)
    last_ts = start_ts

    def resolved_below(ts: int) -> Iterator[KafkaMessage]:
        """The scans' resolved points below ``ts`` not yet passed, then one every ``resolved_every`` rows."""
        while marks and marks[0] < ts:
            mark = marks.pop(0)
            if mark >= last_ts:
                yield from run.resolved(mark)

    for chunk in read_changelog_columnar(out / CHANGELOG_PATH):
        for rec, encoded in zip(chunk.records, run.encode(chunk, start_ts), strict=True):
            if rec[0] == "schema":
                continue
            ts = rec[1]
            if ts <= start_ts:
                continue
            if ts > last_ts:  # every change at or below last_ts has been sent
                if marks and marks[0] < ts:
                    yield from resolved_below(ts)
                if run.rows_since >= feed.resolved_every and last_ts <= final:
                    yield from run.resolved(last_ts)
                last_ts = ts
            if encoded is None:
                yield from run.ddl(rec)
            elif (full := run.row(ts, *encoded)) is not None:
                yield full
    yield from resolved_below(final + 1)  # every scan's resolved point left
    yield from run.producer.flush()


def publish_changefeed(
    out: str | Path, feed: Changefeed, bootstrap: str, *, processes: int = 1, timeout_s: float = 60.0
) -> tuple[dict[tuple[str, int], int], int]:
    """:func:`publish` the changefeed's messages for the simulation under ``out`` (creating its topic with
    ``feed.partitions`` partitions), in ``processes`` processes that each write and send the messages of
    every ``processes``-th partition (one partition's order is one process's). Returns the messages sent
    per (topic, partition) and the row events they carry."""
    if processes <= 1:
        return _publish_share(str(out), feed, bootstrap, None, timeout_s)
    import multiprocessing

    _create_topic(bootstrap, feed.topic, feed.partitions, timeout_s)
    shares = partition_shares(out, feed, processes)
    with multiprocessing.get_context("fork").Pool(len(shares)) as pool:
        results = pool.starmap(
            _publish_share, [(str(out), feed, bootstrap, share, timeout_s) for share in shares]
        )
    sent: dict[tuple[str, int], int] = {}
    for share_sent, _ in results:
        sent.update(share_sent)
    return sent, sum(rows for _, rows in results)


SAMPLED_ROWS = 50_000
"""Row changes :func:`partition_shares` weighs the partitions by."""


def partition_shares(out: str | Path, feed: Changefeed, processes: int) -> list[tuple[int, ...]]:
    """The partitions each of ``processes`` processes publishes: about the same number of values each to
    write, as the first ``SAMPLED_ROWS`` row changes after the start spread them (a dispatcher by table
    puts a wide table's rows in one partition), the heaviest partition first to the lightest share."""
    scans = _index(Path(out))
    start_ts = _start_ts(feed, scans) if scans else 0
    run = _Changefeed(feed, start_ts)
    weights = [0] * feed.partitions
    sampled = 0
    for rec in read_changelog(Path(out) / CHANGELOG_PATH):
        if rec[0] == "schema":
            run.schema(rec[1], rec[2], rec[3])
        elif rec[0] == "row" and rec[1] > start_ts:
            row = rec[6] if rec[6] is not None else rec[7]
            weights[run._partition(run.schemas[rec[4]], rec[2], rec[3], rec[1], row)] += len(row)
            sampled += 1
            if sampled >= SAMPLED_ROWS:
                break
    loads = [0] * min(processes, feed.partitions)
    shares: list[list[int]] = [[] for _ in loads]
    for p in sorted(range(feed.partitions), key=lambda p: -weights[p]):
        lightest = loads.index(min(loads))
        shares[lightest].append(p)
        loads[lightest] += weights[p] or 1
    return [tuple(sorted(share)) for share in shares]


def _publish_share(
    out: str, feed: Changefeed, bootstrap: str, partitions: tuple[int, ...] | None, timeout_s: float
) -> tuple[dict[tuple[str, int], int], int]:
    rows = [0]
    messages = _counted(changefeed_messages(out, feed, partitions), rows)
    collecting = gc.isenabled()
    gc.disable()  # what the publisher holds is acyclic; the collector's passes over it cost ~15%
    try:
        return publish(messages, bootstrap, partitions=feed.partitions, timeout_s=timeout_s), rows[0]
    finally:
        if collecting:
            gc.enable()


def _counted(messages: Iterable[KafkaMessage], rows: list[int]) -> Iterator[KafkaMessage]:
    for m in messages:
        rows[0] += m.row_events
        yield m


def _await_leaders(producer: Any, topic: str, timeout_s: float) -> None:
    """Wait until the producer's own metadata shows ``topic`` with a leader for every partition: a
    just-created topic can be reported missing for a moment, and its first messages would wait or be
    resent (:func:`publish` says why that is safe only without the idempotent producer)."""
    deadline = time.monotonic() + timeout_s
    while True:
        meta = producer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        parts = meta.partitions.values() if meta is not None and meta.error is None else ()
        if parts and all(p.error is None and p.leader >= 0 for p in parts):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic!r} has no leader for every partition after {timeout_s:.0f} s")
        time.sleep(0.1)


def publish(
    messages: Iterable[KafkaMessage],
    bootstrap: str,
    *,
    partitions: int,
    kafka_compression: str = "none",
    timeout_s: float = 60.0,
) -> dict[tuple[str, int], int]:
    """Send ``messages`` to the broker at ``bootstrap`` in their order, creating a missing topic with
    ``partitions`` partitions. ``kafka_compression`` is Kafka's own record-batch codec (gzip, snappy, lz4,
    zstd), which consumers undo; the open protocol's value compression is the changefeed's
    (``Changefeed.compression``). Returns the messages sent per (topic, partition), once the brokers show
    every one of them (:func:`_await_written`). Needs confluent-kafka (the dev extra).

    One request in flight per broker keeps each partition in the order TiCDC sent. Not the idempotent
    producer: when librdkafka loses a just-created topic's partitions for a moment it restarts their
    sequence numbers, and the broker acknowledges the resent first messages as duplicates without writing
    them (confluentinc/librdkafka#3712; seen here as a partition's first message missing)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    conf = {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout_s * 1000)}
    admin = AdminClient(conf)
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    producer = Producer(
        {
            **conf,
            "enable.idempotence": False,
            "acks": "all",
            "max.in.flight.requests.per.connection": 1,
            "linger.ms": 5,
            "message.max.bytes": 16 * 1024 * 1024,
            "compression.type": kafka_compression,
            "on_delivery": delivered,
            "delivery.report.only.error": True,  # no Python call per message delivered
        }
    )
    counts: dict[str, dict[int, int]] = {}  # per topic, per partition
    before: dict[tuple[str, int], int] = {}  # each partition's end offset before this publish
    produce = producer.produce
    topic: str | None = None
    sent_to: dict[int, int] = {}
    for n, m in enumerate(messages):
        if m.topic != topic:
            topic = m.topic
            if topic not in counts:
                counts[topic] = {}
                _create_topic(bootstrap, topic, partitions, timeout_s, admin)
                _await_leaders(producer, topic, timeout_s)
                before.update(_end_offsets(bootstrap, topic, time.monotonic() + timeout_s))
            sent_to = counts[topic]
        try:
            produce(topic, m.value, m.key, m.partition)
        except BufferError:  # the producer's queue is full: wait for room
            while True:
                producer.poll(0.1)
                try:
                    produce(topic, m.value, m.key, m.partition)
                    break
                except BufferError:
                    pass
        sent_to[m.partition] = sent_to.get(m.partition, 0) + 1
        if n % 1024 == 0:
            producer.poll(0)
    sent = {(t, p): k for t, per in counts.items() for p, k in per.items()}
    left = producer.flush(timeout_s)
    if failures or left:
        raise RuntimeError(f"publishing to {bootstrap} failed: {failures[:3]} ({left} not delivered)")
    _await_written(bootstrap, sent, before, timeout_s)
    return sent


def _create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float, admin: Any = None) -> None:
    """Create ``topic`` with ``partitions`` partitions unless it exists."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    if admin is None:
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout_s * 1000)})
    if topic not in admin.list_topics(timeout=timeout_s).topics:
        futures = admin.create_topics([NewTopic(topic, partitions, 1)])
        try:
            futures[topic].result(timeout_s)
        except KafkaException as e:  # created meanwhile by someone else: fine
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise


def _end_offsets(bootstrap: str, topic: str, deadline: float) -> dict[tuple[str, int], int]:
    """Each partition's end offset (high watermark) of ``topic``, asked again while a just-created topic
    is still settling on the broker (it can answer "not leader" for a moment)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tidelake-publish"})
    try:
        while True:
            try:
                meta = consumer.list_topics(topic, timeout=10).topics[topic]
                return {
                    (topic, p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in meta.partitions
                }
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def _await_written(
    bootstrap: str, sent: dict[tuple[str, int], int], before: dict[tuple[str, int], int], timeout_s: float
) -> None:
    """Wait until every partition's end offset has grown by the messages acknowledged to it (a loaded
    broker may answer a moment behind its writes); fail, naming the partitions, if it does not."""
    deadline = time.monotonic() + timeout_s
    while True:
        ends: dict[tuple[str, int], int] = {}
        for topic in {t for t, _ in sent}:
            ends.update(_end_offsets(bootstrap, topic, deadline))
        short = {tp: (ends.get(tp, 0) - before.get(tp, 0), n) for tp, n in sent.items()}
        short = {tp: got_want for tp, got_want in short.items() if got_want[0] != got_want[1]}
        if not short:
            return
        if time.monotonic() > deadline or any(got > want for got, want in short.values()):
            listed = ", ".join(f"{t}[{p}] {got} of {want}" for (t, p), (got, want) in sorted(short.items()))
            raise RuntimeError(f"publishing to {bootstrap}: the brokers hold other than was sent: {listed}")
        time.sleep(0.2)


__all__ = [
    "Changefeed",
    "KafkaMessage",
    "canal_ddl_value",
    "canal_watermark_value",
    "changefeed_messages",
    "open_protocol_messages",
    "partition_shares",
    "publish",
    "publish_changefeed",
]


def write_schema_folder(out: str | Path, dest: str | Path, *, from_creation: bool = False) -> Path:
    """The `[source.kafka] schema` folder for the simulation under ``out``: the first capture's
    tables.jsonl (the TableInfo at the changefeed's start) and every DDL job of every capture.
    ``from_creation`` (a changefeed started before the databases exist): no table at first, and the
    CREATE DATABASE / CREATE TABLE jobs of the initial tables too."""
    from tidbsim.expected import load_index

    out, dest = Path(out), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    scans = load_index(out)
    first = out / "scans" / scans[0]["scan_id"] / "schema"
    jobs: dict[int, str] = {}
    if from_creation:
        (dest / "tables.jsonl").write_text("")
        ddls = (r for chunk in read_changelog_columnar(out / CHANGELOG_PATH) for r in chunk.records)
        for rec in ddls:  # rows not turned into Python values: only the DDLs are read
            if rec[0] == "ddl" and rec[1] <= scans[0]["checkpoint_ts"]:
                job_id = (1 << 40) + len(jobs)  # apart from the captures' job ids
                jobs[job_id] = json.dumps(_creation_job(job_id, *rec[1:]))
    else:
        (dest / "tables.jsonl").write_bytes((first / "tables.jsonl").read_bytes())
    for scan in scans:
        path = out / "scans" / scan["scan_id"] / "schema" / "ddl_jobs.jsonl"
        for line in path.read_text().splitlines() if path.exists() else []:
            jobs.setdefault(json.loads(line)["id"], line)
    (dest / "ddl_jobs.jsonl").write_text("".join(f"{line}\n" for line in jobs.values()))
    return dest


def _creation_job(
    job_id: int, finished_ts: int, db: str, table: str, query: str, action: int, info: dict[str, Any] | None
) -> dict[str, Any]:
    """The done job (TiDB ``model.Job`` fields the readers use) of a CREATE DATABASE / TABLE."""
    return {
        "id": job_id,
        "type": action,
        "schema_name": db,
        "table_name": table,
        "table_id": info["id"] if info is not None else 0,
        "state": 6,  # synced
        "query": query,
        "binlog": {"TableInfo": info, "FinishedTS": finished_ts, "MultipleTableInfos": None},
    }
