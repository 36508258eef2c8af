"""TiCDC open protocol (seed 000; shared/reference/ticdc-protocols.md §1): Kafka messages -> events.

One Kafka message is a batch. Key = ``u64be(1)`` then repeated ``[u64be(len) | key JSON]``; value = repeated
``[u64be(len) | value JSON]``; the i-th key pairs with the i-th value (tiflow
``pkg/sink/codec/open/open_protocol_{encoder,decoder}.go``, ticdc ``pkg/sink/codec/open/{encoder,decoder}.go``).
A key of the version alone is an empty batch. Key JSON ``{"ts","scm","tbl","rid","ptn","t","ohk","ccl"}``:
``t`` 1 row, 2 DDL, 3 resolved. A resolved event's value is ``u64be(0)``, an empty value. Row and DDL values
may be compressed (``large-message-handle-compression``: the value JSON only, never the framing).

:func:`decode_records` turns a batch of Kafka records (key, value, topic, partition, offset: what Spark's
Kafka source gives) into one Arrow table of events, in input order, with the value JSON of row events kept
as bytes for :mod:`backfill.sources.ticdc.open_rows` to type per table. Every framing, version, JSON or
decompression problem raises :class:`~tidelake.errors.InputError` naming topic, partition and offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.sources.ticdc.arrow_bytes import nulled_unless, one_array
from backfill.sources.ticdc.compression import check_codec, decompress
from tidelake.errors import InputError

BATCH_VERSION = 1
ROW, DDL, RESOLVED = 1, 2, 3
EVENT_TYPES = {ROW: "row", DDL: "ddl", RESOLVED: "resolved"}
_U64 = struct.Struct(">Q")
_KEY_FIELDS = frozenset({"ts", "scm", "tbl", "rid", "ptn", "t", "ohk", "ccl"})

EVENT_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("index", pa.int32()),  # position of the event inside its message's batch
        pa.field("type", pa.int8()),  # ROW, DDL, RESOLVED
        pa.field("ts", pa.uint64()),  # commit ts (row), finished ts (DDL), resolved ts
        pa.field("schema", pa.string()),
        pa.field("table", pa.string()),
        pa.field("row_id", pa.int64()),  # "rid": the int handle (tiflow only; null if absent)
        pa.field("physical_id", pa.int64()),  # "ptn": partition id of a partitioned table
        pa.field("handle_only", pa.bool_()),  # "ohk": only the handle-key columns are in the value
        pa.field("claim_check", pa.string()),  # "ccl": the full message is in external storage
        pa.field("value", pa.binary()),  # row events: the (decompressed) value JSON
        pa.field("ddl_query", pa.string()),
        pa.field("ddl_type", pa.int32()),  # TiDB model.ActionType
    ]
)


@dataclass(frozen=True, slots=True)
class Where:
    """Where a message sits in Kafka; every error names it."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"topic {self.topic!r} partition {self.partition} offset {self.offset}"

    def error(self, message: str, index: int | None = None) -> InputError:
        at = "" if index is None else f" event {index}"
        return InputError(f"open protocol: {self}{at}: {message}")


def event_line(
    offset: pa.Array | pa.ChunkedArray, index: pa.Array | pa.ChunkedArray | None = None
) -> pa.Array:
    """An event's place in its partition, one int64 that orders events: its message's offset times 2^20
    plus its position in the message's batch (canal-json messages hold one event: no `index`)."""
    line = pc.multiply(pc.cast(offset, pa.int64()), pa.scalar(1 << 20, pa.int64()))
    return line if index is None else pc.add(line, pc.cast(index, pa.int64()))


def split_frames(data: bytes, where: Where, what: str) -> list[bytes]:
    """``[u64be len | bytes]*`` -> the pieces; a length running past the end is an error."""
    out = []
    pos, n = 0, len(data)
    while pos < n:
        if pos + 8 > n:
            raise where.error(f"{what}: {n - pos} stray bytes at byte {pos}, a length needs 8")
        (size,) = _U64.unpack_from(data, pos)
        pos += 8
        if size > n - pos:
            raise where.error(f"{what}: length {size} at byte {pos - 8} runs past the end ({n} bytes)")
        out.append(data[pos : pos + size])
        pos += size
    return out


