"""Compare a Delta warehouse with the simulator's expected state, table by table, row by row."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tidbsim import load_expected
from tidelake import delta, fs

if TYPE_CHECKING:
    import pyarrow as pa


def warehouse_differences(
    spark, warehouse: Path | str, sim_out: Path, scan_id: str, *, without: tuple[str, ...] = ()
) -> list[str]:
    """Human-readable differences between `warehouse` (a folder, or any URI Spark lists: `s3a://...`) and the
    expected state after `scan_id` (empty: equal), leaving out the columns `without` (e.g. `_tidb_rowid`,
    which a source without row ids cannot give)."""
    expected = load_expected(sim_out, scan_id)
    expected = {k: t.drop([c for c in without if c in t.column_names]) for k, t in expected.items()}
    root = str(warehouse).rstrip("/")
    problems = []
    for (db, name), table in sorted(expected.items()):
        path = f"{root}/{db}/{name}"
        if not delta.is_delta_table(spark, path):
            problems.append(f"{db}.{name}: missing ({table.num_rows} rows expected)")
            continue
        problem = table_difference(spark, path, table, without)[0]
        if problem:
            problems.append(f"{db}.{name}: {problem}")
    for db in fs.list_dir(spark, root):
        for table in fs.list_dir(spark, db.path) if db.is_dir else []:
            if (db.name, table.name) not in expected and delta.is_delta_table(spark, table.path):
                problems.append(f"{db.name}.{table.name}: exists but the upstream has no such table")
    return problems


def table_difference(
    spark, path: str, table: pa.Table, without: tuple[str, ...] = ()
) -> tuple[str | None, int]:
    """How the Delta table at `path` differs from the expected rows `table` (None: equal), and how many of
    the expected rows it lacks (rows lost, when nothing remains to be applied)."""
    got = spark.read.format("delta").load(path).toArrow()
    got = got.drop([c for c in without if c in got.column_names])
    if sorted(got.column_names) != sorted(table.column_names):
        return f"columns {got.column_names} != expected {table.column_names}", table.num_rows
    have = sorted(map(repr, got.select(table.column_names).to_pylist()))
    want = sorted(map(repr, table.to_pylist()))
    if have == want:
        return None, 0
    extra, missing = sorted(set(have) - set(want)), sorted(set(want) - set(have))
    return f"{len(extra)} unexpected rows {extra[:2]}, {len(missing)} missing {missing[:2]}", len(missing)
