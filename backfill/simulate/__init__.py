"""Workload simulator: an upstream TiDB cluster through time, captured as incremental-scan snapshots.

``simulate(SimulationConfig(out=..., seed=...))`` writes ``<out>/scans/<scan-id>/`` (DESIGN.md's input
contract) and ``<out>/expected/`` (what a correct consumer holds after each scan of the chain), and with
``mysql_url`` replays the same history into a real MariaDB/MySQL. Deterministic for a seed.
"""

from backfill.simulate.config import DDL_KINDS, ScanSummary, SimulationConfig, SimulationResult
from backfill.simulate.engine import simulate
from backfill.simulate.expected import load_expected, load_index

__all__ = [
    "DDL_KINDS",
    "ScanSummary",
    "SimulationConfig",
    "SimulationResult",
    "load_expected",
    "load_index",
    "simulate",
]
