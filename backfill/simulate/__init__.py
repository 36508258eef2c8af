"""Workload simulator: an upstream TiDB cluster through time, captured as incremental-scan snapshots.

``simulate(SimulationConfig(out=..., seed=...))`` writes ``<out>/scans/<scan-id>/`` (DESIGN.md's input
contract) and ``<out>/expected/`` (what a correct consumer holds after each scan of the chain), and with
``mysql_url`` replays the same history into a real MariaDB/MySQL; with ``storage_sinks`` it writes the
folders TiCDC storage-sink changefeeds (CSV, canal-json) would write, ``<out>/storage/<protocol>/``
(:mod:`backfill.simulate.storage_sink`). Deterministic for a seed.
"""

from backfill.simulate.config import DDL_KINDS, ScanSummary, SimulationConfig, SimulationResult
from backfill.simulate.engine import simulate
from backfill.simulate.expected import load_expected, load_index
from backfill.simulate.storage_codec import CsvOptions
from backfill.simulate.storage_sink import StorageSink, storage_sink_flushes, write_storage_sink

__all__ = [
    "DDL_KINDS",
    "CsvOptions",
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
