"""Workload simulator: an upstream TiDB cluster through time, captured as incremental-scan snapshots.

``simulate(SimulationConfig(out=..., seed=...))`` writes ``<out>/scans/<scan-id>/`` (docs/architecture.md
"The kv-scan input") and ``<out>/expected/`` (what a correct consumer holds after each scan of the chain), and with
``mysql_url`` replays the same history into a real MariaDB/MySQL; with ``storage_sinks`` it writes the
folders TiCDC storage-sink changefeeds (CSV, canal-json) would write, ``<out>/storage/<protocol>/``
(:mod:`tidbsim.storage_sink`). Deterministic for a seed.
"""

from tidbsim.config import (
    DDL_KINDS,
    DumplingExport,
    ScanSummary,
    SimulationConfig,
    SimulationResult,
    StorageSink,
)
from tidbsim.engine import simulate
from tidbsim.expected import load_expected, load_index
from tidbsim.storage_codec import CsvOptions
from tidbsim.storage_sink import storage_sink_flushes, write_storage_sink

__all__ = [
    "DDL_KINDS",
    "CsvOptions",
    "DumplingExport",
    "ScanSummary",
    "SimulationConfig",
    "SimulationResult",
    "StorageSink",
    "load_expected",
    "load_index",
    "simulate",
    "storage_sink_flushes",
    "write_storage_sink",
]
