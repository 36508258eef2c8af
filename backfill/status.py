"""`backfill status`: where each target table's checkpoint stands and how far behind the captures it is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from backfill.initial.load import started_from
from backfill.sources import open_source
from backfill.sources.base import CheckpointBook
from tidelake import delta
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
    snapshot: Mapping[str, Any] | None = None  # the snapshot its first version came from (`[source.initial]`)

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
    source_description: str = ""
    held_back: list[dict[str, Any]] = field(default_factory=list)
    progress: Mapping[str, Any] = field(default_factory=dict)  # Source.progress: e.g. Kafka partitions

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
                    "started_from": dict(t.snapshot) if t.snapshot else None,
                }
                for t in self.tables
            ],
            "held_back": self.held_back,
            **({"source_progress": dict(self.progress)} if self.progress else {}),
        }

    def render(self, console: Console) -> None:
        table = Table(
            title=f"tidelake job {self.job!r}: {len(self.tables)} tables, {self.source_description}"
        )
        for name in ("table", "delta version", "checkpoint ts", "checkpoint (UTC)", "lag", "started from"):
            table.add_column(name, justify="right" if name != "table" else "left")
        for t in self.tables:
            lag = t.lag_seconds(self.newest_scan_ts)
            table.add_row(
                f"{t.database}.{t.table}",
                str(t.delta_version),
                str(t.checkpoint_ts) if t.checkpoint_ts is not None else "-",
                _utc(t.checkpoint_ts) or "-",
                f"{lag:.3f}s" if lag is not None else "-",
                f"{t.snapshot['kind']} {t.snapshot['path']} at {t.snapshot['tso']}"
                if t.snapshot
                else "changes",
            )
        console.print(table)
        if self.newest_scan_ts is not None or not self.progress:
            console.print(
                f"newest complete scan reaches {self.newest_scan_ts} ({_utc(self.newest_scan_ts) or '-'})"
            )
        rows = self.progress.get("partitions") or []
        if rows:
            parts = Table(title="input partitions")
            for name in rows[0]:
                parts.add_column(name.replace("_", " "), justify="left" if name == "topic" else "right")
            for row in rows:
                parts.add_row(*("-" if v is None else str(v) for v in row.values()))
            console.print(parts)
        if self.progress.get("held_back_by"):
            console.print(f"the global resolved ts is held back by {self.progress['held_back_by']}")
        for held in self.held_back:
            live = held.get("physical_id") is not None and held.get("retired_at") is None
            console.print(
                f"held back at ts {held['resolved_ts']}: {held['reason']}" + (", a live id" if live else "")
            )


def _utc(ts: int | None) -> str | None:
    return ts_to_datetime(ts).isoformat(timespec="milliseconds") if ts is not None else None


def table_status(spark: SparkSession, config: TidelakeConfig) -> StatusResult:
    from backfill.run import qualified

    config = qualified(spark, config)
    reader = open_source(config.source, config.target.tables, config.upstream)
    source = reader.status(spark)
    book = CheckpointBook(spark, config.target.warehouse, config.job.app_id)
    progress = reader.progress(spark, book)
    tables = [
        TableStatus(
            db, name, book.path(db, name), delta.table_version(spark, book.path(db, name)), recorded,
            started_from(spark, book.path(db, name)),
        )
        for db, name, recorded in book.existing()
    ]  # fmt: skip
    return StatusResult(
        config.job.name, config.source.path or source.description, config.target.warehouse, source.newest_ts,
        source.details.get("complete_scans", 0), tables, source.description,
        list(source.details.get("held_back", [])), progress,
    )  # fmt: skip
