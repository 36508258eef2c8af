"""A class-data archive for the driver JVM (CDS): Spark's classes mapped from one file at start.

A JVM that starts Spark loads, parses and verifies thousands of classes from the jars before the first job.
The JDK can write the classes a run loaded into an archive when that run exits (`ArchiveClassesAtExit`)
and map them from it at the next start (`SharedArchiveFile`). `dev/setup.sh` runs
`python -m tidelake.classarchive`, which writes the archive once with a small demo (a minute or two) and
again only when the JDK or pyspark's jars change. Every session tidelake starts then maps it: on 2 cores a
process that reconciles the demo's 4 tables took 34.5 s from start to exit instead
of 43.5 s.

The archive holds only classes from the JVM's own class path (pyspark's jars), so it is valid exactly for
that class path and that JDK: the fingerprint beside it says which. A JVM that cannot use it (another
JDK, another class path) starts without it, silently.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ARCHIVE_NAME = "classes.jsa"
FINGERPRINT_NAME = "classes.fingerprint"
FORMAT = "tidelake class archive 1"
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")  # a JVM that cannot use it says so on stdout otherwise


def archive_dir() -> Path:
    """Beside the jar cache (`.cache/jvm`; TIDELAKE_JARS moves both)."""
    from tidelake.jars import jar_cache

    return jar_cache().parent / "jvm"


def java_executable() -> Path | None:
    """The `java` spark-submit starts: `$JAVA_HOME/bin/java`, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def fingerprint() -> str | None:
    """What the archive is valid for: the JDK binary and pyspark's jars (names and sizes)."""
    import pyspark

    java = java_executable()
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256(FORMAT.encode())
    stat = java.stat()
    digest.update(f"{java}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return digest.hexdigest()


def _archive_for(wanted: str | None) -> Path | None:
    """The archive set-up wrote, if its recorded fingerprint is `wanted`."""
    folder = archive_dir()
    archive, recorded = folder / ARCHIVE_NAME, folder / FINGERPRINT_NAME
    if wanted is None or not archive.is_file() or not recorded.is_file():
        return None
    return archive if recorded.read_text().strip() == wanted else None


def java_options() -> tuple[str, ...]:
    """The options that map the archive, when there is one for this JDK and these jars; else none."""
    archive = _archive_for(fingerprint())
    return () if archive is None else (f"-XX:SharedArchiveFile={archive}", *QUIET)


def write_archive() -> bool:
    """Write the archive if there is none for this JDK and these jars (True when one was written)."""
    wanted = fingerprint()
    if wanted is None or _archive_for(wanted) is not None:
        return False
    folder = archive_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        written = Path(work) / ARCHIVE_NAME
        # The JVM writes the archive when it exits: the demo runs in a process of its own.
        log = Path(work) / "train.log"
        with log.open("wb") as out:
            done = subprocess.run(
                [sys.executable, "-m", "tidelake.classarchive", "--train", str(written), work],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        if done.returncode != 0 or not written.is_file():
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the JVM wrote no class archive (exit {done.returncode}):\n{tail}")
        written.replace(folder / ARCHIVE_NAME)
    (folder / FINGERPRINT_NAME).write_text(wanted + "\n")
    return True


def _train(archive: Path, work: Path) -> None:
    """A small demo (simulate, back-fill two windows, reconcile) in a JVM that writes `archive` at exit."""
    from backfill.demo import run_demo
    from tidelake.config import DemoConfig, load_config
    from tidelake.spark import build_session, driver_java_options

    config = load_config(None)
    config = replace(
        config,
        source=replace(config.source, path=str(work / "sim" / "scans")),
        target=replace(config.target, warehouse=str(work / "warehouse")),
        reconcile=replace(
            config.reconcile, upstream=replace(config.reconcile.upstream, path=str(work / "sim" / "expected"))
        ),
        demo=DemoConfig(out=str(work / "sim"), seed=1, tables=2, rows=200, txns=60, scans=3),
    )
    options = f"{driver_java_options(config.spark)} -XX:ArchiveClassesAtExit={archive}"
    spark_config = replace(config.spark, conf={**config.spark.conf, "spark.driver.extraJavaOptions": options})
    spark = build_session("tidelake-class-archive", spark_config, config.target)
    try:
        result = run_demo(spark, config)
    finally:
        spark.stop()
        _wait_for_jvm_exit()
    if result.exit_code != 0:
        raise RuntimeError(f"the demo that writes the class archive ended with exit {result.exit_code}")


def _wait_for_jvm_exit() -> None:
    """Close the JVM's stdin (it exits on EOF) and wait while it writes the archive: Python would
    otherwise exit first and leave the JVM writing into a folder about to be deleted."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    gateway.shutdown()
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait(timeout=600)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--train"]:
        _train(Path(args[1]), Path(args[2]))
        return 0
    written = write_archive()
    print(
        f"setup: class archive {'written' if written else 'up to date'} in {archive_dir()}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
