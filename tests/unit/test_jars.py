"""The JVM packages by Maven coordinates: the lock agrees with what dev/setup.sh resolved, and `backfill jars`
fetches exactly the locked files once, from a Maven repository layout (here a file:// one made from the
checkout's jars, so the test needs no network), refusing a file whose sha256 is not the locked one."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from backfill.cli import main
from tidelake import jars
from tidelake.errors import TidelakeError

pytestmark = pytest.mark.unit

DEV_JARS = Path(__file__).resolve().parents[2] / ".cache" / "jars"


def test_the_lock_names_every_jar_setup_fetched_with_its_sha256() -> None:
    locked = {j.file_name: j.sha256 for j in jars.locked_jars()}
    fetched = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in DEV_JARS.glob("*.jar")}
    assert locked == fetched, "dev/jars/pom.xml changed: run dev/setup.sh, then dev/jars/lock.py"
    assert {"delta-spark_2.13", "hadoop-aws", "spark-sql-kafka-0-10_2.13", "mariadb-java-client"} <= {
        j.artifact for j in jars.locked_jars()
    }


def test_a_lock_line_that_is_not_coordinates_and_sha_is_a_config_error() -> None:
    assert jars.parse_lock("# c\n\nio.delta:delta-storage:4.0.1 ab\n") == (
        jars.LockedJar("io.delta", "delta-storage", "4.0.1", "ab"),
    )
    with pytest.raises(TidelakeError, match=r"jars.lock:2: not 'group:artifact:version sha256'"):
        jars.parse_lock("# c\nio.delta:delta-storage ab\n")


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A Maven repository layout (group/artifact/version/artifact-version.jar) of the checkout's jars."""
    root = tmp_path / "maven"
    for jar in jars.locked_jars():
        url_path = jar.url(str(root)).removeprefix(str(root) + "/")
        (root / url_path).parent.mkdir(parents=True)
        shutil.copyfile(DEV_JARS / jar.file_name, root / url_path)
    return root


def test_fetch_downloads_each_locked_jar_once(repository: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "jars"
    fetched: list[str] = []
    paths = jars.fetch_jars(folder, repository.as_uri(), on_fetch=lambda j: fetched.append(j.file_name))
    assert sorted(p.name for p in folder.iterdir()) == sorted(j.file_name for j in jars.locked_jars())
    assert [p.name for p in paths] == [j.file_name for j in jars.locked_jars()] and len(fetched) == len(paths)
    assert jars.missing_jars(folder) == []
    again: list[str] = []
    jars.fetch_jars(folder, repository.as_uri(), on_fetch=lambda j: again.append(j.file_name))
    assert again == [], "a second fetch downloads nothing"
    assert jars.cached_jars(folder) == sorted(str(p) for p in paths)


def test_a_jar_whose_sha256_differs_is_refused_and_not_kept(repository: Path, tmp_path: Path) -> None:
    (delta,) = [j for j in jars.locked_jars() if j.artifact == "delta-storage"]
    Path(delta.url(str(repository))).write_bytes(b"not the jar")
    folder = tmp_path / "jars"
    with pytest.raises(TidelakeError, match=r"delta-storage-4\.0\.1\.jar: sha256 \w+ is not the locked"):
        jars.fetch_jars(folder, repository.as_uri(), [delta])
    assert list(folder.iterdir()) == []


def test_backfill_jars_prints_the_list_for_spark_submit(repository: Path, tmp_path: Path, capsys) -> None:
    folder = tmp_path / "jars"
    code = main(["jars", "--repository", repository.as_uri(), "--folder", str(folder), "--without-delta"])
    out, err = capsys.readouterr()
    assert code == 0
    listed = out.strip().split(",")
    assert len(listed) == len(jars.locked_jars()) - 2 and all(Path(p).is_file() for p in listed)
    assert (
        not any("delta" in Path(p).name for p in listed)
        and "backfill jars: fetching software.amazon.awssdk:s3:2.24.8\n" in err
    )
    assert "error" not in err


def test_backfill_jars_from_an_unreachable_repository_exits_2(tmp_path: Path, capsys) -> None:
    code = main(["jars", "--repository", (tmp_path / "none").as_uri(), "--folder", str(tmp_path / "jars")])
    assert code == 2
    assert "cannot fetch" in capsys.readouterr().err


def test_doctor_says_what_a_run_would_use_and_what_is_missing(tmp_path: Path, capsys, monkeypatch) -> None:
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    names = {c["name"]: c for c in report["checks"]}
    assert {"python", "java", "pyspark", "delta-spark", "jars", "default config"} <= set(names)
    assert names["java"]["found"].startswith(('openjdk version "17', 'openjdk version "21'))
    monkeypatch.setenv("TIDELAKE_JARS", str(tmp_path))
    assert main(["doctor", "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    (check,) = [c for c in report["checks"] if c["name"] == "jars"]
    assert not check["ok"] and check["found"].startswith(
        f"0 of {len(jars.locked_jars())} locked jars in {tmp_path}"
    )


def test_version_is_the_package_version(capsys) -> None:
    from importlib import metadata

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"backfill {metadata.version('tidelake')}\n"
