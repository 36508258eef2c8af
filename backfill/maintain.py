"""`backfill maintain`: keep the Delta tables fast to merge into and to read.

Per table, each step its own commit tagged with our app id (userMetadata `{"app_id", "step": "maintain",
"operation"}`, no `resolved_ts`, so checkpoints and reconcile pass over them):

1. OPTIMIZE: a clustered table is clustered incrementally; an unclustered one is Z-ordered by its merge
   key (the `tidelake.key_columns` property), else compacted.
2. `REORG TABLE ... APPLY (PURGE)`: files whose deletion vectors hide rows are rewritten without them.
3. VACUUM. Retention rule: files stay while any version younger than the retention (default 7 days) or
   the newest recorded checkpoint (the last commit with a `resolved_ts`) still reads them; the retention
   used is the larger of the configured one and the age of that commit plus an hour. Delta's own safety
   check (no retention under 7 days) stays on.
4. A Delta log checkpoint, so readers replay few commit files.

A step that loses a race with a concurrent commit (a backfill MERGE on the same table) is retried a few
times; if it still conflicts the table is reported as failed and left as Delta left it: an optimistic
commit that fails writes nothing.
"""

from __future__ import annotations

import fnmatch
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backfill.apply.table_layout import KEY_COLUMNS_PROPERTY, TARGET_FILE_SIZE_PROPERTY
from backfill.sources.base import CheckpointBook
from tidelake import delta, delta_internals
from tidelake.faults import fault_point
from tidelake.sqlident import quote_ident as quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

    from tidelake.config import TidelakeConfig

MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
DEFAULT_RETENTION_HOURS = 168
ATTEMPTS = 3
CONFLICTS = ("ConcurrentModification", "ConcurrentAppend", "ConcurrentDelete", "ConcurrentTransaction",
             "MetadataChanged", "ProtocolChanged")  # fmt: skip


@dataclass
class TableMaintenance:
    table: str
    path: str
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    retention_hours: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "path": self.path, "steps": self.steps,
                "retention_hours": self.retention_hours, "error": self.error}  # fmt: skip


@dataclass
class MaintainResult:
    tables: list[TableMaintenance]
    seconds: float

    @property
    def exit_code(self) -> int:
        return 2 if any(t.error for t in self.tables) else 0

    def to_dict(self) -> dict[str, Any]:
        return {"tables": [t.to_dict() for t in self.tables], "seconds": round(self.seconds, 3),
                "exit_code": self.exit_code}  # fmt: skip

    def render(self, console: Console) -> None:
        from rich.table import Table

        view = Table("table", "optimize", "purge", "vacuum (h)", "checkpoint", "error")
        for t in self.tables:
            view.add_row(
                t.table,
                _files(t.steps.get("optimize")),
                _files(t.steps.get("purge")),
                f"{t.retention_hours:.0f}" if t.retention_hours is not None else "-",
                "yes" if "checkpoint" in t.steps else "-",
                t.error or "",
            )
        console.print(view)
        console.print(f"{len(self.tables)} tables in {self.seconds:.1f}s")


def maintain(
    spark: SparkSession,
    config: TidelakeConfig,
    *,
    patterns: Sequence[str] = (),
    retention_hours: float = DEFAULT_RETENTION_HOURS,
) -> MaintainResult:
    """Maintain every Delta table of the warehouse that the config's tables (and `patterns`) select."""
    from backfill.run import qualified

    started = time.monotonic()
    config = qualified(spark, config)
    book = CheckpointBook(spark, config.target.warehouse, config.job.app_id)
    wanted = tuple(patterns) or config.target.tables
    results = []
    for db, name, _ in book.existing():
        label = f"{db}.{name}"
        if any(fnmatch.fnmatchcase(label, p) for p in wanted):
            results.append(
                maintain_table(spark, book.path(db, name), label, config.job.app_id, retention_hours)
            )
    return MaintainResult(results, time.monotonic() - started)


