"""The result of a run: one object, rendered as rich tables for people and as JSON for CI. Pure.

Exit status: 2 if any table could not be compared (error), else 1 if the differing rows left after
the run (after `--repair`, those its re-check still finds) exceed `max_diff`, else 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

KINDS = ("missing", "extra", "changed")
EXIT_EQUAL, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2
MAX_LISTED_CHUNKS = 100  # differing chunks named in the JSON result


@dataclass(frozen=True)
class RowSample:
    """One differing row: its key, the columns that differ, and the values on each side."""

    kind: str
    key: Mapping[str, Any]
    columns: tuple[str, ...] = ()
    upstream: Mapping[str, Any] | None = None
    delta: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A changed row shows only its differing columns; a missing or extra row all of them."""
        out: dict[str, Any] = {"key": dict(self.key)}
        if self.columns:
            out["columns"] = list(self.columns)
        for side, values in (("upstream", self.upstream), ("delta", self.delta)):
            if values is not None:
                out[side] = {c: values[c] for c in self.columns} if self.columns else dict(values)
        return out


@dataclass(frozen=True)
class ChunkStatus:
    """One chunk (a key range, or a hash bucket) as the checksums saw it."""

    name: str  # `[lower, upper)` or `bucket 3f`
    upstream_rows: int
    delta_rows: int
    equal: bool


@dataclass(frozen=True)
class DiffCounts:
    """Rows missing from Delta, extra in Delta, and present on both sides with different values."""

    missing: int = 0
    extra: int = 0
    changed: int = 0
    by_column: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    samples: tuple[RowSample, ...] = ()

    @property
    def total(self) -> int:
        return self.missing + self.extra + self.changed


@dataclass(frozen=True)
class RepairOutcome:
    """What `--repair` did to one table: one MERGE, then a re-check of the keys it touched."""

    deleted: int
    upserted: int
    delta_version: int | None
    remaining: DiffCounts


@dataclass(frozen=True)
class TableResult:
    table: str
    status: str  # equal | different | error
    error: str | None = None
    strategy: str | None = None  # range | bucket
    upstream_rows: int = 0
    delta_rows: int = 0
    chunks: int = 0
    chunks_differing: int = 0
    chunks_within_tolerance: int = 0  # checksum differed, row diff found nothing to report
    diff: DiffCounts = field(default_factory=DiffCounts)
    repair: RepairOutcome | None = None
    upstream_ts: int | None = None
    upstream_snapshot: str | None = None  # which upstream state was read (time and position, or ts)
    delta_version: int | None = None
    delta_resolved_ts: int | None = None
    upstream_queries: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    chunk_map: tuple[ChunkStatus, ...] = ()  # every chunk, in key order
    narrowed: tuple[str, ...] = ()  # the ranges bisection left to the row diff
    stage_seconds: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def failed(cls, table: str, message: str, seconds: float = 0.0) -> TableResult:
        return cls(table, "error", error=message, seconds=seconds)

    @property
    def remaining(self) -> int:
        """Differing rows after the run: the re-check after a repair, else what was found."""
        if self.repair is not None:
            return self.repair.remaining.total
        return self.diff.total

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"table": self.table, "status": self.status}
        if self.error is not None:
            out["error"] = self.error
            return out
        out.update(
            strategy=self.strategy,
            upstream_rows=self.upstream_rows,
            delta_rows=self.delta_rows,
            chunks=self.chunks,
            chunks_equal=self.chunks - self.chunks_differing,
            chunks_differing=self.chunks_differing,
            chunks_within_tolerance=self.chunks_within_tolerance,
            missing=self.diff.missing,
            extra=self.diff.extra,
            changed=self.diff.changed,
            changed_by_column=dict(self.diff.by_column),
            samples={k: [s.to_dict() for s in self.diff.samples if s.kind == k] for k in KINDS},
            upstream_ts=self.upstream_ts,
            upstream_snapshot=self.upstream_snapshot,
            delta_version=self.delta_version,
            delta_resolved_ts=self.delta_resolved_ts,
            upstream_queries=self.upstream_queries,
            seconds=round(self.seconds, 3),
            stage_seconds={k: round(v, 3) for k, v in self.stage_seconds.items()},
            differing_chunks=[c.name for c in self.chunk_map if not c.equal][:MAX_LISTED_CHUNKS],
            notes=list(self.notes),
        )
        if self.repair is not None:
            out["repair"] = {
                "deleted": self.repair.deleted,
                "upserted": self.repair.upserted,
                "delta_version": self.repair.delta_version,
                "remaining": {k: getattr(self.repair.remaining, k) for k in KINDS},
            }
        return out


