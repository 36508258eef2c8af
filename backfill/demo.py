"""`backfill demo`: a simulated TiDB workload, back-filled in two windows, then reconciled.

Everything lives under the demo config's work folder; a rerun starts over. Folders the demo did not make
itself (no `.tidelake-demo` marker) are never deleted.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from backfill.report import RunResult
from backfill.run import run_backfill
from tidelake.errors import ConfigError
from tidelake.tso import format_ts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from reconcile.result import ReconcileResult
    from tidelake.config import TidelakeConfig

MARKER = ".tidelake-demo"


@dataclass
class DemoResult:
    simulated_events: int
    scans: list[dict[str, Any]]
    windows: list[RunResult] = field(default_factory=list)
    reconcile: ReconcileResult | None = None
    location: str | None = None  # the warehouse, when it is not the config's (the demo on S3)

    @property
    def exit_code(self) -> int:
        return self.reconcile.exit_code if self.reconcile is not None else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "simulated_events": self.simulated_events,
            "scans": self.scans,
            "warehouse": self.location,
            "windows": [w.to_dict() for w in self.windows],
            "reconcile": self.reconcile.to_dict() if self.reconcile is not None else None,
        }

    def render(self, console: Console) -> None:
        console.print(
            f"[bold]simulated[/] {self.simulated_events} TiKV CDC events in {len(self.scans)} captures"
        )
        if self.location:
            console.print(f"[bold]warehouse[/] {self.location} (local S3 server, stopped after the demo)")
        for number, window in enumerate(self.windows, 1):
            console.rule(f"window {number}: checkpoint {format_ts(window.checkpoint_ts or 0)}")
            window.render(console)
        if self.reconcile is not None:
            console.rule("reconcile against the simulator's expected state")
            self.reconcile.render(console)


def _fresh(path: Path) -> None:
    if path.exists():
        if not (path / MARKER).exists():
            raise ConfigError(
                f"{path}: exists and was not made by the demo; choose another [demo] out / warehouse"
            )
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).write_text("made by `backfill demo`; deleted by the next demo run\n")


def run_demo(spark: SparkSession, config: TidelakeConfig, *, on_s3: bool = False) -> DemoResult:
    """Simulate, back-fill in two windows, reconcile; `on_s3` puts the captures and the warehouse in
    buckets of a local S3 server (S3Proxy on 127.0.0.1, started and stopped here)."""
    from tidbsim import SimulationConfig, simulate

    out, warehouse = Path(config.demo.out), Path(config.target.warehouse)
    if "://" in config.target.warehouse or "://" in config.demo.out:
        raise ConfigError(
            "the demo runs on local folders: [demo] out and [target] warehouse must be local paths"
        )
    _fresh(out)
    _fresh(warehouse)
    sim = simulate(
        SimulationConfig(
            out=out, seed=config.demo.seed, tables=config.demo.tables, rows=config.demo.rows,
            txns=config.demo.txns, scans=config.demo.scans,
        )
    )  # fmt: skip
    scans = [
        {"scan_id": s.scan_id, "checkpoint_ts": s.checkpoint_ts, "resolved_ts": s.resolved_ts}
        for s in sim.scans
    ]
    result = DemoResult(sim.events, scans)
    with ExitStack() as stack:
        if on_s3:
            config = stack.enter_context(_on_local_s3(spark, config, warehouse / "s3"))
            result.location = config.target.warehouse
        first_window_end = sim.scans[0].resolved_ts if len(sim.scans) > 1 else None
        result.windows.append(run_backfill(spark, config, until_ts=first_window_end))
        if first_window_end is not None:
            result.windows.append(run_backfill(spark, config))
        result.reconcile = _reconcile(spark, config)
    return result


@contextmanager
def _on_local_s3(spark: SparkSession, config: TidelakeConfig, folder: Path) -> Iterator[TidelakeConfig]:
    """The demo config moved to a local S3 server: captures uploaded to a bucket through the S3 API, the
    warehouse in the same bucket; the server stops when the demo is done."""
    from tidelake import fs
    from tidelake.objectstore import configured
    from tidelake.s3local import LocalS3Server

    with LocalS3Server(folder) as server, configured(spark, server.object_store()):
        bucket = server.make_bucket("tidelake-demo")
        fs.upload(spark, config.source.path, f"{bucket}/scans")
        yield replace(
            config,
            source=replace(config.source, path=f"{bucket}/scans"),
            target=replace(config.target, warehouse=f"{bucket}/warehouse"),
            object_store=server.object_store(),
        )


def _reconcile(spark: SparkSession, config: TidelakeConfig) -> ReconcileResult:
    """Reconcile the warehouse against the config's upstream (the demo's: the simulator's expected state)."""
    from reconcile import engine
    from reconcile.options import RunOptions
    from reconcile.upstream import open_upstream

    options = RunOptions.from_config(config.reconcile)
    upstream = open_upstream(spark, config.reconcile.upstream, options.parallelism)
    try:
        return engine.run(spark, config, options, upstream)
    finally:
        upstream.close()