def split_message(key: bytes | None, value: bytes | None, where: Where) -> list[tuple[bytes, bytes]]:
    """One Kafka message -> its (key JSON, value bytes) pairs, checking version and pairing."""
    return list(zip(*_split(key, value, where), strict=True))


def _split(key: bytes | None, value: bytes | None, where: Where) -> tuple[list[bytes], list[bytes]]:
    """`split_message` as its keys and its values."""
    key = key or b""
    if len(key) < 8:
        raise where.error(f"key of {len(key)} bytes has no 8-byte version")
    (version,) = _U64.unpack_from(key, 0)
    if version != BATCH_VERSION:
        raise where.error(f"unsupported batch version {version} (expected {BATCH_VERSION})")
    keys = split_frames(key[8:] if isinstance(key, bytes) else bytes(key)[8:], where, "key")
    values = split_frames(bytes(value or b""), where, "value")
    if len(keys) != len(values):
        raise where.error(f"{len(keys)} keys but {len(values)} values in the batch")
    return keys, values


def parse_key(data: bytes | dict[str, Any], where: Where, index: int) -> dict[str, Any]:
    """Key JSON (or its parsed dict) -> dict, with its types checked (``ts`` u64, ``t`` 1..3, ...)."""
    if isinstance(data, dict):
        key = data
    else:
        try:
            key = msgspec.json.decode(data)
        except msgspec.DecodeError as e:
            raise where.error(f"key is not JSON: {e}", index) from None
    if not isinstance(key, dict):
        raise where.error(f"key JSON is {type(key).__name__}, not an object", index)
    ts, t = key.get("ts"), key.get("t")
    if not _is_uint(ts, 64):
        raise where.error(f"key has no unsigned 64-bit ts: {ts!r}", index)
    if t not in EVENT_TYPES or isinstance(t, bool):
        raise where.error(f"key type t={t!r} is not 1 (row), 2 (DDL) or 3 (resolved)", index)
    for name in ("scm", "tbl", "ccl"):
        if name in key and not isinstance(key[name], str):
            raise where.error(f"key field {name!r} is not a string: {key[name]!r}", index)
    for name in ("rid", "ptn"):
        if key.get(name) is not None and not _is_int(key[name]):
            raise where.error(f"key field {name!r} is not an integer: {key[name]!r}", index)
    if "ohk" in key and not isinstance(key["ohk"], bool):
        raise where.error(f"key field 'ohk' is not a boolean: {key['ohk']!r}", index)
    if t == ROW and not (key.get("scm") and key.get("tbl")):
        raise where.error("row event key without schema and table names", index)
    return key


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _is_uint(v: Any, bits: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < (1 << bits)


def parse_ddl_value(data: bytes, where: Where, index: int) -> tuple[str, int]:
    """DDL value JSON ``{"q": query, "t": action type}``."""
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as e:
        raise where.error(f"DDL value is not JSON: {e}", index) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("q"), str) or not _is_int(doc.get("t")):
        raise where.error(f"DDL value is not {{'q': query, 't': type}}: {data[:200]!r}", index)
    return doc["q"], doc["t"]


_KEY_NAMES = ("ts", "t", "scm", "tbl", "rid", "ptn", "ohk", "ccl")
# The Python types each key field may hold in a clean batch (None: absent; `ts` and `t` must be there).
_KEY_TYPES: dict[str, set[type]] = {
    "ts": {int},
    "t": {int},
    "scm": {str, type(None)},
    "tbl": {str, type(None)},
    "rid": {int, type(None)},
    "ptn": {int, type(None)},
    "ohk": {bool, type(None)},
    "ccl": {str, type(None)},
}


@dataclass
class _Framed:
    """The (key JSON, value bytes) pairs of a run of messages; where each message came from and how many
    events it holds (an event's place is worked out for an error only)."""

    keys: list[bytes]
    values: list[bytes] | pa.Array
    messages: list[Where]
    counts: list[int]
    keys_json: bytes | None = None  # the keys as one JSON array, when `_frames_at_once` framed them

    @property
    def wheres(self) -> list[Where]:
        """Per event its message's place."""
        return [w for w, c in zip(self.messages, self.counts, strict=True) for _ in range(c)]

    @property
    def indexes(self) -> list[int]:
        """Per event its position in its message's batch."""
        return [i for c in self.counts for i in range(c)]


