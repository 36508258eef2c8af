"""Compare a Delta warehouse with the simulator's expected state, table by table, row by row."""

from __future__ import annotations

from pathlib import Path

from backfill.simulate import load_expected


def warehouse_differences(spark, warehouse: Path, sim_out: Path, scan_id: str) -> list[str]:
    """Human-readable differences between `warehouse` and the expected state after `scan_id` (empty: equal)."""
    expected = load_expected(sim_out, scan_id)
    problems = []
    for (db, name), table in sorted(expected.items()):
        path = warehouse / db / name
        if not (path / "_delta_log").is_dir():
            problems.append(f"{db}.{name}: missing ({table.num_rows} rows expected)")
            continue
        got = spark.read.format("delta").load(str(path)).toArrow()
        if sorted(got.column_names) != sorted(table.column_names):
            problems.append(f"{db}.{name}: columns {got.column_names} != expected {table.column_names}")
            continue
        have = sorted(map(repr, got.select(table.column_names).to_pylist()))
        want = sorted(map(repr, table.to_pylist()))
        if have != want:
            extra, missing = sorted(set(have) - set(want)), sorted(set(want) - set(have))
            problems.append(
                f"{db}.{name}: {len(extra)} unexpected rows {extra[:2]}, {len(missing)} missing {missing[:2]}"
            )
    for db in sorted(p for p in warehouse.iterdir() if p.is_dir()) if warehouse.exists() else []:
        for table in sorted(p for p in db.iterdir() if (p / "_delta_log").is_dir()):
            if (db.name, table.name) not in expected:
                problems.append(f"{db.name}.{table.name}: exists but the upstream has no such table")
    return problems
