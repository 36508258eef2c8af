"""The class archive is used only where it was written: for this JDK and these pyspark jars."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelake import classarchive, spark
from tidelake.config import SparkConfig
from tidelake.spark import driver_java_options

pytestmark = pytest.mark.unit


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(spark, "class_archive_dir", lambda: tmp_path)
    return tmp_path


def write(folder: Path, fingerprint: str | None) -> None:
    (folder / classarchive.ARCHIVE_NAME).write_bytes(b"archive")
    (folder / classarchive.FINGERPRINT_NAME).write_text(f"{fingerprint}\n")


def test_an_archive_for_this_jdk_and_these_jars_is_mapped_quietly(archive_dir: Path) -> None:
    write(archive_dir, classarchive.fingerprint())
    options = classarchive.java_options(archive_dir)
    assert options[0] == f"-XX:SharedArchiveFile={archive_dir / classarchive.ARCHIVE_NAME}"
    assert set(classarchive.QUIET) <= set(options)
    assert options[0] in driver_java_options(SparkConfig()).split()


def test_an_archive_written_for_another_jdk_or_other_jars_is_left_alone(archive_dir: Path) -> None:
    write(archive_dir, "0" * 64)
    assert classarchive.java_options(archive_dir) == ()
    assert "SharedArchiveFile" not in driver_java_options(SparkConfig())


def test_no_archive_or_no_fingerprint_means_no_option(archive_dir: Path) -> None:
    assert classarchive.java_options(archive_dir) == ()
    (archive_dir / classarchive.FINGERPRINT_NAME).write_text(f"{classarchive.fingerprint()}\n")
    assert classarchive.java_options(archive_dir) == ()  # the fingerprint without its archive


def test_the_fingerprint_follows_the_jdk_and_the_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyspark

    java = tmp_path / "java"
    java.write_bytes(b"jdk one")
    monkeypatch.setattr(classarchive, "java_executable", lambda: java)
    jars = tmp_path / "pyspark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"core")
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "pyspark" / "__init__.py"))
    first = classarchive.fingerprint()
    assert first == classarchive.fingerprint()
    (jars / "spark-sql.jar").write_bytes(b"sql")
    second = classarchive.fingerprint()
    assert second != first
    java.write_bytes(b"jdk two, a longer binary")
    assert classarchive.fingerprint() not in (first, second)
    monkeypatch.setattr(classarchive, "java_executable", lambda: None)
    assert classarchive.fingerprint() is None
