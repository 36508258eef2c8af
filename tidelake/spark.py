"""The one place a SparkSession is made.

Locally (`local[*]` or a `spark://` master from the config) the session gets the Delta extension and
catalog and the JVM packages from the set-up cache on `spark.jars`, so nothing is downloaded at session
start. Under `spark-submit` the session is the one spark-submit configured: its master and jars are kept,
and only the Delta settings it lacks are added.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from tidelake import classarchive, output
from tidelake.config import SparkConfig
from tidelake.jars import cached_jars, jar_cache
from tidelake.objectstore import configure, object_store_errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.config import TargetConfig, TidelakeConfig

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# Delta 4.0.1 checks the file list it keeps in each commit's checksum against a full rebuild of the table
# state, at every commit, when the session's, the JVM's or the system's time zone is not UTC: a check for
# the statistics of timestamps before 1883, which differ by zone. That is two more Spark jobs and about a
# second a commit on a laptop outside UTC, and nothing in UTC; off, every zone commits as UTC does.
DELTA_CHECKSUM_CHECK_OUTSIDE_UTC = (
    "spark.databricks.delta.allFilesInCrc.verificationMode.forceOnNonUTC.enabled"
)
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
LOG4J_OPTION = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
# The driver JVM's JIT compilers, by `[spark] jit`. Spark and Delta run much of their code only a few times a
# query, and a short run is mostly that code: "quick" keeps the JVM to its quick compiler (C1), so it does not
# spend the run's first minute compiling with the optimizing one (C2) beside the work on 2 cores; warmed up,
# its code is slower (figures: bench/NOTES.md "Driver JIT"). Without tiering the JVM reserves 48 MB for
# compiled code instead of 240 MB: the demo filled that and the JVM stopped compiling ("CodeCache is full"
# on stderr), so "quick" keeps the tiered size.
JIT_OPTIONS = MappingProxyType(
    {"tiered": (), "quick": ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")}
)
# The driver JVM's collector: the parallel (throughput) one, for batch work. In local mode the driver runs every
# task, and they fill the heap with short-lived rows, Arrow buffers and shuffle blocks (bench/NOTES.md "Driver
# collector").
GC_OPTION = "-XX:+UseParallelGC"

# Small work (below these bounds) runs with settings for small data:
# - interpreted: Spark compiles Java code for every query shape it has not seen (whole-stage codegen), and
#   every table's schema is a new shape. For a table of a few thousand rows the compiling (and the JIT work
#   on the classes it makes) costs more than it saves; for big work it is the other way round.
# - without adaptive execution, on one shuffle partition: adaptive execution runs each shuffle's map side
#   (and each Delta log replay's) as a Spark job of its own, to re-plan on sizes that are tiny anyway.
# Figures: bench/NOTES.md "Small-work settings".
SMALL_WORK = MappingProxyType(
    {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": "1",
    }
)
SMALL_WORK_ROWS = 10_000  # rows of changes
SMALL_TABLE_BYTES = 1 << 20  # bytes of the table the work reads (~40k rows of a dozen columns)


def execution_conf(rows: int, table_bytes: int = 0) -> Mapping[str, str] | None:
    """Session settings for a step that handles `rows` changes and reads a table of `table_bytes`:
    `SMALL_WORK` for small work, None (the session's own) otherwise."""
    return SMALL_WORK if rows <= SMALL_WORK_ROWS and table_bytes <= SMALL_TABLE_BYTES else None


def class_archive_dir() -> Path:
    """Where set-up writes the driver JVM's class archive (tidelake/classarchive.py): beside the jar cache
    (`.cache/jvm`; TIDELAKE_JARS moves both)."""
    return jar_cache().parent / "jvm"


def under_spark_submit() -> bool:
    """True when this Python process was started by spark-submit (the JVM already exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


@dataclass
class SessionHandle:
    """A session and whether we made it: stop only a session you created."""

    spark: SparkSession
    owned: bool

    def close(self) -> None:
        if self.owned:
            self.spark.stop()


def open_session(
    app_name: str, config: SparkConfig | None = None, target: TargetConfig | None = None
) -> SessionHandle:
    """Return the active session if there is one, else build one from `config` (with `target`'s
    metastore when it registers tables)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return SessionHandle(active, owned=False)
    return SessionHandle(build_session(app_name, config or SparkConfig(), target), owned=True)


@contextmanager
def session_for(settings: TidelakeConfig, purpose: str) -> Iterator[SparkSession]:
    """The session a command works in: the active one or one made (and stopped) for it, with the
    `[object_store]` settings on it; S3 failures inside the block become errors naming endpoint and bucket."""
    session = open_session(f"tidelake-{purpose}-{settings.job.name}", settings.spark, settings.target)
    try:
        configure(session.spark, settings.object_store)
        with object_store_errors(settings.object_store):
            yield session.spark
    finally:
        session.close()


def build_session(app_name: str, config: SparkConfig, target: TargetConfig | None = None) -> SparkSession:
    """A session for `config`; with a `target` that registers tables, Hive-enabled on its metastore
    (tidelake/metastore.py), else with Spark's in-memory catalog."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if under_spark_submit():
        given = SparkConf()  # what spark-submit passed; master and jars stay as given
        if not given.contains("spark.sql.extensions"):
            builder = builder.config("spark.sql.extensions", DELTA_EXTENSION)
        if not given.contains("spark.sql.catalog.spark_catalog"):
            builder = builder.config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        if not given.contains(DELTA_CHECKSUM_CHECK_OUTSIDE_UTC):
            builder = builder.config(DELTA_CHECKSUM_CHECK_OUTSIDE_UTC, "false")
        return builder.getOrCreate()

    # Bind to loopback unless told otherwise: a laptop run needs no network, and CI has none.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers run the interpreter that runs us (the venv with pyarrow and the codec).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {
        "spark.master": config.master,
        "spark.driver.extraJavaOptions": driver_java_options(config, target),
        "spark.executor.extraJavaOptions": LOG4J_OPTION,
        "spark.driver.host": os.environ["SPARK_LOCAL_IP"],
        "spark.jars": ",".join(cached_jars()),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        "spark.default.parallelism": str(config.shuffle_partitions),
        "spark.driver.memory": config.driver_memory,
        "spark.ui.enabled": str(config.ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Arrow batches to and from Python workers (mapInArrow) of 50,000 rows, not 10,000, and at most
        # 64 MiB: fewer, bigger batches are faster; the byte cap costs a size check per row but keeps a batch
        # of big rows (TiDB allows entries of 120 MiB) inside Arrow's 2 GiB vectors and the JVM's memory
        # (bench/NOTES.md "Arrow batches to Python workers").
        "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
        "spark.sql.execution.arrow.maxBytesPerBatch": str(64 << 20),
        # PySpark's DataFrame debugging records the Python call site of every `functions` call (a stack
        # walk and several JVM round trips each; bench/NOTES.md "DataFrame debugging").
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Python workers that import pyspark from its installed package, not from Spark's zip: that costs
        # half of a small task's time otherwise (tidelake/pyspark_daemon.py)
        "spark.python.daemon.module": "tidelake.pyspark_daemon",
        "spark.databricks.delta.snapshotPartitions": "2",
        DELTA_CHECKSUM_CHECK_OUTSIDE_UTC: "false",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
        # The backfill caches its collapsed and decoded changes once and reads them once or twice: building
        # compressed column batches costs more CPU than the memory it saves (MEMORY_AND_DISK spills anyway).
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.catalogImplementation": "in-memory",
        **_catalog_settings(target),
        **config.conf,
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    with jvm_output_to_stderr():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if output.verbose() else "ERROR")
    return spark


# What the JVM prints at every start on its own: not ours, and no use to a user (`--verbose` shows it).
JVM_CHATTER = (
    b"WARNING: Using incubator modules:",
    b"Setting default log level to",
    b"To adjust logging level use sc.setLogLevel",
)


@contextmanager
def jvm_output_to_stderr() -> Iterator[None]:
    """Start the JVM (if this block starts it) with its stdout and stderr on a pipe that a thread of ours
    copies to our stderr, without the JVM's start-up chatter (`JVM_CHATTER`) unless `--verbose`: stdout
    belongs to the result (`--json`), and Spark and Delta print to the console (VACUUM: "Deleted N files
    and directories ..."). Our own stdout and stderr are back as they were after the block."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None:  # the JVM runs already: its output is set
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    saved_out, saved_err = os.dup(1), os.dup(2)
    forward = threading.Thread(
        target=_copy_jvm_output, args=(read_end, saved_err, output.verbose()), name="tidelake-jvm-output",
        daemon=True,
    )  # fmt: skip
    forward.start()
    try:
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        os.close(saved_out)
        os.close(write_end)  # the JVM holds the pipe from here on; its end is the copier's end


def _copy_jvm_output(read_end: int, stderr_fd: int, verbose: bool) -> None:
    """Copy lines from the JVM's pipe to `stderr_fd` (a duplicate of our stderr) until the JVM closes it."""
    with os.fdopen(read_end, "rb") as lines, os.fdopen(stderr_fd, "wb", buffering=0) as stderr:
        for line in lines:
            if verbose or not line.startswith(JVM_CHATTER):
                stderr.write(line)


def _catalog_settings(target: TargetConfig | None) -> dict[str, str]:
    from tidelake.metastore import metastore_settings

    return metastore_settings(target) if target is not None else {}


def driver_java_options(config: SparkConfig, target: TargetConfig | None = None) -> str:
    """The driver JVM's options: our log settings, the collector, the JIT of `[spark] jit`, the class archive
    when set-up wrote one (tidelake/classarchive.py), and the embedded metastore's Derby settings when
    `target` registers tables."""
    from tidelake.metastore import derby_java_options

    catalog = derby_java_options(target) if target is not None else ""
    options = [
        LOG4J_OPTION,
        GC_OPTION,
        *JIT_OPTIONS[config.jit],
        *classarchive.java_options(class_archive_dir()),
        catalog,
    ]
    return " ".join(filter(None, options))