def maintain_table(
    spark: SparkSession, path: str, label: str, app_id: str, retention_hours: float = DEFAULT_RETENTION_HOURS
) -> TableMaintenance:
    """OPTIMIZE, purge, VACUUM and checkpoint one table; a failure is reported, never raised."""
    out = TableMaintenance(label, path)
    table = f"delta.{quote(path)}"
    try:
        fault_point("maintain.optimize")
        out.steps["optimize"] = _retried(spark, app_id, "optimize", lambda: _optimize(spark, path, table))
        fault_point("maintain.purge")
        out.steps["purge"] = _retried(
            spark, app_id, "purge", lambda: _metrics(spark.sql(f"REORG TABLE {table} APPLY (PURGE)"))
        )
        out.retention_hours = vacuum_retention_hours(spark, path, retention_hours)
        fault_point("maintain.vacuum")
        out.steps["vacuum"] = _retried(
            spark, app_id, "vacuum",
            lambda: {"deleted": spark.sql(f"VACUUM {table} RETAIN {out.retention_hours} HOURS").count()},
        )  # fmt: skip
        _checkpoint(spark, path)
        out.steps["checkpoint"] = {"version": delta.table_version(spark, path)}
    except Exception as exc:  # one table's failure is its result; the others still run
        out.error = _first_line(exc)
    return out


def vacuum_retention_hours(
    spark: SparkSession, path: str, retention_hours: float, now: float | None = None
) -> float:
    """The retention that keeps every file the newest recorded checkpoint still reads (module docstring)."""
    now = time.time() if now is None else now
    checkpoint_ms = _newest_checkpoint_ms(spark, path)
    if checkpoint_ms is None:
        return float(retention_hours)
    age_hours = max(0.0, now - checkpoint_ms / 1000) / 3600
    return float(max(retention_hours, math.ceil(age_hours) + 1))


def _newest_checkpoint_ms(spark: SparkSession, path: str) -> int | None:
    latest = delta.table_version(spark, path)
    for version in range(latest, max(-1, latest - 1000), -1):
        info = delta.read_commit_info(spark, path, version)
        if info is None:
            return None
        metadata = info.get("userMetadata")
        if isinstance(metadata, str) and '"resolved_ts"' in metadata:
            return int(info.get("timestamp", 0))
    return None


def _optimize(spark: SparkSession, path: str, table: str) -> dict[str, Any]:
    (detail,) = spark.sql(f"DESCRIBE DETAIL {table}").collect()
    clustered = bool(detail["clusteringColumns"]) if "clusteringColumns" in detail else False
    properties = delta.table_configuration(spark, path)
    keys = json.loads(properties.get(KEY_COLUMNS_PROPERTY, "[]"))
    statement = f"OPTIMIZE {table}"
    if keys and not clustered:
        statement += f" ZORDER BY ({', '.join(quote(k) for k in keys)})"
    size = properties.get(TARGET_FILE_SIZE_PROPERTY)
    # the layout's target file size, for this table's OPTIMIZE only
    with delta.session_conf_set(spark, None if size is None else {MAX_FILE_SIZE: size}):
        return _metrics(spark.sql(statement))


def _metrics(frame: Any) -> dict[str, Any]:
    row = frame.first()
    if row is None or "metrics" not in row:
        return {}
    metrics = row["metrics"]
    return {"files_added": metrics["numFilesAdded"], "files_removed": metrics["numFilesRemoved"]}


def _retried(
    spark: SparkSession, app_id: str, operation: str, step: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """Run one step as a commit tagged with our app id, again after a concurrent-commit conflict."""
    tag = json.dumps({"app_id": app_id, "step": "maintain", "operation": operation}, sort_keys=True)
    for attempt in range(1, ATTEMPTS + 1):
        spark.conf.set(delta.USER_METADATA, tag)
        try:
            return step() | ({"attempts": attempt} if attempt > 1 else {})
        except Exception as exc:
            if attempt == ATTEMPTS or not any(c in str(exc) for c in CONFLICTS):
                raise
            time.sleep(0.5 * attempt)
        finally:
            spark.conf.unset(delta.USER_METADATA)
    raise AssertionError("unreachable")


def _checkpoint(spark: SparkSession, path: str) -> None:
    delta_internals.write_checkpoint(spark, path)


def _files(step: dict[str, Any] | None) -> str:
    if not step:
        return "-"
    return f"+{step.get('files_added', 0)} -{step.get('files_removed', 0)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
