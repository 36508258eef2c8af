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

import runpy
import sys
from importlib.machinery import PathFinder


def _is_archive(entry: str) -> bool:
    return entry.endswith((".zip", ".jar"))


def archives_last(path: list[str]) -> list[str]:
    """The path with its archives left out when pyspark is importable without them, else unchanged."""
    kept = [entry for entry in path if not _is_archive(entry)]
    return kept if PathFinder.find_spec("pyspark", kept) is not None else path


if __name__ == "__main__":
    sys.path[:] = archives_last(sys.path)
    for key in [key for key in sys.path_importer_cache if ".zip" in key or ".jar" in key]:
        del sys.path_importer_cache[key]
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
