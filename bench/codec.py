"""Benchmark decode_batch: rows/s per core for an 8-column table, next to pyarrow reading the same rows'
columns from Parquet (the floor), in the same run.

    .venv/bin/python bench/codec.py --rows 1000000 [--batch-rows 65536] [--keep DIR]

Table: id BIGINT PK, name VARCHAR(64), qty INT, price DECIMAL(12,2), created DATETIME, score DOUBLE,
attrs JSON, status ENUM('new','paid','shipped','done'); 5% of the rows have a NULL name (a second
header shape). Rows are encoded (row format v2) with the codec's
encoder, written as an events Parquet file (key, value) and as a decoded-columns Parquet file. Both runs are
single-threaded (pyarrow's thread pool set to one thread) so the figures are per core.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from backfill.codec import DecodeStats, TableSchema, decode_batch, encode_row, record_key
from backfill.codec.tableinfo import column_info, table_info

TABLE_ID = 100
SCHEMA = TableSchema.from_table_info(table_info(TABLE_ID, "orders", [
    column_info(1, "id", "bigint", primary_key=True),
    column_info(2, "name", "varchar(64)"),
    column_info(3, "qty", "int"),
    column_info(4, "price", "decimal(12,2)"),
    column_info(5, "created", "datetime"),
    column_info(6, "score", "double"),
    column_info(7, "attrs", "json"),
    column_info(8, "status", "enum('new','paid','shipped','done')"),
], pk="int"))
STATUSES = ("new", "paid", "shipped", "done")


def generate(rows: int, out: Path, *, json_distinct: int = 0, seed: int = 7) -> tuple[Path, Path]:
    """Write events.parquet (key, value) and columns.parquet (the decoded table) for ``rows`` rows."""
    rnd = random.Random(seed)
    base = dt.datetime(2024, 1, 1)
    keys: list[bytes] = []
    values: list[bytes] = []
    for i in range(rows):
        row = {
            2: f"customer-{rnd.randrange(100_000)}",
            3: rnd.randrange(-1000, 100_000),
            4: Decimal(rnd.randrange(0, 10**9)).scaleb(-2),
            5: base + dt.timedelta(seconds=rnd.randrange(0, 365 * 86400)),
            6: rnd.random() * 1000,
            7: {"k": rnd.randrange(json_distinct) if json_distinct else i,
                "tags": ["a", "b"][: rnd.randrange(3)], "ok": rnd.random() < 0.5},
            8: STATUSES[rnd.randrange(4)],
        }
        if rnd.random() < 0.05:
            row[2] = None  # some rows with another header shape (a NULL)
        keys.append(record_key(TABLE_ID, i))
        values.append(encode_row(SCHEMA, row))
    events = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
    events_path, columns_path = out / "events.parquet", out / "columns.parquet"
    pq.write_table(events, events_path)
    decoded = pa.Table.from_batches([decode_batch(SCHEMA, b) for b in events.to_batches(max_chunksize=65536)])
    pq.write_table(decoded.replace_schema_metadata(None), columns_path)
    return events_path, columns_path


def _timed(fn) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def run(rows: int, batch_rows: int, keep: str | None, json_distinct: int) -> None:
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        events_path, columns_path = out / "events.parquet", out / "columns.parquet"
        stamp = out / "rows.txt"
        wanted = f"{rows} {json_distinct}"
        if keep and stamp.exists() and stamp.read_text() == wanted and events_path.exists():
            print(f"reusing {rows:,} rows in {out}")
        else:
            generate(rows, out, json_distinct=json_distinct)
            stamp.write_text(wanted)
            print(f"generated {rows:,} rows in {time.perf_counter() - t0:.1f}s ({out})")

        floor_wall, floor_cpu, floor = _timed(lambda: pq.read_table(columns_path, use_threads=False))
        read_wall, read_cpu, events = _timed(lambda: pq.read_table(events_path, use_threads=False))
        stats = DecodeStats()

        def decode_all() -> pa.Table:
            return pa.Table.from_batches([decode_batch(SCHEMA, b, stats=stats)
                                          for b in events.to_batches(max_chunksize=batch_rows)])

        dec_wall, dec_cpu, decoded = _timed(decode_all)
        assert decoded.num_rows == floor.num_rows == rows
        assert decoded.replace_schema_metadata(None).equals(floor.replace_schema_metadata(None))
        total_cpu = read_cpu + dec_cpu

        def rate(seconds: float) -> str:
            return f"{rows / seconds:>12,.0f} rows/s" if seconds > 0 else "          inf"
        print(f"{'pyarrow read columns (floor)':<36}{rate(floor_cpu)}  cpu {floor_cpu:6.2f}s  "
              f"wall {floor_wall:6.2f}s")
        print(f"{'read events + decode_batch':<36}{rate(total_cpu)}  cpu {total_cpu:6.2f}s  wall "
              f"{read_wall + dec_wall:6.2f}s")
        print(f"{'  of which decode_batch':<36}{rate(dec_cpu)}  cpu {dec_cpu:6.2f}s  wall {dec_wall:6.2f}s")
        print(f"ratio decode/floor (cpu): {total_cpu / floor_cpu:.1f}x   fallback rows: "
              f"{stats.fallback_rows:,}   batch rows: {batch_rows:,}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch-rows", type=int, default=65_536)
    p.add_argument("--keep", help="keep the Parquet files in this directory (and reuse them on the next run)")
    p.add_argument("--json-distinct", type=int, default=0,
                   help="distinct JSON values (0: every row's JSON differs, the worst case)")
    args = p.parse_args()
    run(args.rows, args.batch_rows, args.keep, args.json_distinct)


if __name__ == "__main__":
    main()