def _framed(messages: Iterator[tuple[bytes | None, bytes | None, Where]]) -> _Framed:
    out = _Framed([], [], [], [])
    for key, value, where in messages:
        keys, values = _split(key, value, where)
        out.keys += keys
        out.values += values
        out.messages.append(where)
        out.counts.append(len(keys))
    return out


def _key_docs(framed: _Framed) -> list[Any]:
    """Every key JSON in one parse; a failure is located key by key (`parse_key` names it)."""
    keys = framed.keys
    try:
        joined = framed.keys_json if framed.keys_json is not None else b"[" + b",".join(keys) + b"]"
        docs = msgspec.json.decode(joined) if keys else []
        if len(docs) == len(keys) and not set(map(type, docs)) - {dict}:
            return docs
    except msgspec.DecodeError:
        pass
    return [parse_key(k, w, i) for k, w, i in zip(keys, framed.wheres, framed.indexes, strict=True)]


def _key_columns(docs: list[Any], framed: _Framed) -> dict[str, list[Any]]:
    """The key fields as columns, checked all at once; a batch that breaks a rule is checked key by key
    (`parse_key` names the key)."""
    get = dict.get
    cols: dict[str, list[Any]] = {name: list(map(get, docs, repeat(name))) for name in _KEY_NAMES}
    ts, types = cols["ts"], cols["t"]
    clean = (
        all(set(map(type, cols[name])) <= allowed for name, allowed in _KEY_TYPES.items())
        and set(types) <= {ROW, DDL, RESOLVED}
        and (not ts or (min(ts) >= 0 and max(ts) < 1 << 64))
        and all(s and t for s, t, ty in zip(cols["scm"], cols["tbl"], types, strict=True) if ty == ROW)
    )
    if not clean:
        for d, w, i in zip(docs, framed.wheres, framed.indexes, strict=True):
            parse_key(d, w, i)
    return cols


def _plain_value(kind: int, value: bytes, where: Where, index: int, codec: str) -> bytes:
    """A row or DDL event's value, decompressed; a resolved event's must be empty."""
    if kind == RESOLVED:
        if value:
            raise where.error(f"resolved event with a {len(value)}-byte value (expected none)", index)
        return b""
    try:
        plain = decompress(codec, value)
    except ValueError as e:
        raise where.error(f"value does not decompress ({e})", index) from None
    if kind == ROW and not plain:
        raise where.error("row event with an empty value", index)
    return plain


def _decode(framed: _Framed, codec: str) -> pa.Table:
    """Every key JSON in one parse and the columns by ``map``; the events that are no uncompressed row
    (DDL, resolved, or all with a codec) one by one."""
    n = len(framed.keys)
    cols = _key_columns(_key_docs(framed), framed)
    types = np.fromiter(cols["t"], np.int8, n)  # 1, 2 or 3: `_key_columns` checked them
    values = framed.values if isinstance(framed.values, pa.Array) else pa.array(framed.values, pa.binary())
    queries: list[str | None] = [None] * n
    ddl_types: list[int | None] = [None] * n
    counts = np.array(framed.counts, np.int64)
    message = np.repeat(np.arange(len(counts)), counts)  # per event its message
    index = np.arange(n) - (np.cumsum(counts) - counts)[message]  # per event its place in the batch
    if codec == "none":
        lengths = pc.binary_length(values).to_numpy(zero_copy_only=False)
        one_by_one = np.flatnonzero((types != ROW) | (lengths == 0)).tolist()
        row_values = nulled_unless(values, types == ROW)  # the values themselves, no copy of their bytes
    else:
        one_by_one = range(n)
        plain_rows: list[bytes | None] = [None] * n
    raw = values.to_pylist() if codec != "none" else None  # every value, else a few: read one by one
    for i in one_by_one:
        t, where, at = int(types[i]), framed.messages[message[i]], int(index[i])
        plain = _plain_value(t, raw[i] if raw is not None else values[i].as_py(), where, at, codec)
        if t == DDL:
            queries[i], ddl_types[i] = parse_ddl_value(plain, where, at)
        elif t == ROW and codec != "none":
            plain_rows[i] = plain
    if codec != "none":
        row_values = pa.array(plain_rows, pa.binary())
    ohk, ccl = pa.array(cols["ohk"], pa.bool_()), pa.array(cols["ccl"], pa.string())
    columns = {
        "topic": pa.array([w.topic for w in framed.messages], pa.string()).take(message),
        "partition": pa.array(np.array([w.partition for w in framed.messages], np.int32)[message]),
        "offset": pa.array(np.array([w.offset for w in framed.messages], np.int64)[message]),
        "index": pa.array(index.astype(np.int32)),
        "type": pa.array(types),
        "ts": pa.array(cols["ts"], pa.uint64()),
        "schema": pa.array(cols["scm"], pa.string()),
        "table": pa.array(cols["tbl"], pa.string()),
        "row_id": pa.array(cols["rid"], pa.int64()),
        "physical_id": pa.array(cols["ptn"], pa.int64()),
        "handle_only": pc.fill_null(ohk, False),
        "claim_check": pc.if_else(pc.equal(ccl, ""), pa.scalar(None, pa.string()), ccl),
        "value": row_values,
        "ddl_query": pa.array(queries, pa.string()),
        "ddl_type": pa.array(ddl_types, pa.int32()),
    }
    return pa.Table.from_pydict(columns, schema=EVENT_SCHEMA)


