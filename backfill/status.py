"""`backfill status`: where each target table's checkpoint stands and how far behind the captures it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from backfill.scans import list_scans
from tidelake import delta, fs
from tidelake.tso import physical_ms, ts_to_datetime

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.config import TidelakeConfig


@dataclass(frozen=True)
class TableStatus:
    database: str
    table: str
    path: str
    delta_version: int
    checkpoint_ts: int | None

    def lag_seconds(self, newest_ts: int | None) -> float | None:
        if newest_ts is None or self.checkpoint_ts is None:
            return None
        return max(0, physical_ms(newest_ts) - physical_ms(self.checkpoint_ts)) / 1000


@dataclass(frozen=True)
class StatusResult:
    job: str
    source: str
    warehouse: str
    newest_scan_ts: int | None
    scans: int
    tables: list[TableStatus] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "source": self.source,
            "warehouse": self.warehouse,
            "complete_scans": self.scans,
            "newest_scan_ts": self.newest_scan_ts,
            "newest_scan_time": _utc(self.newest_scan_ts),
            "tables": [
                {
                    "database": t.database,
                    "table": t.table,
                    "path": t.path,
                    "delta_version": t.delta_version,
                    "checkpoint_ts": t.checkpoint_ts,
                    "checkpoint_time": _utc(t.checkpoint_ts),
                    "lag_seconds": t.lag_seconds(self.newest_scan_ts),
                }
                for t in self.tables
            ],
        }

    def render(self, console: Console) -> None:
        table = Table(
            title=f"tidelake job {self.job!r}: {len(self.tables)} tables, {self.scans} complete scans"
        )
        for name in ("table", "delta version", "checkpoint ts", "checkpoint (UTC)", "lag"):
            table.add_column(name, justify="right" if name != "table" else "left")
        for t in self.tables:
            lag = t.lag_seconds(self.newest_scan_ts)
            table.add_row(
                f"{t.database}.{t.table}",
                str(t.delta_version),
                str(t.checkpoint_ts) if t.checkpoint_ts is not None else "-",
                _utc(t.checkpoint_ts) or "-",
                f"{lag:.3f}s" if lag is not None else "-",
            )
        console.print(table)
        console.print(
            f"newest complete scan reaches {self.newest_scan_ts} ({_utc(self.newest_scan_ts) or '-'})"
        )


def _utc(ts: int | None) -> str | None:
    return ts_to_datetime(ts).isoformat(timespec="milliseconds") if ts is not None else None


def target_tables(spark: SparkSession, warehouse: str) -> list[tuple[str, str, str]]:
    """(db, table, uri) of every Delta table under `<warehouse>/<db>/<table>`."""
    found = []
    for db in fs.list_dir(spark, warehouse):
        if not db.is_dir or db.name.startswith(("_", ".")):
            continue
        for table in fs.list_dir(spark, db.path):
            if table.is_dir and fs.exists(spark, fs.join(table.path, "_delta_log")):
                found.append((db.name, table.name, table.path))
    return found


def table_status(spark: SparkSession, config: TidelakeConfig) -> StatusResult:
    scans = list_scans(spark, config.source.path)
    newest = max((s.current_ts for s in scans), default=None)
    tables = [
        TableStatus(
            db,
            name,
            uri,
            delta.table_version(spark, uri),
            delta.recorded_txn_version(spark, uri, config.job.app_id),
        )
        for db, name, uri in target_tables(spark, config.target.warehouse)
    ]
    return StatusResult(
        config.job.name, config.source.path, config.target.warehouse, newest, len(scans), tables
    )
