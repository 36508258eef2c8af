"""The Kafka publisher's messages, one sha256 each: `python bench/kafka_digests.py DIR [--simulate]`.

Writes to stdout (as JSON) a digest of every message (partition, key, value) that `changefeed_messages`
writes for 4 simulations (every DDL kind, collation tables, partitioned tables) x 12 changefeeds (every
dispatcher, both flavors, time zones, value compression, batch and size limits, restarts, late restarts,
from creation) x both protocols. Run it under two checkouts (`PYTHONPATH=<checkout>`) and compare: a
publisher change must not change a byte. `--simulate` first simulates into DIR with this checkout's
simulator (so the change log is in the format it writes); without it, DIR's simulations are read as they
are (e.g. written by an older checkout: its change-log format must still read).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from tidbsim import SimulationConfig, simulate  # noqa: E402
from tidbsim.kafka import Changefeed, changefeed_messages  # noqa: E402

SIMULATIONS = {
    "s1": {"seed": 11, "tables": 4, "rows": 30, "txns": 260, "scans": 3},
    "s2": {"seed": 12, "tables": 3, "rows": 20, "txns": 200, "scans": 4,
           "collation_tables": ("utf8mb4_general_ci", "utf8mb4_bin")},
    "s3": {"seed": 13, "tables": 5, "rows": 10, "txns": 300, "scans": 3, "ddls_per_scan": 3},
    "s4": {"seed": 14, "tables": 2, "rows": 40, "txns": 150, "scans": 2, "collation_tables": ("utf8mb4_unicode_ci",)},
}  # fmt: skip

FEEDS = [
    {"dispatcher": "default", "partitions": 3},
    {"dispatcher": "index-value", "partitions": 4, "max_batch_size": 5, "compression": "snappy"},
    {"dispatcher": "ts", "partitions": 2, "restarts": 3, "compression": "lz4", "time_zone": "Asia/Shanghai"},
    {"dispatcher": "rowid", "partitions": 5, "max_batch_size": 1, "seed": 3},
    {"dispatcher": "table", "partitions": 1, "output_old_value": False, "restarts": 0},
    {"dispatcher": "index-value", "partitions": 3, "restarts": 1, "late_restarts": 3, "seed": 4},
    {"dispatcher": "default", "partitions": 3, "flavor": "ticdc", "time_zone": "+08:00"},
    {"dispatcher": "table", "partitions": 2, "from_creation": True, "compression": "snappy"},
    {"dispatcher": "index-value", "partitions": 2, "max_message_bytes": 12_000, "max_batch_size": 64},
    {"dispatcher": "ts", "partitions": 4, "late_restarts": 4, "restarts": 2, "time_zone": "America/New_York",
     "resolved_every": 7, "seed": 9},
    {"dispatcher": "default", "partitions": 6, "max_batch_size": 64, "restarts": 1},
    {"dispatcher": "rowid", "partitions": 3, "flavor": "ticdc", "output_old_value": False, "compression": "lz4",
     "time_zone": "Europe/Berlin"},
]  # fmt: skip


def digests(sims: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in SIMULATIONS:
        for i, settings in enumerate(FEEDS):
            for protocol in ("open-protocol", "canal-json"):
                feed = Changefeed(topic="t", protocol=protocol, **settings)  # type: ignore[arg-type]
                out[f"{name}/{i}/{protocol}"] = [
                    hashlib.sha256(
                        m.partition.to_bytes(4, "big") + len(m.key).to_bytes(8, "big") + m.key + m.value
                    ).hexdigest()
                    for m in changefeed_messages(sims / name, feed)
                ]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dir", type=Path)
    parser.add_argument("--simulate", action="store_true")
    args = parser.parse_args()
    if args.simulate:
        for name, settings in SIMULATIONS.items():
            simulate(SimulationConfig(out=args.dir / name, ticdc_changelog=True, **settings))  # type: ignore[arg-type]
    found = digests(args.dir)
    json.dump(found, sys.stdout)
    print(f"{sum(map(len, found.values()))} messages in {len(found)} runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
