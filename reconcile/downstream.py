"""The Delta side: which version to read, and the resolved ts it stands for.

Every backfill commit's JSON userMetadata carries `resolved_ts`; a commit without one (OPTIMIZE, a
manual write) keeps the ts of the commit before it. The version chosen is the newest one whose
resolved ts equals the wanted ts (`--at-ts`, or a Dumpling export's snapshot ts), else the latest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconcile.errors import TableNotFound
from tidelake import delta
from tidelake.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class VersionTs:
    version: int
    resolved_ts: int | None


@dataclass(frozen=True)
class DeltaSnapshot:
    path: str
    version: int
    resolved_ts: int | None
    df: DataFrame


def resolved_history(commits: Sequence[tuple[int, Mapping[str, Any] | None]]) -> list[VersionTs]:
    """(version, userMetadata) in any order -> each version with the resolved ts in force at it."""
    out = []
    current: int | None = None
    for version, metadata in sorted(commits, key=lambda c: c[0]):
        ts = (metadata or {}).get("resolved_ts")
        if isinstance(ts, int) and not isinstance(ts, bool):
            current = ts
        out.append(VersionTs(version, current))
    return out


def choose_version(history: Sequence[VersionTs], at_ts: int | None, *, exact: bool = True) -> VersionTs:
    """The newest version at `at_ts` (None: the latest). `exact=False` accepts the newest at or below it."""
    if not history:
        raise InputError("the Delta table has no commits")
    if at_ts is None:
        return history[-1]
    matches = [h for h in history if h.resolved_ts == at_ts]
    if matches:
        return matches[-1]
    if not exact:
        below = [h for h in history if h.resolved_ts is not None and h.resolved_ts <= at_ts]
        if below:
            return below[-1]
    known = sorted({h.resolved_ts for h in history if h.resolved_ts is not None})
    shown = ", ".join(map(str, known[-5:])) or "none"
    raise InputError(f"no Delta version has resolved ts {at_ts} (the newest recorded: {shown})")


def version_history(
    spark: SparkSession, path: str, app_id: str, *, latest_only: bool = False
) -> list[VersionTs]:
    """The versions of the Delta table at `path` with the resolved ts each stands for, oldest first;
    `latest_only`: just the newest commits back to the first that records a resolved ts (no Spark job)."""
    history = resolved_history(_latest_commits(spark, path) if latest_only else _all_commits(spark, path))
    if history and history[-1].resolved_ts is None:
        recorded = delta.recorded_txn_version(spark, path, app_id)  # older commits without metadata
        if recorded is not None:
            history[-1] = VersionTs(history[-1].version, recorded)
    return history


def open_snapshot(
    spark: SparkSession, path: str, app_id: str, at_ts: int | None, *, exact: bool = True
) -> DeltaSnapshot:
    """Read the Delta table at the version chosen for `at_ts`."""
    if not delta.is_delta_table(spark, path):
        raise TableNotFound(f"no Delta table at {path}")
    history = version_history(spark, path, app_id, latest_only=at_ts is None)
    chosen = choose_version(history, at_ts, exact=exact)
    df = spark.read.format("delta").option("versionAsOf", chosen.version).load(path)
    return DeltaSnapshot(path, chosen.version, chosen.resolved_ts, df)


def _all_commits(spark: SparkSession, path: str) -> list[tuple[int, Mapping[str, Any] | None]]:
    from delta.tables import DeltaTable

    rows = DeltaTable.forPath(spark, path).history().select("version", "userMetadata").collect()
    return [(int(r["version"]), delta.json_object(r["userMetadata"])) for r in rows]


def _latest_commits(spark: SparkSession, path: str) -> list[tuple[int, Mapping[str, Any] | None]]:
    """The newest commits back to the first that records a resolved ts: all the latest version needs,
    read from the log files on the driver (no Spark job; usually one file)."""
    commits: list[tuple[int, Mapping[str, Any] | None]] = []
    for version in range(delta.table_version(spark, path), -1, -1):
        metadata = delta.json_object(delta.commit_user_metadata(spark, path, version))
        commits.append((version, metadata))
        if metadata is not None and isinstance(metadata.get("resolved_ts"), int):
            break
        if len(commits) >= 50:  # many foreign commits in a row: the full history is as cheap
            return _all_commits(spark, path)
    return commits
