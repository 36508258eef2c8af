"""Collapse one key range's changes to the last change per row: pure Arrow and numpy, no Spark.

`keyranges` sends every key range to its own partition and calls `collapse_changes` there. Doing
the per-row work here rather than in Spark expressions matters: Spark inlines derived columns such as
the physical id into every filter that reads them, and decoding the id from the key nine times a row
cost more than the whole sort.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BAD_ROWS = -1  # the table_idx of rows that break the input contract
MATCH_ERRORS = -3  # the table_idx of the matcher's errors (`message` says which)
_UNTRACKED = -2

COLLAPSED_DDL = (
    "table_idx INT, segment INT, op STRING, commit_ts BIGINT, key BINARY, value BINARY, old_value BINARY, "
    "first_old_value BINARY, physical_id BIGINT, is_record BOOLEAN, scan_id STRING, region_id BIGINT, "
    "message STRING"
)
COLLAPSED_ARROW = pa.schema(
    [
        pa.field("table_idx", pa.int32()),
        pa.field("segment", pa.int32()),
        pa.field("op", pa.string()),
        pa.field("commit_ts", pa.int64()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("old_value", pa.binary()),
        pa.field("first_old_value", pa.binary()),
        pa.field("physical_id", pa.int64()),
        pa.field("is_record", pa.bool_()),
        pa.field("scan_id", pa.string()),
        pa.field("region_id", pa.int64()),
        pa.field("message", pa.string()),
    ]
)


@dataclass(frozen=True)
class CollapsePlan:
    """What collapsing needs to know about the run's tables."""

    table_of_physical: Mapping[int, int]  # physical id -> tracked table index
    known_ids: frozenset[int]  # every physical id the capture describes, tracked or not
    live: Mapping[int, Sequence[tuple[int, int | None]]]  # physical id -> live (after, until] intervals
    table_floor: Mapping[int, int]  # table index -> its checkpoint: changes at or below are applied
    resolved_ts: int
    segment_bounds: Mapping[int, Sequence[int]]  # table index -> finished ts of its later schema versions
    windows: Mapping[str, tuple[int, int]]  # capture id -> (lo, hi]: the commit ts the run takes from it
    old_values_of: frozenset[int] | None = None  # physical ids whose old values are needed (None: all)
    # physical id -> (after, until, table index): ids that belong to one table and then another (EXCHANGE
    # PARTITION hands a partition's id to the normal table and the normal table's id to the partition)
    handover: Mapping[int, Sequence[tuple[int, int | None, int]]] = field(default_factory=dict)

    @classmethod
    def nothing(cls) -> CollapsePlan:
        """A plan that keeps no change (matching still reports broken streams)."""
        return cls({}, frozenset(), {}, {}, 0, {}, {}, frozenset())


@dataclass(frozen=True)
class RecordKeyParts:
    """A key column split as `t{physical_id}_r{handle}`; non-record keys get id 0 and an empty handle."""

    is_record: np.ndarray
    physical_id: np.ndarray
    handle: pa.Array


def record_key_parts(keys: pa.Array | pa.ChunkedArray) -> RecordKeyParts:
    """Vectorized `t` + EncodeInt(id) + `_r` + handle; EncodeInt is big-endian with the sign bit flipped."""
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    is_record = pc.fill_null(
        pc.and_(
            pc.and_(pc.greater(pc.binary_length(keys), 11), pc.equal(pc.binary_slice(keys, 0, 1), b"t")),
            pc.equal(pc.binary_slice(keys, 9, 11), b"_r"),
        ),
        False,
    )
    uniform = pc.if_else(is_record, keys, pa.scalar(b"\0" * 11, pa.binary()))
    id_bytes = pc.binary_slice(uniform, 1, 9).cast(pa.binary(8))
    raw = np.frombuffer(id_bytes.buffers()[1], dtype=">u8", count=len(id_bytes), offset=id_bytes.offset * 8)
    physical_id = (raw ^ np.uint64(1 << 63)).astype(np.int64)
    flags = is_record.to_numpy(zero_copy_only=False)
    physical_id[~flags] = 0
    # An explicit stop: pyarrow 20's binary_slice without one fails ("Negative buffer resize").
    return RecordKeyParts(flags, physical_id, pc.binary_slice(uniform, 11, 2**31 - 1))