@dataclass(frozen=True)
class ReconcileResult:
    upstream: str
    tables: tuple[TableResult, ...]
    max_diff: int = 0
    seconds: float = 0.0
    upstream_bytes: int = 0

    @property
    def differences(self) -> int:
        return sum(t.remaining for t in self.tables)

    @property
    def exit_code(self) -> int:
        return exit_code(self.tables, self.max_diff)

    def to_dict(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "status": {EXIT_EQUAL: "equal", EXIT_DIFFERENT: "different", EXIT_ERROR: "error"}[self.exit_code],
            "exit_code": self.exit_code,
            "differences": self.differences,
            "max_diff": self.max_diff,
            "seconds": round(self.seconds, 3),
            "upstream_bytes": self.upstream_bytes,
            "tables": [t.to_dict() for t in self.tables],
        }

    def render(self, console: Console) -> None:
        table = Table(
            title=f"reconcile against {escape(self.upstream)}",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            show_edge=False,
        )
        table.add_column("table", overflow="fold", min_width=10, max_width=28)
        table.add_column("result", overflow="fold", min_width=6)
        table.add_column("rows", justify="right", overflow="fold", min_width=6, max_width=12)
        for name in ("chunks", "missing", "extra", "changed", "time"):
            table.add_column(name, justify="right", no_wrap=True)
        for t in self.tables:
            table.add_row(*_summary_row(t))
        console.print(table)
        for t in self.tables:
            _render_details(console, t)
        verdict = {
            EXIT_EQUAL: "[green]equal[/]",
            EXIT_DIFFERENT: "[red]different[/]",
            EXIT_ERROR: "[red]error[/]",
        }
        console.print(
            f"{verdict[self.exit_code]}: {self.differences} differing rows (max {self.max_diff}), "
            f"{self.upstream_bytes:,} bytes read upstream, {self.seconds:.1f}s"
        )


def exit_code(tables: Sequence[TableResult], max_diff: int) -> int:
    if any(t.status == "error" for t in tables):
        return EXIT_ERROR
    return EXIT_DIFFERENT if sum(t.remaining for t in tables) > max_diff else EXIT_EQUAL


def _summary_row(t: TableResult) -> list[str]:
    if t.status == "error":
        return [escape(t.table), "[red]error[/]", "", "", "", "", "", f"{t.seconds:.1f}s"]
    status = "[green]equal[/]" if t.status == "equal" else "[red]different[/]"
    if t.repair is not None:
        status += ", repaired" if t.repair.remaining.total == 0 else ", [red]repair incomplete[/]"
    rows = (
        f"{t.upstream_rows:,}" if t.upstream_rows == t.delta_rows else f"{t.upstream_rows:,}/{t.delta_rows:,}"
    )
    chunks = f"{t.chunks_differing}/{t.chunks}" if t.chunks_differing else str(t.chunks)
    return [
        escape(t.table),
        status,
        rows,
        chunks,
        str(t.diff.missing),
        str(t.diff.extra),
        str(t.diff.changed),
        f"{t.seconds:.1f}s",
    ]


def _render_details(console: Console, t: TableResult) -> None:
    if t.error:
        console.print(f"[red]{escape(t.table)}: {escape(t.error)}[/]")
        return
    if t.upstream_snapshot:
        console.print(f"{escape(t.table)}: compared with the {escape(t.upstream_snapshot)}")
    for note in t.notes:
        console.print(f"[yellow]{escape(t.table)}: {escape(note)}[/]")
    if t.diff.by_column:
        cols = ", ".join(f"{escape(c)} ({n})" for c, n in sorted(t.diff.by_column.items()))
        console.print(f"{escape(t.table)}: changed columns: {cols}")
    if not t.diff.samples:
        return
    samples = Table(title=f"{escape(t.table)}: sample differences", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("kind", "key", "column", "upstream", "delta"):
        samples.add_column(name)
    for s in t.diff.samples:
        key = ", ".join(f"{k}={v!r}" for k, v in s.key.items())
        if s.kind == "changed":
            for col in s.columns:
                samples.add_row(s.kind, escape(key), escape(col), _show(s.upstream, col), _show(s.delta, col))
        else:
            samples.add_row(
                s.kind, escape(key), "*", "present" if s.upstream else "-", "present" if s.delta else "-"
            )
    console.print(samples)
    if t.repair is not None:
        console.print(
            f"{escape(t.table)}: repair deleted {t.repair.deleted} and upserted {t.repair.upserted} rows "
            f"(Delta version {t.repair.delta_version}); re-check finds {t.repair.remaining.total} differing"
        )


def _show(values: Mapping[str, Any] | None, column: str) -> str:
    if values is None:
        return "-"
    value = values.get(column)
    text = "NULL" if value is None else repr(value)
    return escape(text if len(text) <= 60 else text[:57] + "...")
