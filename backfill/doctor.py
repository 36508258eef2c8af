"""`backfill doctor`: which Python, Java, Spark, Delta and jars a run on this machine would use, what is
missing, and the spark-submit line for a cluster. Exit 2 when something a run needs is missing."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tidelake import __version__, jars
from tidelake.classarchive import java_executable
from tidelake.config import DEFAULT_CONFIG
from tidelake.spark import class_archive_dir

JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')
SPARK_JAVA = (17, 21)  # the Java releases Spark 4.0 runs on


@dataclass(frozen=True)
class Check:
    """One thing a run needs: what was found, whether it will do, and what to do when it will not."""

    name: str
    found: str
    ok: bool
    hint: str = ""


@dataclass(frozen=True)
class Diagnosis:
    checks: tuple[Check, ...]
    jars: tuple[str, ...]
    submit_application: str

    @property
    def exit_code(self) -> int:
        return 0 if all(c.ok for c in self.checks) else 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == 0,
            "checks": [vars(c) for c in self.checks],
            "jars": list(self.jars),
            "submit_application": self.submit_application,
        }

    def render(self, console: Console) -> None:
        table = Table("", "found", "")
        for check in self.checks:
            mark = "[green]ok[/]" if check.ok else "[bold red]missing[/]"
            table.add_row(check.name, check.found, mark if check.ok else f"{mark}: {check.hint}")
        console.print(table)
        console.print(
            '[bold]on a cluster[/]: spark-submit --master <url> --jars "$(backfill jars)" '
            f"{self.submit_application} run --config <job.toml> (docs/cluster.md)",
            soft_wrap=True,
        )


def java_version(java: Path) -> tuple[str, int | None]:
    """`java -version`'s first line and the release (17 for "17.0.15"; 8 for "1.8.0")."""
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        return f"{java}: {exc.strerror}", None
    first = (done.stderr or done.stdout).strip().splitlines()[:1]
    found = JAVA_VERSION.search(first[0]) if first else None
    if found is None:
        return (first[0] if first else f"{java}: no version"), None
    major = int(found.group(1))
    return first[0], (int(found.group(2) or 0) if major == 1 else major)


def _package(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def diagnose() -> Diagnosis:
    python = sys.version.split()[0]
    checks = [
        Check("tidelake", f"{__version__} in {Path(__file__).resolve().parent.parent}", True),
        Check(
            "python", f"{python} ({sys.executable})", sys.version_info[:2] == (3, 11), "tidelake needs 3.11"
        ),
    ]
    for name, wanted in (("pyspark", "4.0.1"), ("delta-spark", "4.0.1")):
        version = _package(name)
        checks.append(Check(name, version or "not installed", version == wanted, f"install {name}=={wanted}"))
    java = java_executable()
    if java is None:
        checks.append(Check("java", "not found ($JAVA_HOME/bin/java or PATH)", False, "install JDK 17"))
    else:
        line, major = java_version(java)
        checks.append(Check("java", f"{line} ({java})", major in SPARK_JAVA, "Spark 4.0 needs Java 17 or 21"))
    folder = jars.jar_cache()
    missing = jars.missing_jars(folder)
    locked = jars.locked_jars()
    found = f"{len(locked) - len(missing)} of {len(locked)} locked jars in {folder}"
    hint = "run `backfill jars` (fetches them once)" if jars.checkout_root() is None else "run dev/setup.sh"
    if missing:
        found += (
            f"; missing: {', '.join(j.file_name for j in missing[:3])}{' ...' if len(missing) > 3 else ''}"
        )
    checks.append(Check("jars", found, not missing, hint))
    archive = class_archive_dir() / "classes.jsa"
    checks.append(Check("class archive", str(archive) if archive.is_file() else "none (starts slower)", True))
    checks.append(
        Check("default config", str(DEFAULT_CONFIG), DEFAULT_CONFIG.is_file(), "reinstall tidelake")
    )
    listed = tuple(str(folder / j.file_name) for j in locked)
    return Diagnosis(tuple(checks), listed, str(Path(__file__).with_name("__main__.py")))
