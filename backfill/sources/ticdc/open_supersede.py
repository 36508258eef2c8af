"""Open-protocol row events that a later event of the same key supersedes, dropped before typing.

A scheduled job reads many changes per key (a hot row updated every second), and the collapse keeps one:
typing every value first (:mod:`open_rows`, the costly part) is work thrown away. :class:`LatestPerKey`
applies the shared collapse rule (``apply/collapse.py``: the highest commit ts, a PUT over a DELETE at one
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
        ts = events.column("ts").to_pylist()
        line = event_line(events.column("offset"), events.column("index")).to_pylist()
        row_ids = events.column("row_id").to_pylist() if ROWID in self.keys else [None] * n
        pinned = pc.or_(
            pc.fill_null(events.column("handle_only"), False), pc.is_valid(events.column("claim_check"))
        ).to_pylist()
        attrs = [f"k{i}" for i in range(len(self.json_keys))]
        best: dict[tuple[Any, ...], tuple[tuple[int, bool, int], int]] = {}
        kept = np.zeros(n, dtype=bool)
        for i, doc in enumerate(docs):
            section = doc.d if doc.d is not None else doc.u
            key = self._key(section, attrs, row_ids[i])
            if key is None or pinned[i]:
                kept[i] = True
                if key is None:
                    continue
            elif doc.d is None and doc.p is not None and _moved(doc.p, section, attrs):
                kept[i] = True  # it also deletes its old key: never dropped
            order = (ts[i], doc.d is None, line[i])
            held = best.get(key)
            if held is None or order > held[0]:
                best[key] = (order, i)
        for _, i in best.values():
            kept[i] = True
        if kept.all():
            return events
        return events.filter(pa.array(kept))

    def _key(self, section: Any, attrs: list[str], row_id: Any) -> tuple[Any, ...] | None:
        if section is None:
            return None
        out = []
        for attr in attrs:
            raw = getattr(section, attr)
            text = b"null" if raw is None else bytes(raw)
            if text == b"null":  # absent, or JSON null: the typing refuses a key without its value
                return None
            out.append(text)
        if ROWID in self.keys:
            if row_id is None:
                return None
            out.append(row_id)
        return tuple(out)


def _moved(old: Any, new: Any, attrs: list[str]) -> bool:
    """Whether an old key column differs from the new one (an absent one did not change)."""
    for attr in attrs:
        before = getattr(old, attr)
        if before is not None and bytes(before) != bytes(getattr(new, attr) or b""):
            return True
    return False


__all__ = ["LatestPerKey"]
