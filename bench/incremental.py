"""Incremental windows into a big table: `python bench/incremental.py --rows 20000000` (on local[2]).

A hot table (`id BIGINT` primary key, 12 columns of mixed types) of `--rows` rows is built once with the
default table layout (deletion vectors, clustered by id) and kept under `--data` for later runs. Then per
window (0.1%, 1%, 10% of the rows as changes: updates spread over the key space, inserts past the end,
a few deletes), on fresh copies of the table:

  ours   the shared apply stage (collapse, MERGE bounded by the window's key range, tagged commit),
         fed typed changes as the TiCDC sources produce them (the kv-scan decode is left out)
  floor  a plain Delta MERGE of the same, already collapsed changes into a copy with the same layout

and prints seconds, changes/s, bytes rewritten and files added/removed (Delta commit metrics), and the
ratio ours/floor. Targets: 1% window <= 1.5x the floor and <= 10% of the table's bytes rewritten.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path and its name would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.captures

from tests.captures import BIGINT, DATETIME, DECIMAL, INT, NOT_NULL, PRI_KEY, VARCHAR, column  # noqa: E402

APP = "tidelake:bench-incremental"
WINDOWS = (0.001, 0.01, 0.10)
COLUMNS = [  # (name, TiDB type, flen, decimal) after `id`
    ("customer", INT, 11, -1), ("status", VARCHAR, 16, -1), ("sku", VARCHAR, 32, -1),
    ("amount", DECIMAL, 12, 2), ("quantity", INT, 11, -1), ("region", VARCHAR, 8, -1),
    ("created", DATETIME, 19, 6), ("updated", DATETIME, 19, 6), ("note", VARCHAR, 64, -1),
    ("score", BIGINT, 20, -1), ("flags", INT, 11, -1),
]  # fmt: skip
VALUES = """CAST(id % 100003 AS INT) AS customer,
  element_at(array('new', 'paid', 'shipped', 'returned'), CAST(id % 4 AS INT) + 1) AS status,
  substr(md5(CAST(id AS STRING)), 1, 20) AS sku,
  CAST((id * 37) % 10000000 / 100 AS DECIMAL(12,2)) AS amount,
  CAST(id % 50 AS INT) AS quantity,
  element_at(array('eu', 'us', 'ap'), CAST(id % 3 AS INT) + 1) AS region,
  timestamp_ntz'2020-01-01 00:00:00' + make_dt_interval(0, 0, 0, id) AS created,
  timestamp_ntz'2021-01-01 00:00:00' + make_dt_interval(0, 0, 0, id * {v}) AS updated,
  concat('note ', CAST(id % 997 + {v} AS STRING)) AS note,
  id * {v} AS score,
  CAST({v} AS INT) AS flags"""


def table_schema() -> Any:
    from backfill.codec import TableSchema

    cols = [column(1, "id", BIGINT, flag=NOT_NULL | PRI_KEY, flen=20)]
    for offset, (name, tp, flen, dec) in enumerate(COLUMNS, 1):
        cols.append(column(offset + 1, name, tp, flen=flen, decimal=dec, offset=offset))
    info = {"id": 500, "name": {"O": "orders", "L": "orders"}, "cols": cols, "pk_is_handle": True,
            "state": 5, "max_col_id": len(cols), "index_info": []}  # fmt: skip
    return TableSchema.from_table_info(info, schema_name="bench")


def build_base(spark: Any, path: Path, rows: int, schema: Any) -> None:
    """The table of `rows` rows at `path`, made once (a marker says it is complete)."""
    marker = path.parent / f".base-{rows}"
    if marker.exists():
        return
    from backfill.apply.merge import create_table
    from tidelake.config import DEFAULT_LAYOUT

    shutil.rmtree(path, ignore_errors=True)
    create_table(spark, str(path), schema, layout=DEFAULT_LAYOUT)
    columns = spark.read.format("delta").load(str(path)).columns
    frame = spark.range(rows).selectExpr("id", *VALUES.format(v=1).split(",\n  "), "1L AS _tidb_commit_ts")
    frame.select(*columns).repartitionByRange(max(8, rows // 1_000_000), "id").write.format("delta").mode(
        "append"
    ).save(str(path))
    marker.write_text("ok")


def changes_for(spark: Any, rows: int, share: float, ts: int) -> Any:
    """`share * rows` changes: 80% updates spread over the keys, 15% inserts past the end, 5% deletes."""
    n = max(1, int(rows * share))
    updates = spark.range(int(n * 0.8)).selectExpr(
        f"(id * 7919 * {max(1, rows // max(1, n))}) % {rows} AS id"
    )
    inserts = spark.range(rows, rows + int(n * 0.15))
    deletes = spark.range(int(n * 0.05)).selectExpr(f"(id * 104729 + 13) % {rows} AS id")
    put = lambda f: f.selectExpr("id", *VALUES.format(v=2).split(",\n  "), "'PUT' AS _tidb_op")  # noqa: E731
    gone = deletes.selectExpr("id", *[f"NULL AS {c[0]}" for c in COLUMNS], "'DELETE' AS _tidb_op")
    both = put(updates.dropDuplicates(["id"]).join(deletes, "id", "left_anti")).unionByName(put(inserts))
    frame = both.unionByName(gone, allowMissingColumns=True)
    return frame.selectExpr("*", f"{ts}L AS _tidb_commit_ts", "0L AS _tidb_line")


def last_metrics(spark: Any, path: Path) -> dict[str, int]:
    row = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    metrics = row["operationMetrics"]
    return {k: int(metrics.get(k, 0)) for k in ("numTargetBytesRemoved", "numTargetFilesAdded",
                                                 "numTargetFilesRemoved", "numTargetDeletionVectorsAdded")}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--data", type=Path, default=Path(".tidelake/bench/incremental"))
    args = parser.parse_args(argv)

    from delta.tables import DeltaTable

    from backfill.apply.stage import ApplyTarget, apply_window
    from backfill.changes.typed import TypedRowChanges
    from backfill.codec import SchemaVersion
    from backfill.sources.base import StageClock, Window
    from backfill.tables import TrackedTable
    from tidelake.config import SparkConfig, TargetConfig
    from tidelake.spark import build_session

    spark = build_session(
        "tidelake-bench", SparkConfig(master="local[2]", shuffle_partitions=8, driver_memory="4g")
    )
    schema = table_schema()
    data = args.data.resolve() / str(args.rows)
    base = data / "base" / "bench" / "orders"
    began = time.perf_counter()
    build_base(spark, base, args.rows, schema)
    table_bytes = int(spark.sql(f"DESCRIBE DETAIL delta.`{base}`").first()["sizeInBytes"])
    print(
        f"table: {args.rows:,} rows, {table_bytes / 1e6:.0f} MB (built or reused in {time.perf_counter() - began:.0f}s)"
    )
    for number, share in enumerate(WINDOWS, 1):
        ts = 1000 + number
        changes = changes_for(spark, args.rows, share, ts).persist()
        total = changes.count()
        results = {}
        for who in ("floor", "ours"):
            wh = data / f"run-{who}"
            shutil.rmtree(wh, ignore_errors=True)
            shutil.copytree(base.parent.parent, wh)
            path = wh / "bench" / "orders"
            started = time.perf_counter()
            if who == "ours":
                window = Window(1, ts, (TrackedTable((SchemaVersion(0, schema),), 0),), (1,))
                typed = TypedRowChanges(window.segment_keys([(0, 0)]), {(0, 0): changes})
                apply_window(
                    spark,
                    ApplyTarget(str(wh), APP, layouts=TargetConfig(str(wh))),
                    window,
                    typed,
                    StageClock(),
                )
            else:
                source = changes.drop("_tidb_line")
                cols = {c: f"s.`{c}`" for c in source.columns if c != "_tidb_op"}
                (
                    DeltaTable.forPath(spark, str(path)).alias("t").merge(source.alias("s"), "t.id = s.id")
                    .whenMatchedDelete("s._tidb_op = 'DELETE'").whenMatchedUpdate(set=cols)
                    .whenNotMatchedInsert("s._tidb_op = 'PUT'", values=cols).execute()
                )  # fmt: skip
            seconds = time.perf_counter() - started
            results[who] = (seconds, last_metrics(spark, path))
            m = results[who][1]
            print(
                f"window {share:6.1%} {who:5}: {seconds:7.1f}s {total / seconds:>10,.0f} changes/s  "
                f"rewritten {m['numTargetBytesRemoved'] / 1e6:8.1f} MB ({m['numTargetBytesRemoved'] / table_bytes:5.1%})  "
                f"files +{m['numTargetFilesAdded']} -{m['numTargetFilesRemoved']}  DVs {m['numTargetDeletionVectorsAdded']}"
            )
        changes.unpersist()
        print(f"window {share:6.1%} ratio ours/floor: {results['ours'][0] / results['floor'][0]:.2f}x")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
