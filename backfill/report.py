"""The result of a backfill run: one object, rendered as rich tables or as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from tidelake.tso import ts_to_datetime


@dataclass
class TableOutcome:
    table: str  # db.table as first seen in the window
    path: str | None = None
    upserted: int = 0
    deleted: int = 0
    ddl_steps: int = 0
    resolved_ts: int | None = None  # the transaction version the table reached
    delta_version: int | None = None
    reason: str | None = None  # why the table did not reach the run's resolved ts
    # Python tasks that ran this table's decode (`sources.decode_tasks`); 0: decoded on the driver
    decode_tasks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "path": self.path,
            "rows_upserted": self.upserted,
            "rows_deleted": self.deleted,
            "ddl_steps": self.ddl_steps,
            "resolved_ts": self.resolved_ts,
            "resolved_time": _utc(self.resolved_ts),
            "delta_version": self.delta_version,
            "reason": self.reason,
            "decode_tasks": self.decode_tasks,
        }


@dataclass
class RunResult:
    job: str
    checkpoint_ts: int | None
    resolved_ts: int | None
    scans: list[str]
    tables: list[TableOutcome]
    stage_seconds: dict[str, float] = field(default_factory=dict)
    zero_dates: int = 0
    blocked: str | None = None  # what holds the resolved ts back, if anything
    note: str | None = None
    # (topic, partition, changes): re-sent changes the source recognised and skipped (Kafka)
    resent_skipped: list[tuple[str, int, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "checkpoint_ts": self.checkpoint_ts,
            "resolved_ts": self.resolved_ts,
            "resolved_time": _utc(self.resolved_ts),
            "scans": self.scans,
            "tables": [t.to_dict() for t in self.tables],
            "zero_dates_as_null": self.zero_dates,
            "blocked_by": self.blocked,
            "note": self.note,
            "resent_skipped": [
                {"topic": topic, "partition": partition, "changes": changes}
                for topic, partition, changes in self.resent_skipped
            ],
            "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
        }

    def render(self, console: Console) -> None:
        title = (
            f"backfill {self.job!r}: checkpoint {self.checkpoint_ts} → resolved ts {self.resolved_ts}\n"
            f"({_utc(self.checkpoint_ts) or '-'} → {_utc(self.resolved_ts) or '-'})"
        )
        table = Table(title=title)
        for name in ("table", "upserted", "deleted", "DDL", "Delta version", "reached"):
            table.add_column(name, justify="left" if name in ("table", "reached") else "right")
        for t in self.tables:
            reached = "resolved ts" if t.resolved_ts == self.resolved_ts else (t.reason or str(t.resolved_ts))
            table.add_row(
                t.table, str(t.upserted), str(t.deleted), str(t.ddl_steps),
                str(t.delta_version if t.delta_version is not None else "-"), reached,
            )  # fmt: skip
        console.print(table)
        stages = ", ".join(f"{k} {v:.2f}s" for k, v in self.stage_seconds.items())
        console.print(f"read: {', '.join(self.scans) or '-'}")
        console.print(f"time per stage: {stages}")
        if self.zero_dates:
            console.print(f"zero dates written as NULL: {self.zero_dates}")
        if self.blocked:
            console.print(f"resolved ts set by {self.blocked}")
        if self.note:
            console.print(self.note)
        if self.resent_skipped:
            parts = ", ".join(f"{t}[{p}] {n}" for t, p, n in self.resent_skipped)
            console.print(f"re-sent changes skipped (sent again after a TiCDC restart): {parts}")


def _utc(ts: int | None) -> str | None:
    return ts_to_datetime(ts).isoformat(timespec="milliseconds") if ts is not None else None
