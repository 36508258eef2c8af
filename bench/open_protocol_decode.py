"""Benchmark open-protocol decoding: events/s per core, next to ``json.loads`` of the same value bytes
(the floor: parsing the JSON and nothing else), in the same run.

    .venv/bin/python bench/open_protocol_decode.py [--table orders|metrics|both] [--events 200000]
                                                   [--batch 16] [--rounds 3]

Events are the workload simulator's rows (``shop.orders``: 21 columns of every type family; ``ops.metrics``:
8 columns), encoded as TiCDC (tiflow) writes them, batched ``--batch`` events per Kafka message. Ours:
framing + key parsing (``decode_records``) + typed Arrow rows (``rows_to_arrow``), per table; and the
same with the events a later one of their key supersedes dropped first (``open_supersede``, what a Kafka
task does: the events cycle over 2,000 keys, a hot table). Floor: ``json.loads`` of each event's value
JSON. Both single-threaded (pyarrow's pool set to one thread); the figures are CPU time, best of
``--rounds`` alternating rounds. Compare the ratio, which holds up better than absolute figures on a busy
box.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import pyarrow as pa

from backfill.codec import decode_row, encode_row, record_key
from backfill.sources.ticdc.open_protocol import Where, decode_records, frame, records_table, split_frames
from backfill.sources.ticdc.open_rows import rows_to_arrow
from backfill.sources.ticdc.open_supersede import LatestPerKey
from tidbsim import coltypes as ct
from tidbsim.table_versions import TEMPLATES, build_table
from tidbsim.ticdc_open import key_json, row_value_json


def make_records(template_key: str, events: int, batch: int, seed: int = 1) -> tuple[pa.Table, object]:
    tmpl = next(t for t in TEMPLATES if t.key == template_key)
    ids = list(range(500, 501 + tmpl.partitions))
    version = build_table(tmpl, uid=1, name=tmpl.name, ids=ids, partition_width=1 << 40, update_ts=1)
    schema = version.schema
    rng = random.Random(seed)
    distinct = []
    for i in range(min(events, 2000)):
        row = {c.id: ct.random_value(c.type, rng, nullable=c.nullable) for c in version.public}
        pk = version.pk_columns[0]
        row[pk.id] = i + 1
        key = record_key(version.physical_ids[0], i + 1)
        distinct.append(decode_row(schema, key, encode_row(schema, row, version=2)))
    values = [row_value_json(schema, new=d, old=None) for d in distinct]
    messages = []
    ptn = version.physical_ids[0] if version.partition else None
    for start in range(0, events, batch):
        n = min(batch, events - start)
        keys = [
            key_json(400_000_000_000_000_000 + start + j, version.db, version.name, row_id=start + j + 1,
                     physical_id=ptn)
            for j in range(n)
        ]  # fmt: skip
        vals = [values[(start + j) % len(values)] for j in range(n)]
        messages.append(("bench", 0, len(messages), frame(keys, version=True), frame(vals, version=False)))
    return records_table(messages), schema


def ours(records: pa.Table, schema) -> int:
    events = decode_records(records)
    return rows_to_arrow(events, schema).num_rows


def ours_superseded(records: pa.Table, schema) -> int:
    events = LatestPerKey(schema.pk_columns).keep(decode_records(records))
    return rows_to_arrow(events, schema).num_rows


def floor(records: pa.Table, schema) -> int:
    n = 0
    where = Where("bench", 0, 0)
    for value in records.column("value").to_pylist():
        for piece in split_frames(value, where, "value"):
            json.loads(piece)
            n += 1
    return n


def timed(fn, *args) -> tuple[float, int]:
    t0 = time.process_time()
    n = fn(*args)
    return time.process_time() - t0, n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", choices=["orders", "metrics", "both"], default="both")
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    tables = ["orders", "metrics"] if args.table == "both" else [args.table]
    print(f"events/s per core (cpu time, best of {args.rounds}), {args.batch} events per message")
    for name in tables:
        records, schema = make_records(name, args.events, args.batch)
        nbytes = sum(len(v) for v in records.column("value").to_pylist()) / args.events
        best_ours = best_floor = best_superseded = float("inf")
        for _ in range(args.rounds):
            t, n = timed(ours, records, schema)
            assert n == args.events
            best_ours = min(best_ours, t)
            t, n = timed(ours_superseded, records, schema)
            assert n == min(args.events, 2000)
            best_superseded = min(best_superseded, t)
            t, n = timed(floor, records, schema)
            best_floor = min(best_floor, t)
        o, s, f = (args.events / best for best in (best_ours, best_superseded, best_floor))
        print(
            f"  {name:8s} ({nbytes:5.0f} B/event): ours {o:10,.0f}  superseded first {s:10,.0f}  "
            f"json.loads floor {f:10,.0f}  ratio ours/floor {o / f:5.2f}, superseded first/floor {s / f:5.2f}"
        )


if __name__ == "__main__":
    main()