def _lookup(values: np.ndarray, mapping: Mapping[int, int], missing: int) -> np.ndarray:
    if not mapping:
        return np.full(len(values), missing, dtype=np.int64)
    keys = np.array(sorted(mapping), dtype=np.int64)
    mapped = np.array([mapping[k] for k in keys], dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return np.where(keys[at] == values, mapped[at], missing)


def _live(physical_id: np.ndarray, commit_ts: np.ndarray, plan: CollapsePlan) -> np.ndarray:
    """True where the row's physical id belongs to its table at its commit ts (TiCDC drops the rest)."""
    live = np.zeros(len(physical_id), dtype=bool)
    for pid in np.unique(physical_id):
        rows = physical_id == pid
        for after, until in plan.live.get(int(pid), ()):
            inside = rows & (commit_ts > after)
            if until is not None:
                inside &= commit_ts <= until
            live |= inside
    return live


def _hand_over(
    table_idx: np.ndarray, physical_id: np.ndarray, commit_ts: np.ndarray, plan: CollapsePlan
) -> None:
    """Give rows of a handed-over id to the table that owns the id at their commit ts (in place)."""
    for pid, spans in plan.handover.items():
        rows = physical_id == pid
        if not rows.any():
            continue
        for after, until, index in spans:
            inside = rows & (commit_ts > after)
            if until is not None:
                inside &= commit_ts <= until
            table_idx[inside] = index


def _in_windows(
    scan_id: pa.ChunkedArray, commit_ts: np.ndarray, windows: Mapping[str, tuple[int, int]]
) -> np.ndarray:
    inside = np.zeros(len(commit_ts), dtype=bool)
    for scan, (lo, hi) in windows.items():
        inside |= (
            pc.fill_null(pc.equal(scan_id, scan), False).to_numpy(zero_copy_only=False)
            & (commit_ts > lo)
            & (commit_ts <= hi)
        )
    return inside


def _segments(table_idx: np.ndarray, commit_ts: np.ndarray, plan: CollapsePlan) -> np.ndarray:
    """The schema version segment of each row: how many of its table's DDL finished ts lie below it."""
    segment = np.zeros(len(table_idx), dtype=np.int32)
    for index, bounds in plan.segment_bounds.items():
        rows = table_idx == index
        if bounds and rows.any():
            segment[rows] = np.searchsorted(np.asarray(bounds, dtype=np.int64), commit_ts[rows], side="left")
    return segment


def collapse_changes(changes: pa.Table, plan: CollapsePlan, among: np.ndarray | None = None) -> pa.Table:
    """The last change per (table, handle) in its capture's window, at or below the resolved ts, above the
    table's checkpoint, with the old value of its first change there (`first_old_value`: the row as it
    stood at the checkpoint, which the before/after key rule needs) beside its own (`old_value`).

    `changes` has scan_id, region_id, key, op, value, commit_ts and (optionally) old_value; all changes of a
    key must be in it. `among` (a boolean mask) limits the call to those rows: the others are not changes.
    Ties at one commit ts (a row moving between partitions: DELETE from one, PUT into the other) go to
    the PUT. A row that breaks the input contract comes out too, under table_idx `BAD_ROWS`: one per call
    is enough to name the place.

    The row picking works on the narrow columns and row numbers; keys and row values, most of the bytes,
    are copied once at the end. The rows come out in their input order.
    """
    n = changes.num_rows
    if n == 0:
        return COLLAPSED_ARROW.empty_table()
    if "old_value" not in changes.column_names:
        changes = changes.append_column("old_value", pa.nulls(n, pa.binary()))
    keys, op, old_values = changes.column("key"), changes.column("op"), changes.column("old_value")
    commit_col = changes.column("commit_ts")
    parts = record_key_parts(keys)
    commit_ts = pc.fill_null(commit_col, 0).to_numpy()
    is_put = pc.fill_null(pc.equal(op, "PUT"), False).to_numpy()
    is_delete = pc.fill_null(pc.equal(op, "DELETE"), False).to_numpy()
    no_value = pc.fill_null(pc.equal(pc.binary_length(changes.column("value")), 0), True).to_numpy()
    known = np.isin(parts.physical_id, np.fromiter(plan.known_ids, dtype=np.int64, count=len(plan.known_ids)))
    no_commit_ts = pc.is_null(commit_col).to_numpy(zero_copy_only=False)
    in_window = _in_windows(changes.column("scan_id"), commit_ts, plan.windows)
    bad = (
        ~parts.is_record
        | ~known
        | ~(is_put | is_delete)
        | (is_put & no_value)
        | pc.is_null(keys).to_numpy(zero_copy_only=False)
    ) & in_window | no_commit_ts
    table_idx = _lookup(parts.physical_id, plan.table_of_physical, _UNTRACKED)
    _hand_over(table_idx, parts.physical_id, commit_ts, plan)
    floor = _lookup(table_idx, plan.table_floor, np.iinfo(np.int64).max)
    keep = (
        ~bad
        & in_window
        & (table_idx >= 0)
        & (commit_ts > floor)
        & (commit_ts <= plan.resolved_ts)
        & _live(parts.physical_id, commit_ts, plan)
    )
    if among is not None:
        bad &= among
        keep &= among
    table_idx = np.where(bad, BAD_ROWS, table_idx).astype(np.int32)
    rows = np.concatenate([np.flatnonzero(bad)[:1], np.flatnonzero(keep)])
    if len(rows) == 0:
        return COLLAPSED_ARROW.empty_table()
    # Sort the picked rows by (table, handle, commit ts, PUT after DELETE); the last of each run is kept.
    handle = parts.handle.take(pa.array(rows))
    order = pc.sort_indices(
        pa.table(
            {"t": table_idx[rows], "h": handle, "c": commit_ts[rows], "r": is_put[rows].astype(np.int8)}
        ),
        sort_keys=[("t", "ascending"), ("h", "ascending"), ("c", "ascending"), ("r", "ascending")],
    ).to_numpy()
    rows, handle = rows[order], handle.take(pa.array(order))
    owner = table_idx[rows]
    last = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        same_handle = pc.equal(handle.slice(0, len(rows) - 1), handle.slice(1)).to_numpy(zero_copy_only=False)
        last[:-1] = (owner[:-1] != owner[1:]) | ~same_handle | (owner[:-1] == BAD_ROWS)
    first = np.ones(len(rows), dtype=bool)
    first[1:] = last[:-1]
    group_first = rows[np.maximum.accumulate(np.where(first, np.arange(len(rows)), 0))]
    # The kept rows leave in their input order: a filter copies the wide columns several times faster
    # than a take in another order.
    kept = np.zeros(n, dtype=bool)
    kept[rows[last]] = True
    first_of = np.zeros(n, dtype=np.int64)
    first_of[rows[last]] = group_first[last]
    first_rows = first_of[kept]
    out = changes.select(["op", "commit_ts", "key", "value", "old_value", "scan_id", "region_id"]).filter(
        pa.array(kept)
    )
    old_value = out.column("old_value")
    single = np.array_equal(first_rows, np.flatnonzero(kept))  # one change a row: its old value is the first
    first_old_value = old_value if single else old_values.take(pa.array(first_rows))
    return pa.table(
        {
            "table_idx": table_idx[kept],
            "segment": _segments(table_idx[kept], commit_ts[kept], plan),
            "op": out.column("op"),
            "commit_ts": out.column("commit_ts"),
            "key": out.column("key"),
            "value": out.column("value"),
            "old_value": old_value,
            "first_old_value": first_old_value,
            "physical_id": parts.physical_id[kept],
            "is_record": parts.is_record[kept],
            "scan_id": out.column("scan_id"),
            "region_id": out.column("region_id"),
            "message": pa.nulls(out.num_rows, pa.string()),
        },
        schema=COLLAPSED_ARROW,
    )


def match_errors(messages: Sequence[str]) -> pa.Table:
    """The matcher's errors as collapsed rows under table_idx `MATCH_ERRORS`."""
    n = len(messages)
    columns = {f.name: pa.nulls(n, f.type) for f in COLLAPSED_ARROW}
    columns["table_idx"] = pa.array([MATCH_ERRORS] * n, pa.int32())
    columns["segment"] = pa.array([0] * n, pa.int32())
    columns["message"] = pa.array(list(messages), pa.string())
    return pa.table(columns, schema=COLLAPSED_ARROW)
