"""Write tidelake/jars.lock from the jars dev/setup.sh copied into .cache/jars.

The lock names every jar by its Maven coordinates and sha256, so `backfill jars` fetches exactly the set that
dev/setup.sh resolves from dev/jars/pom.xml, without Maven. Run after changing the pom and rerunning setup:

    dev/setup.sh && .venv/bin/python dev/jars/lock.py

Each jar's coordinates come from where Maven keeps it in the local repository (~/.m2/repository/<group
path>/<artifact>/<version>/<artifact>-<version>.jar). tests/unit/test_jars.py fails when the lock and
.cache/jars disagree.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADER = (
    "# The JVM packages tidelake puts on spark.jars: Maven coordinates and sha256, one a line.\n"
    "# Written by dev/jars/lock.py from what dev/setup.sh resolves from dev/jars/pom.xml; read by `backfill jars`.\n"
)


def coordinates(jar: Path, repository: Path) -> str:
    """group:artifact:version of a jar Maven copied, from its place in the local repository."""
    found = [
        p
        for p in repository.rglob(jar.name)
        if p.parent.parent.name + "-" + p.parent.name + ".jar" == jar.name
    ]
    if len(found) != 1:
        raise SystemExit(f"lock: {jar.name}: found {len(found)} copies in {repository}, want 1")
    version_dir = found[0].parent
    group = version_dir.parent.parent.relative_to(repository).as_posix().replace("/", ".")
    return f"{group}:{version_dir.parent.name}:{version_dir.name}"


def main() -> int:
    repository = Path.home() / ".m2" / "repository"
    lines = []
    for jar in sorted((ROOT / ".cache" / "jars").glob("*.jar")):
        digest = hashlib.sha256(jar.read_bytes()).hexdigest()
        lines.append(f"{coordinates(jar, repository)} {digest}\n")
    (ROOT / "tidelake" / "jars.lock").write_text(HEADER + "".join(lines))
    print(f"lock: {len(lines)} jars", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
