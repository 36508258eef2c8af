"""`backfill snapshot`: the Delta version of every table of the job that holds exactly the state at one
resolved ts (TiCDC's syncpoint, seed 002).

Every run commits each table at the run's resolved ts (docs/architecture.md "The commit contract"), so
the tables stood together at each of those ts. A table holds the state at ts T only in a version whose resolved ts is T
(the versions in between reach past it); `--latest` picks the newest ts every table stood at. The
versions become `VERSION AS OF` views, printed as SQL or created in the catalog.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from backfill.apply.table_names import CatalogTarget
from backfill.sources.base import CheckpointBook
from reconcile.downstream import VersionTs, choose_version, version_history
from tidelake.errors import InputError
from tidelake.sqlident import quote_ident
from tidelake.tso import ts_to_datetime

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.config import TidelakeConfig


class NotAtTs(InputError):
    """A table of the job never stood at the asked ts (or the tables share none)."""


@dataclass(frozen=True)
class TableHistory:
    database: str
    table: str
    path: str
    versions: list[VersionTs]

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    def stood_at(self) -> set[int]:
        return {v.resolved_ts for v in self.versions if v.resolved_ts is not None}


@dataclass(frozen=True)
class TableAt:
    """One table's version at the snapshot's ts, and the view that reads it."""

    database: str
    table: str
    path: str
    version: int
    view: str
    view_sql: str


@dataclass
class SnapshotResult:
    job: str
    ts: int
    tables: list[TableAt]
    database_sql: list[str] = field(default_factory=list)
    registered: bool = False

    def sql(self) -> list[str]:
        """Statements that create the views (and their databases), each ready to run."""
        return [*self.database_sql, *(t.view_sql for t in self.tables)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "resolved_ts": self.ts,
            "resolved_time": ts_to_datetime(self.ts).isoformat(timespec="milliseconds"),
            "tables": [
                {
                    "database": t.database,
                    "table": t.table,
                    "path": t.path,
                    "delta_version": t.version,
                    "view": t.view,
                }
                for t in self.tables
            ],
            "sql": self.sql(),
            "registered": self.registered,
        }

    def render(self, console: Console) -> None:
        when = ts_to_datetime(self.ts).isoformat(timespec="milliseconds")
        table = Table(title=f"tidelake job {self.job!r} at resolved ts {self.ts} ({when})")
        for name in ("table", "delta version", "view", "path"):
            table.add_column(name, justify="right" if name == "delta version" else "left")
        for t in self.tables:
            table.add_row(f"{t.database}.{t.table}", str(t.version), t.view, t.path)
        console.print(table)
        if self.registered:
            console.print(f"created {len(self.tables)} views in the catalog")


def job_histories(spark: SparkSession, config: TidelakeConfig) -> list[TableHistory]:
    """Every Delta table of the job's warehouse with its versions' resolved ts."""
    book = CheckpointBook(spark, config.target.warehouse, config.job.app_id)
    return [
        TableHistory(
            db, name, book.path(db, name), version_history(spark, book.path(db, name), config.job.app_id)
        )
        for db, name, _ in book.existing()
    ]


def latest_common_ts(histories: list[TableHistory]) -> int:
    """The newest resolved ts that every table stood at."""
    if not histories:
        raise NotAtTs("the job has no tables in its warehouse yet")
    common = set.intersection(*(h.stood_at() for h in histories))
    if not common:
        newest = ", ".join(f"{h.name} at {max(h.stood_at(), default='none')}" for h in histories)
        raise NotAtTs(f"the job's tables never stood at one resolved ts together (newest: {newest})")
    return max(common)


def nearest(stood_at: set[int], ts: int) -> tuple[int | None, int | None]:
    """The closest resolved ts before and after `ts` that a table stood at."""
    known = sorted(stood_at)
    i = bisect.bisect_left(known, ts)
    return (known[i - 1] if i > 0 else None), (known[i] if i < len(known) else None)


def version_at(history: TableHistory, ts: int) -> VersionTs:
    """The table's newest version at exactly `ts`; NotAtTs names the nearest ts it has."""
    if ts not in history.stood_at():
        before, after = nearest(history.stood_at(), ts)
        raise NotAtTs(
            f"table {history.name} never stood at resolved ts {ts}: the nearest it has are "
            f"{before if before is not None else 'none'} before and {after if after is not None else 'none'} after"
        )
    return choose_version(history.versions, ts)


def view_name(target: CatalogTarget, db: str, table: str, ts: int) -> str:
    return target.qualified(db, f"{table}_at_{ts}")


def snapshot(
    spark: SparkSession, config: TidelakeConfig, at_ts: int | None, *, register: bool = False
) -> SnapshotResult:
    """The versions at `at_ts` (None: the newest ts all tables stood at); `register` creates the views."""
    from backfill.run import qualified

    config = qualified(spark, config)
    histories = job_histories(spark, config)
    ts = at_ts if at_ts is not None else latest_common_ts(histories)
    target = CatalogTarget(config.target.catalog, config.target.database_prefix, config.target.warehouse)
    tables = []
    for history in histories:
        chosen = version_at(history, ts)
        view = view_name(target, history.database, history.table, ts)
        sql = (
            f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM delta.{quote_ident(history.path)} "
            f"VERSION AS OF {chosen.version}"
        )
        tables.append(TableAt(history.database, history.table, history.path, chosen.version, view, sql))
    databases = sorted({t.database for t in tables})
    result = SnapshotResult(
        config.job.name, ts, tables,
        [f"CREATE DATABASE IF NOT EXISTS {target.qualified_database(db)}" for db in databases],
    )  # fmt: skip
    if register:
        for statement in result.sql():
            spark.sql(statement)
        result.registered = True
    return result
