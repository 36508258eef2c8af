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
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    return msgspec.json.Decoder(list[value])  # type: ignore[valid-type]


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
        n = events.num_rows
        if n < 2 or not self.keys:
            return events
        try:
            docs = _key_value_decoder(self.json_keys).decode(
                b"[" + b",".join(events.column("value").to_pylist()) + b"]"
            )
        except (msgspec.DecodeError, TypeError):
            return events  # the typing names the bad value
        if len(docs) != n:
            return events
        sections = [doc.d if doc.d is not None else doc.u for doc in docs]
        puts = np.fromiter((doc.d is None for doc in docs), bool, n)
        group, keyed = self._groups(events, sections)
        pinned = pc.or_(
            pc.fill_null(events.column("handle_only"), False), pc.is_valid(events.column("claim_check"))
        )
        kept = ~keyed | pinned.to_numpy(zero_copy_only=False)
        for i, doc in enumerate(docs):  # an update whose key moved also deletes its old key: never dropped
            if keyed[i] and doc.d is None and doc.p is not None and _moved(doc.p, doc.u, self.attrs):
                kept[i] = True
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
        if kept.all():
            return events
        return events.filter(pa.array(kept))

    def _groups(self, events: pa.Table, sections: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Per event a number for its key (equal raw JSON, equal number), and whether it has a key: every
        key column present and not JSON null (the typing refuses a key without its value), and the row id
        where the table keys by it."""
        keyed = np.ones(len(sections), dtype=bool)
        codes: list[np.ndarray] = []
        for attr in self.attrs:
            texts = [None if s is None or (raw := getattr(s, attr)) is None else bytes(raw) for s in sections]
            text = pa.array(texts, pa.binary())
            keyed &= pc.fill_null(pc.not_equal(text, b"null"), False).to_numpy(zero_copy_only=False)
            codes.append(pc.dictionary_encode(text).indices.fill_null(-1).to_numpy(zero_copy_only=False))
        if ROWID in self.keys:
            row_id = events.column("row_id")
            keyed &= row_id.is_valid().to_numpy(zero_copy_only=False)
            codes.append(pc.fill_null(row_id, 0).to_numpy(zero_copy_only=False))
        if len(codes) == 1:
            return codes[0].astype(np.int64), keyed
        _, group = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        return group.reshape(-1).astype(np.int64), keyed


def _moved(old: Any, new: Any, attrs: list[str]) -> bool:
    """Whether an old key column differs from the new one (an absent one did not change)."""
    for attr in attrs:
        before = getattr(old, attr)
        if before is not None and bytes(before) != bytes(getattr(new, attr) or b""):
            return True
    return False


__all__ = ["LatestPerKey"]
