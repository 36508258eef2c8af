"""The Python worker daemon leaves Spark's archives off the workers' path, only where pyspark is installed,
and keeps everything else on it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tidelake.pyspark_daemon import without_spark_archives

pytestmark = pytest.mark.unit


def test_sparks_archives_are_left_out_where_pyspark_is_installed(tmp_path: Path) -> None:
    site = [entry for entry in sys.path if not entry.endswith((".zip", ".jar"))]
    own = str(tmp_path / "our_code.zip")  # a user's zip on PYTHONPATH stays
    given = [
        str(tmp_path / "pyspark.zip"),
        str(tmp_path / "py4j-0.10.9.9-src.zip"),
        str(tmp_path / "spark-core_2.13-4.0.1.jar"),
        own,
        *site,
    ]
    assert without_spark_archives(given) == [own, *site]


def test_the_path_stays_when_pyspark_is_only_in_the_archive(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    given = [str(tmp_path / "pyspark.zip"), str(tmp_path / "other")]
    assert without_spark_archives(given) == given