def decode_records(records: pa.Table | pa.RecordBatch, *, compression: str = "none") -> pa.Table:
    """Kafka records (columns key, value, topic, partition, offset) -> events (``EVENT_SCHEMA``), in order.

    An empty batch (a key of the version alone, value empty) yields no event.
    """
    check_codec(compression)
    topics = records.column("topic").to_pylist()
    partitions = records.column("partition").to_pylist()
    offsets = records.column("offset").to_pylist()
    wheres = list(map(Where, topics, partitions, offsets))
    framed = _frames_at_once(records.column("key"), records.column("value"), wheres)
    if framed is None:  # some message is not framed as it should be: `_split` names it
        keys, values = records.column("key").to_pylist(), records.column("value").to_pylist()
        framed = _framed(zip(keys, values, wheres, strict=True))
    return _decode(framed, compression)


def _frames_at_once(
    keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray, wheres: list[Where]
) -> _Framed | None:
    """The frames of a batch of messages found by numpy, all messages a step at a time (a step per event
    of the largest batch), with no Python object per event but its key's bytes: the value frames become
    one Arrow array cut from the message bytes, the key frames one JSON array for one parse (the length
    prefixes turned into blanks and commas). None when any message breaks the framing rules (`_split`
    names it)."""
    key_frames = _frame_spans(keys, version=True)
    value_frames = _frame_spans(values, version=False)
    if key_frames is None or value_frames is None:
        return None
    (key_data, key_bounds, key_starts, key_ends, key_counts), (value_data, _, starts, ends, counts) = (
        key_frames,
        value_frames,
    )
    if not np.array_equal(key_counts, counts) or int((ends - starts).sum()) >= 1 << 31:
        return None
    eight = np.arange(8)
    text = np.empty(len(key_data) + 2, np.uint8)  # "[" key "," key ... "]", blanks between
    text[1:-1] = key_data
    text[1:-1][_before(key_starts, eight)] = ord(" ")  # the length prefixes
    text[1:-1][_before(key_bounds[:-1] + 8, eight)] = ord(" ")  # the versions
    text[0], text[-1] = ord("["), ord("]")
    text[key_starts[1:]] = ord(",")  # the byte before each key but the first (`text` is shifted by one)
    kept = np.ones(len(value_data), bool)
    kept[_before(starts, eight)] = False  # the length prefixes: what is left is the values, back to back
    data = value_data[kept]
    value_offsets = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int32)
    row_values = pa.Array.from_buffers(
        pa.binary(), len(starts), [None, pa.py_buffer(value_offsets), pa.py_buffer(data)]
    )
    key_bytes = key_data.tobytes()
    return _Framed(
        [key_bytes[a:b] for a, b in zip(key_starts.tolist(), key_ends.tolist(), strict=True)],
        row_values,
        wheres,
        counts.tolist(),
        keys_json=text.tobytes(),
    )


