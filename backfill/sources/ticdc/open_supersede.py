"""Open-protocol row events that a later event of the same key supersedes, dropped before typing.

A scheduled job reads many changes per key (a hot row updated every second), and the collapse keeps one:
typing every value first (:mod:`open_rows`, the costly part) is work thrown away. :class:`LatestPerKey`
applies the shared collapse rule (``changes/collapse.py``: the highest commit ts, a PUT over a DELETE at one
ts, then the later line) to one task's events by their key columns' raw JSON, before they are typed, as
kv-scan does on key bytes. It only drops an event when another event it keeps wins on the same key for
certain, so the shared collapse after typing gives the same rows:

- keys compare by the raw JSON of their column objects (type code, flags, value): equal text types to
  equal values; equal values written differently stay apart and the collapse after typing joins them;
- an update whose key columns changed (old value ``p``) also deletes its old key: it is never dropped;
- events that are not plainly typed later (no key column, a handle-key-only or claim-check event, a value
  that does not parse) are kept, so the typing reports them as it would.

Values of dropped events are not checked (kv-scan does not decode the values it collapses away either).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.sources.ticdc.arrow_bytes import decoded_each
from backfill.sources.ticdc.open_protocol import event_line
from tidelake.conventions import ROWID


@functools.cache
def _key_value_decoder(columns: tuple[str, ...]) -> msgspec.json.Decoder:
    """Values -> their sections with only the key columns, each as its raw JSON column object. Built where
    it is used (a task): decoders and made-up types do not pickle."""
    fields = [(f"k{i}", msgspec.Raw, None) for i in range(len(columns))]  # Raw takes no union: None if absent
    keys = msgspec.defstruct(
        "KeyColumns", fields, rename={f"k{i}": name for i, name in enumerate(columns)}, gc=False
    )
    section: Any = keys | None
    value = msgspec.defstruct(
        "KeyValue", [("u", section, None), ("p", section, None), ("d", section, None)], gc=False
    )
    return msgspec.json.Decoder(value)


PARSED_AT_ONCE = 100_000  # events whose values one parse holds (`LatestPerKey.keep`): bounds its memory


class LatestPerKey:
    """The collapse rule on untyped open-protocol row events of one table, keyed by `keys` (the table's
    merge key columns; ``_tidb_rowid`` is the event's ``rid``)."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = tuple(keys)
        self.json_keys = tuple(k for k in self.keys if k != ROWID)
        self.attrs = [f"k{i}" for i in range(len(self.json_keys))]  # their fields in `_key_value_decoder`

    def keep(self, events: pa.Table) -> pa.Table:
        """`events` (``open_protocol.EVENT_SCHEMA`` row events) without the ones a kept event supersedes,
        in their order."""
        kept = self.kept(events)
        return events if kept is None else events.filter(pa.array(kept))

    def kept(self, events: pa.Table) -> np.ndarray | None:
        """Per event whether `keep` keeps it (None: every event). The values are parsed `PARSED_AT_ONCE`
        at a time: a task can hold millions of events of a hot table, and what the selection holds of each
        is its key's text."""
        n = events.num_rows
        if n < 2 or not self.keys:
            return None
        facts = [self._facts(events.slice(at, PARSED_AT_ONCE)) for at in range(0, n, PARSED_AT_ONCE)]
        kept = np.concatenate([f.always for f in facts])
        keyed = np.concatenate([f.keyed for f in facts])
        puts = np.concatenate([f.puts for f in facts])
        group = self._groups(
            events, [pa.concat_arrays([f.texts[i] for f in facts]) for i in range(len(self.attrs))]
        )
        # per key, the last event by (commit ts, PUT over DELETE, line), the first of equals
        rows = np.flatnonzero(keyed)
        ts = events.column("ts").to_numpy(zero_copy_only=False)[rows]
        line = event_line(events.column("offset"), events.column("index")).to_numpy(zero_copy_only=False)
        groups = group[rows]
        order = np.lexsort((-rows, line[rows], puts[rows], ts, groups))
        keys = groups[order]
        last = np.ones(len(order), dtype=bool)
        last[:-1] = keys[1:] != keys[:-1]
        kept[rows[order[last]]] = True
        return None if kept.all() else kept

    def _facts(self, events: pa.Table) -> _Facts:
        """What the selection needs of each event: its key columns' raw JSON (null: absent), whether it has
        a key and is a PUT, and whether it is kept whatever follows it (no key, a handle-key-only or
        claim-check event, an update that moves its key, or a value that does not parse: the typing names
        it)."""
        n = events.num_rows
        try:
            docs = decoded_each(events.column("value"), _key_value_decoder(self.json_keys).decode)
        except (msgspec.DecodeError, TypeError):
            docs = None
        if docs is None:
            none = np.zeros(n, dtype=bool)
            return _Facts([pa.nulls(n, pa.binary())] * len(self.attrs), none, none, ~none)
        sections = [doc.d if doc.d is not None else doc.u for doc in docs]
        puts = np.fromiter((doc.d is None for doc in docs), bool, n)
        keyed = np.ones(n, dtype=bool)
        texts = []
        for attr in self.attrs:
            values = [
                None if s is None or (raw := getattr(s, attr)) is None else bytes(raw) for s in sections
            ]
            text = pa.array(values, pa.binary())
            keyed &= pc.fill_null(pc.not_equal(text, b"null"), False).to_numpy(zero_copy_only=False)
            texts.append(text)
        if ROWID in self.keys:
            keyed &= events.column("row_id").is_valid().to_numpy(zero_copy_only=False)
        pinned = pc.or_(
            pc.fill_null(events.column("handle_only"), False), pc.is_valid(events.column("claim_check"))
        )
        always = ~keyed | pinned.to_numpy(zero_copy_only=False)
        for i, doc in enumerate(docs):  # an update whose key moved also deletes its old key: never dropped
            if keyed[i] and doc.d is None and doc.p is not None and _moved(doc.p, doc.u, self.attrs):
                always[i] = True
        return _Facts(texts, keyed, puts, always)

    def _groups(self, events: pa.Table, texts: list[pa.Array]) -> np.ndarray:
        """Per event a number for its key: equal raw JSON of every key column (and equal row id where the
        table keys by it), equal number."""
        codes = [pc.dictionary_encode(t).indices.fill_null(-1).to_numpy(zero_copy_only=False) for t in texts]
        if ROWID in self.keys:
            codes.append(pc.fill_null(events.column("row_id"), 0).to_numpy(zero_copy_only=False))
        if len(codes) == 1:
            return codes[0].astype(np.int64)
        _, group = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        return group.reshape(-1).astype(np.int64)


@dataclass(frozen=True)
class _Facts:
    """`LatestPerKey._facts` of a slice of events."""

    texts: list[pa.Array]  # per key column: its raw JSON, null where absent
    keyed: np.ndarray  # every key column present and not JSON null (and the row id where it keys)
    puts: np.ndarray
    always: np.ndarray  # kept whatever follows


def _moved(old: Any, new: Any, attrs: list[str]) -> bool:
    """Whether an old key column differs from the new one (an absent one did not change)."""
    for attr in attrs:
        before = getattr(old, attr)
        if before is not None and bytes(before) != bytes(getattr(new, attr) or b""):
            return True
    return False


__all__ = ["LatestPerKey"]
