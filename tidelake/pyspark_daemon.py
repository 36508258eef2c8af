"""PySpark's Python worker daemon (`spark.python.daemon.module`), started with the interpreter's own
pyspark ahead of the archives Spark puts on the workers' path.

Spark prepends pyspark.zip, py4j's zip and the spark-core jar to a Python worker's PYTHONPATH, so the
workers import pyspark from the zip. Before every task a worker calls `importlib.invalidate_caches()`,
and on Python 3.11 that makes every zip importer read its archive's whole directory again (1,220 entries
in pyspark.zip, 5,261 in the jar, in pure Python): about half of a small task's time, paid by every
Python task. Where pyspark is installed as a package (pip), this daemon leaves the archives off the path,
so the workers import it from there; elsewhere (pyspark only in Spark's zip) the path stays as it was.
"""

from __future__ import annotations

import os
import runpy
import sys
from importlib.machinery import PathFinder


def is_spark_archive(entry: str) -> bool:
    """pyspark.zip, py4j's zip, or a jar: what Spark puts on the path (a user's own zip stays)."""
    name = os.path.basename(entry)
    return (
        name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip")) or name.endswith(".jar")
    )


def without_spark_archives(path: list[str]) -> list[str]:
    """The path without Spark's archives when pyspark is importable without them, else unchanged."""
    kept = [entry for entry in path if not is_spark_archive(entry)]
    return kept if PathFinder.find_spec("pyspark", kept) is not None else path


if __name__ == "__main__":
    kept = without_spark_archives(sys.path)
    removed = set(sys.path) - set(kept)
    sys.path[:] = kept
    for key in [key for key in sys.path_importer_cache if key in removed]:
        del sys.path_importer_cache[key]
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
