"""The expected state beside the scans: what a correct consumer holds after each scan of the chain.

``<out>/expected/index.json`` lists the scans with the global resolved ts a consumer reaches after the
chain up to and including each; ``<out>/expected/<scan-id>/<db>/<table>.parquet`` holds every live table
at that ts in the Delta schema (docs/architecture.md "Delta conventions", ``_tidb_rowid`` first for tables
without a clustered primary key, ``_tidb_commit_ts`` last), sorted by primary key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from backfill.codec import decode_record_key
from backfill.codec.schema import ROWID_NAME
from tidbsim.emit import write_json
from tidbsim.table_versions import TableVersion
from tidbsim.world import World
from tidelake.conventions import COMMIT_TS

INDEX_FORMAT = "tidelake.expected"

PRIMARY_KEY_METADATA = b"tidelake.primary_key"


def delta_schema(version: TableVersion) -> pa.Schema:
    """Delta columns + ``_tidb_commit_ts``; the primary key's column names ride along as JSON metadata."""
    schema = version.schema.arrow_schema.append(pa.field(COMMIT_TS, pa.int64(), nullable=False))
    return schema.with_metadata({PRIMARY_KEY_METADATA: json.dumps(list(version.schema.pk_columns)).encode()})


def primary_key(table: pa.Table) -> tuple[str, ...]:
    """Primary-key column names of an expected table (``("_tidb_rowid",)`` without a clustered key)."""
    return tuple(json.loads((table.schema.metadata or {})[PRIMARY_KEY_METADATA]))


EXPECTED_BATCH_ROWS = 16_384
"""Rows decoded to Python values at a time while an expected table is built."""


def table_at(world: World, version: TableVersion, ts: int) -> pa.Table:
    """``version``'s rows as of ``ts`` (which must be >= the last GC safepoint), sorted by primary key.

    The hot table's expected state is built while the store holds a whole window (the run's memory peak),
    so its rows do not wait as Python values: every ``EXPECTED_BATCH_ROWS`` they become an Arrow batch,
    only the primary-key values stay for the sort, and the sorted table is taken a column at a time."""
    cat, store = world.catalog, world.store
    to_index = cat.entry_index(version.uid, ts)
    schema = delta_schema(version)
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    values = [(columns[c.name], c.id) for c in version.schema.columns]
    rowids = columns[ROWID_NAME] if version.pk_kind == "rowid" else None
    commit_ts = columns[COMMIT_TS]
    pk_names = version.schema.pk_columns
    pk: list[list[Any]] = [[] for _ in pk_names]
    batches: list[pa.RecordBatch] = []

    def to_batch() -> None:
        for name, keep in zip(pk_names, pk, strict=True):
            keep.extend(columns[name])
        arrays = [pa.array(columns[f.name], type=f.type) for f in schema]
        batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
        for column in columns.values():
            column.clear()

    for pid in version.physical_ids:
        t = store.tables.get(pid)
        if t is None:
            continue
        for key, v in t.rows_at(ts):
            row = world.logical_row(version.uid, pid, key, v, to_index)
            if row is None:
                continue
            for column, cid in values:
                column.append(row[cid])
            if rowids is not None:
                rowids.append(decode_record_key(key).handle)
            commit_ts.append(v.commit_ts if v.origin is None else v.origin[2].commit_ts)
            if len(commit_ts) >= EXPECTED_BATCH_ROWS:
                to_batch()
    to_batch()
    # The stable sort of the rows by their primary-key tuples (a one-column key compares as its value).
    sort_key = pk[0].__getitem__ if len(pk) == 1 else lambda i: tuple(column[i] for column in pk)
    order = pa.array(sorted(range(len(pk[0])), key=sort_key), type=pa.int64())
    unsorted = pa.Table.from_batches(batches, schema=schema).columns
    batches.clear()
    # Popped one by one: a column's unsorted buffers go as soon as its sorted copy exists.
    arrays = [unsorted.pop(0).take(order).combine_chunks() for _ in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def expected_tables(world: World, ts: int) -> Iterator[tuple[str, str, pa.Table]]:
    for version in world.catalog.tables_at(ts):
        yield version.db, version.name, table_at(world, version, ts)


def write_expected(out: Path, scan_id: str, world: World, ts: int) -> int:
    """Write the expected tables for one scan; returns the number of rows written."""
    n = 0
    for db, name, table in expected_tables(world, ts):
        path = out / "expected" / scan_id / db / f"{name}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        n += table.num_rows
    (out / "expected" / scan_id).mkdir(parents=True, exist_ok=True)
    return n


def write_index(out: Path, scans: list[dict[str, int | str]]) -> None:
    write_json(out / "expected" / "index.json", {"format": INDEX_FORMAT, "version": 1, "scans": scans})


def load_index(out: str | Path) -> list[dict[str, Any]]:
    doc = json.loads((Path(out) / "expected" / "index.json").read_text(encoding="utf-8"))
    if doc.get("format") != INDEX_FORMAT or doc.get("version") != 1:
        raise ValueError(f"{out}/expected/index.json is not a {INDEX_FORMAT} v1 index")
    return list(doc["scans"])


def load_expected(out: str | Path, scan_id: str) -> dict[tuple[str, str], pa.Table]:
    """``(db, table) -> Arrow table`` of every live table after the chain up to ``scan_id``."""
    root = Path(out) / "expected" / scan_id
    if not root.is_dir():
        raise FileNotFoundError(f"no expected state for scan {scan_id!r} under {out}")
    return {(p.parent.name, p.stem): pq.read_table(p) for p in sorted(root.glob("*/*.parquet"))}
