"""The slowest Spark jobs of a benchmark's session, with their stages (the session's REST API; start the
session with `SparkConfig(ui=True)`): where a run's seconds go, by job and stage."""

from __future__ import annotations

import json
import urllib.request
from datetime import datetime
from typing import Any


def job_id_next(spark: Any) -> int:
    """The id the session's next job gets: pass it as `since` to see only the jobs after this point."""
    return int(spark._jsc.sc().dagScheduler().nextJobId())


def _get(spark: Any, what: str) -> list[dict[str, Any]]:
    sc = spark.sparkContext
    with urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{what}") as r:
        return json.load(r)


def _seconds(item: dict[str, Any], start: str = "submissionTime") -> float:
    parse = lambda t: datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%f%Z")  # noqa: E731
    return (parse(item["completionTime"]) - parse(item[start])).total_seconds()


def print_slowest_jobs(spark: Any, n: int, since: int = 0) -> None:
    """The `n` longest jobs from job id `since` on, with their call sites, and each one's stages: wall
    seconds, task seconds (run and CPU), input and shuffle megabytes."""
    jobs = [j for j in _get(spark, "jobs") if "completionTime" in j and j["jobId"] >= since]
    stages = {s["stageId"]: s for s in _get(spark, "stages?status=complete")}
    print(f"{len(jobs)} Spark jobs, {sum(map(_seconds, jobs)):.1f}s in all; the slowest:")
    for job in sorted(jobs, key=_seconds, reverse=True)[:n]:
        print(f"  {_seconds(job):7.2f}s  job {job['jobId']:4}  {job['name'][:110]}")
        for sid in sorted(job["stageIds"]):
            s = stages.get(sid)
            if s is None or "completionTime" not in s:
                continue  # skipped (its shuffle output was reused)
            mb = lambda key: s.get(key, 0) / 1e6  # noqa: B023, E731
            print(
                f"      stage {sid:4}  {_seconds(s, 'submissionTime'):6.2f}s  tasks {s['numTasks']:4}  "
                f"run {s['executorRunTime'] / 1e3:6.1f}s  cpu {s['executorCpuTime'] / 1e9:6.1f}s  "
                f"in {mb('inputBytes'):7.1f}MB  shuffle r/w {mb('shuffleReadBytes'):7.1f}/"
                f"{mb('shuffleWriteBytes'):7.1f}MB  {s['name'][:60]}"
            )
