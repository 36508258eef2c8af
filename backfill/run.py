"""`backfill run`: one source's window of row changes into Delta, through the shared apply stage.

The flow is docs/architecture.md "The data flow of `backfill run`": the source plans the window (checkpoints,
resolved ts, DDL barriers) and produces its row changes; the apply stage commits them table by table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from backfill.apply.stage import ApplyTarget, apply_window
from backfill.apply.table_names import CatalogTarget, sync_warehouse
from backfill.initial.load import load_initial
from backfill.report import RunResult
from backfill.sources import open_source
from backfill.sources.base import CheckpointBook, NoWindow, StageClock
from tidelake import fs
from tidelake.faults import fault_point
from tidelake.sparkerrors import concurrent_commits

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.config import TidelakeConfig


def qualified(spark: SparkSession, config: TidelakeConfig) -> TidelakeConfig:
    """The config with absolute source and warehouse locations (Delta wants them; relative config paths
    are relative to the working directory)."""
    return replace(
        config,
        source=replace(config.source, path=config.source.path and fs.qualify(spark, config.source.path)),
        target=replace(config.target, warehouse=fs.qualify(spark, config.target.warehouse)),
    )


def run_backfill(spark: SparkSession, config: TidelakeConfig, *, until_ts: int | None = None) -> RunResult:
    """Apply everything the source can prove complete past the tables' checkpoints (never past `until_ts`)."""
    config = qualified(spark, config)
    clock = StageClock()
    source = open_source(config.source, config.target.tables, config.upstream)
    load_initial(spark, config, clock)  # `[source.initial]`: tables without a checkpoint start at its TSO
    checkpoints = CheckpointBook(spark, config.target.warehouse, config.job.app_id)
    catalog = CatalogTarget.of(config.target)
    _sync_catalog(spark, catalog, checkpoints)  # what a killed run created but did not register
    window = source.plan(spark, checkpoints, clock, until_ts)
    fault_point("backfill.plan")
    if isinstance(window, NoWindow):
        return RunResult(
            config.job.name, window.checkpoint_ts, window.checkpoint_ts, [], [], clock.seconds,
            blocked=window.blocked, note=window.note, resent_skipped=list(window.resent_skipped),
        )  # fmt: skip
    changes = source.row_changes(spark, window, clock)
    try:
        target = ApplyTarget(config.target.warehouse, config.job.app_id, catalog, layouts=config.target)
        with concurrent_commits(config.job.name):
            outcomes = apply_window(spark, target, window, changes, clock)
    finally:
        changes.release()
    _sync_catalog(spark, catalog, CheckpointBook(spark, config.target.warehouse, config.job.app_id))
    return RunResult(
        config.job.name, window.checkpoint_ts, window.resolved_ts, list(window.inputs), outcomes, clock.seconds,
        zero_dates=changes.zero_dates(), blocked=window.blocked, resent_skipped=list(window.resent_skipped),
    )  # fmt: skip


def _sync_catalog(spark: SparkSession, catalog: CatalogTarget | None, book: CheckpointBook) -> None:
    """Register every table of the warehouse by name, unregister what is gone (no-op when off)."""
    if catalog is not None:
        sync_warehouse(spark, catalog, [(db, table) for db, table, _ in book.existing()])