def _frame_spans(
    messages: pa.Array | pa.ChunkedArray, *, version: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Of ``[u64be(1)]? [u64be len | bytes]*`` messages: their bytes, where each message starts in them
    (and the last ends), each frame's start and end and the frames per message, in order; None if a
    message is null, has a wrong version, stray bytes, or a length past its end."""
    messages = one_array(messages)
    if messages.null_count:
        return None
    messages = messages.cast(pa.large_binary())
    bounds = np.frombuffer(messages.buffers()[1], np.int64)[
        messages.offset : messages.offset + len(messages) + 1
    ]
    data = np.frombuffer(messages.buffers()[2] or b"", np.uint8)[bounds[0] : bounds[-1]]  # a slice's own
    bounds = bounds - bounds[0]
    pos, ends = bounds[:-1].copy(), bounds[1:]
    if version:
        if np.any(ends - pos < 8) or np.any(_u64_at(data, pos) != BATCH_VERSION):
            return None
        pos += 8
    eight = np.arange(8)
    starts, stops, owners, steps = [], [], [], []
    step, live = 0, np.flatnonzero(pos < ends)
    while len(live):
        at, end = pos[live], ends[live]
        if np.any(end - at < 8):
            return None
        size = _u64_at(data, at, eight)
        if np.any(size > (end - at - 8).astype(np.uint64)):
            return None
        first = at + 8
        starts.append(first)
        stops.append(first + size.astype(np.int64))
        owners.append(live)
        steps.append(np.full(len(live), step))
        pos[live] = first + size.astype(np.int64)
        live = live[pos[live] < end]
        step += 1
    if not starts:
        return data, bounds, *(np.zeros(0, np.int64),) * 2, np.zeros(len(bounds) - 1, np.int64)
    owner, order_step = np.concatenate(owners), np.concatenate(steps)
    order = np.lexsort((order_step, owner))
    counts = np.bincount(owner, minlength=len(bounds) - 1)
    return data, bounds, np.concatenate(starts)[order], np.concatenate(stops)[order], counts


def _before(starts: np.ndarray, eight: np.ndarray) -> np.ndarray:
    """The positions of the 8 bytes before each of `starts`."""
    return ((starts - 8)[:, None] + eight).ravel()


def _u64_at(data: np.ndarray, at: np.ndarray, eight: np.ndarray | None = None) -> np.ndarray:
    """The big-endian u64 at each byte position `at` of `data`."""
    eight = np.arange(8) if eight is None else eight
    return np.ascontiguousarray(data[at[:, None] + eight]).view(">u8").ravel().astype(np.uint64)


def decode_message(
    key: bytes | None,
    value: bytes | None,
    *,
    topic: str,
    partition: int,
    offset: int,
    compression: str = "none",
) -> pa.Table:
    """One Kafka message -> its events (``EVENT_SCHEMA``)."""
    check_codec(compression)
    return _decode(_framed(iter([(key, value, Where(topic, partition, offset))])), compression)


def records_table(
    messages: Sequence[tuple[str, int, int, bytes | None, bytes | None]],
) -> pa.Table:
    """``(topic, partition, offset, key, value)`` tuples -> the record table :func:`decode_records` reads."""
    topic, partition, offset, key, value = zip(*messages, strict=True) if messages else ((),) * 5
    return pa.table(
        {
            "key": pa.array(key, pa.binary()),
            "value": pa.array(value, pa.binary()),
            "topic": pa.array(topic, pa.string()),
            "partition": pa.array(partition, pa.int32()),
            "offset": pa.array(offset, pa.int64()),
        }
    )


# ---------------------------------------------------------------- encoding (the simulator, tests)


def frame(pieces: Sequence[bytes], *, version: bool) -> bytes:
    """``[u64be(1)] + [u64be len | piece]*`` (keys) or without the version (values)."""
    out = bytearray(_U64.pack(BATCH_VERSION) if version else b"")
    for p in pieces:
        out += _U64.pack(len(p))
        out += p
    return bytes(out)


__all__ = [
    "BATCH_VERSION",
    "DDL",
    "EVENT_SCHEMA",
    "RESOLVED",
    "ROW",
    "Where",
    "decode_message",
    "decode_records",
    "event_line",
    "frame",
    "parse_key",
    "records_table",
    "split_message",
]
