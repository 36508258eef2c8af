"""Delta conventions every part of tidelake agrees on (docs/architecture.md "Delta conventions" and "The
commit contract").

The backfill writes by them, `backfill status`, reconcile and the demo read by them: where a table lives,
the columns we add, the transaction app id and the keys of the JSON userMetadata of every commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidelake import fs

COMMIT_TS = "_tidb_commit_ts"  # commit ts of the last change applied to the row
ROWID = "_tidb_rowid"  # the handle of a table without a clustered primary key
OP = "_tidb_op"  # PUT or DELETE, on changes on their way to a MERGE (never stored)
BEFORE_PREFIX = "_tidb_before_"  # + key column: its value at the window's start, on changes (never stored)
TABLE_ID_PROPERTY = "tidelake.tidb_table_id"  # Delta table property: the upstream table id
DEFAULT_DATABASE = "default"  # the folder of tables whose database has no name


def app_id(job_name: str) -> str:
    """The Delta transaction app id of a job: `tidelake:<job name>`."""
    return f"tidelake:{job_name}"


def table_path(warehouse: str, database: str | None, table: str) -> str:
    """Where the Delta table of upstream table `database.table` lives: `<warehouse>/<db>/<table>`."""
    return fs.join(warehouse, database or DEFAULT_DATABASE, table)


def commit_metadata(
    *,
    step: str,
    checkpoint_ts: int,
    resolved_ts: int,
    run_resolved_ts: int,
    upserted: int = 0,
    deleted: int = 0,
    source: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The userMetadata of one of our commits.

    `resolved_ts` is what the table reached with this commit (its txnVersion); `run_resolved_ts` the run's
    global resolved ts; `source` what the source records for its next run (kv-scan: `scans`, the captures
    used; Kafka: per-partition offsets), merged in at the top level.
    """
    return {
        "checkpoint_ts": checkpoint_ts,
        "resolved_ts": resolved_ts,
        "run_resolved_ts": run_resolved_ts,
        "rows": {"upserted": upserted, "deleted": deleted},
        "step": step,
        **(source or {}),
        **(extra or {}),
    }


def upserted_of(metadata: Mapping[str, Any]) -> int:
    """The rows a commit's userMetadata (`commit_metadata`) says it upserted; 0 where it says none."""
    rows = metadata.get("rows")
    return int(rows.get("upserted", 0)) if isinstance(rows, Mapping) else 0


SNAPSHOT_STEP = "snapshot"  # the `step` of the commit that gives a table its first version from a snapshot


def snapshot_metadata(kind: str, path: str, tso: int, table_info: Mapping[str, Any]) -> dict[str, Any]:
    """What a snapshot commit records (`extra` of `commit_metadata`): where its rows came from (`backfill
    status` shows it) and the TableInfo they were read with, which a source whose input carries no schema
    for tables older than its start (a Kafka topic) takes as the table's schema at the TSO."""
    return {"snapshot": {"kind": kind, "path": path, "tso": tso}, "table_info": dict(table_info)}


def snapshot_of(metadata: Mapping[str, Any] | None) -> tuple[dict[str, Any], Mapping[str, Any] | None] | None:
    """(where the rows came from, TableInfo or None for commits of older versions) of a snapshot commit's
    metadata; None for any other commit."""
    if (
        not metadata
        or metadata.get("step") != SNAPSHOT_STEP
        or not isinstance(metadata.get("snapshot"), Mapping)
    ):
        return None
    info = metadata.get("table_info")
    return dict(metadata["snapshot"]), info if isinstance(info, Mapping) else None
