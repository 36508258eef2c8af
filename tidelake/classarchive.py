"""A class-data archive for the driver JVM (CDS): Spark's classes mapped from one file at start.

A JVM that starts Spark loads, parses and verifies thousands of classes from the jars before the first job.
The JDK can write the classes a run loaded into an archive when that run exits (`ArchiveClassesAtExit`)
and map them from it at the next start (`SharedArchiveFile`). `dev/setup.sh` runs
`dev/class_archive.py`, which writes the archive once with a small demo (a minute or two) and
again only when the JDK or pyspark's jars change. Every session tidelake starts then maps it and reaches
its first job seconds sooner (bench/NOTES.md "Class archive").

The archive holds only classes from the JVM's own class path (pyspark's jars), so it is valid exactly for
that class path and that JDK: the fingerprint beside it says which. A JVM that cannot use it (another
JDK, another class path) starts without it, silently.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

ARCHIVE_NAME = "classes.jsa"
FINGERPRINT_NAME = "classes.fingerprint"
FORMAT = "tidelake class archive 1"
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")  # a JVM that cannot use it says so on stdout otherwise


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


def _archive_for(folder: Path, wanted: str | None) -> Path | None:
    """The archive set-up wrote in `folder`, if its recorded fingerprint is `wanted`."""
    archive, recorded = folder / ARCHIVE_NAME, folder / FINGERPRINT_NAME
    if wanted is None or not archive.is_file() or not recorded.is_file():
        return None
    return archive if recorded.read_text().strip() == wanted else None


def java_options(folder: Path) -> tuple[str, ...]:
    """The options that map the archive in `folder`, when there is one for this JDK and these jars; else
    none. The folder is `tidelake.spark.class_archive_dir()`, beside the jar cache."""
    archive = _archive_for(folder, fingerprint())
    return () if archive is None else (f"-XX:SharedArchiveFile={archive}", *QUIET)


def write_archive(folder: Path, train: Sequence[str]) -> bool:
    """Write the archive in `folder` if there is none for this JDK and these jars (True when one was
    written).

    `train` is the command that runs a small workload in a JVM that writes the archive at exit; it gets
    the archive's path and a scratch folder as its last two arguments. The workload is the product's
    (`dev/class_archive.py` runs the demo): this module only knows the archive."""
    wanted = fingerprint()
    if wanted is None or _archive_for(folder, wanted) is not None:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        written = Path(work) / ARCHIVE_NAME
        # The JVM writes the archive when it exits: the workload runs in a process of its own.
        log = Path(work) / "train.log"
        with log.open("wb") as out:
            done = subprocess.run([*train, str(written), work], stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0 or not written.is_file():
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the JVM wrote no class archive (exit {done.returncode}):\n{tail}")
        written.replace(folder / ARCHIVE_NAME)
    (folder / FINGERPRINT_NAME).write_text(wanted + "\n")
    return True


def wait_for_jvm_exit() -> None:
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
