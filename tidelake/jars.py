"""The JVM packages on spark.jars (delta-spark, hadoop-aws with the S3 client, the Kafka connector, the
MariaDB JDBC driver): where they are, and fetching them once by their Maven coordinates.

`jars.lock` (package data) names each jar by coordinates and sha256: the set `dev/setup.sh` resolves from
`dev/jars/pom.xml` (written by `dev/jars/lock.py`). A checkout keeps them in `.cache/jars` (setup copies
them there); an installed package keeps them in the user cache, where `backfill jars` downloads them from
Maven Central (or a mirror) once. A Spark session never downloads at start: it takes the folder as it is.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tidelake.errors import ConfigError, TidelakeError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
LOCK = Path(__file__).with_name("jars.lock")
# Spark runtimes that ship Delta themselves (Databricks, some EMR and Dataproc images) take the jars without these.
DELTA_ARTIFACTS = frozenset({"delta-spark_2.13", "delta-storage"})


@dataclass(frozen=True)
class LockedJar:
    """One jar of the lock: Maven coordinates and the sha256 of its file."""

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    def url(self, repository: str) -> str:
        group_path = self.group.replace(".", "/")
        return f"{repository.rstrip('/')}/{group_path}/{self.artifact}/{self.version}/{self.file_name}"


def parse_lock(text: str) -> tuple[LockedJar, ...]:
    """The jars of a lock file's text (`group:artifact:version sha256` lines, `#` comments)."""
    jars = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            coordinates, sha256 = line.split()
            group, artifact, version = coordinates.split(":")
        except ValueError:
            raise ConfigError(f"{LOCK}:{number}: not 'group:artifact:version sha256': {line!r}") from None
        jars.append(LockedJar(group, artifact, version, sha256))
    return tuple(jars)


def locked_jars() -> tuple[LockedJar, ...]:
    return parse_lock(LOCK.read_text(encoding="utf-8"))


def checkout_root() -> Path | None:
    """The git checkout this package runs from (it has dev/setup.sh beside the package), else None: an
    installed package's parent folder is site-packages."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "dev" / "setup.sh").is_file() else None


def user_cache() -> Path:
    """tidelake's cache folder for an installed package: $TIDELAKE_CACHE, else $XDG_CACHE_HOME/tidelake,
    else ~/.cache/tidelake."""
    if given := os.environ.get("TIDELAKE_CACHE"):
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tidelake"


def cache_folder(name: str) -> Path:
    """A folder of fetched things: the checkout's `.cache/<name>` (dev/setup.sh fills it), or the user
    cache's `<name>` for an installed package."""
    root = checkout_root()
    return root / ".cache" / name if root is not None else user_cache() / name


def jar_cache() -> Path:
    """Folder of the jars for spark.jars: $TIDELAKE_JARS, else `cache_folder("jars")`."""
    given = os.environ.get("TIDELAKE_JARS")
    return Path(given) if given else cache_folder("jars")


def _fetch_hint() -> str:
    if checkout_root() is not None:
        return "run dev/setup.sh first (it fetches the JVM packages once)"
    return "run `backfill jars` first (it fetches the JVM packages once from Maven Central)"


def cached_jars(folder: Path | None = None) -> list[str]:
    """The jars in `folder` (default `jar_cache()`) for spark.jars; ConfigError without delta-spark."""
    folder = jar_cache() if folder is None else folder
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not any("delta-spark" in Path(j).name for j in jars):
        raise ConfigError(f"no delta-spark jar in {folder}: {_fetch_hint()}")
    return jars


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def missing_jars(folder: Path, jars: Sequence[LockedJar] | None = None) -> list[LockedJar]:
    """The locked jars `folder` lacks or holds with other content."""
    wanted = locked_jars() if jars is None else jars
    return [
        j for j in wanted if not (folder / j.file_name).is_file() or _sha256(folder / j.file_name) != j.sha256
    ]


def fetch_jars(
    folder: Path,
    repository: str = MAVEN_CENTRAL,
    jars: Sequence[LockedJar] | None = None,
    on_fetch: Callable[[LockedJar], None] = lambda jar: None,
    timeout: float = 60.0,
) -> list[Path]:
    """Download the locked jars `folder` lacks from the Maven repository `repository`, each checked against
    its sha256 before it takes its name in the folder; return every locked jar's path."""
    wanted = locked_jars() if jars is None else jars
    folder.mkdir(parents=True, exist_ok=True)
    for jar in missing_jars(folder, wanted):
        on_fetch(jar)
        url = jar.url(repository)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".part", delete=False) as part:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    for block in iter(lambda: response.read(1 << 20), b""):
                        part.write(block)
            except (urllib.error.URLError, OSError) as exc:
                Path(part.name).unlink(missing_ok=True)
                reason = getattr(exc, "reason", None) or exc
                raise TidelakeError(f"{url}: cannot fetch {jar.coordinates}: {reason}") from None
        got = _sha256(Path(part.name))
        if got != jar.sha256:
            Path(part.name).unlink(missing_ok=True)
            raise TidelakeError(f"{url}: sha256 {got} is not the locked {jar.sha256} of {jar.coordinates}")
        Path(part.name).replace(folder / jar.file_name)
    return [folder / j.file_name for j in wanted]
