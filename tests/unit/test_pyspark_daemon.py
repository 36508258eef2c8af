"""The Python worker daemon leaves Spark's archives off the workers' path only where pyspark is installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tidelake.pyspark_daemon import archives_last

pytestmark = pytest.mark.unit


def test_archives_are_left_out_where_pyspark_is_installed(tmp_path: Path) -> None:
    site = [entry for entry in sys.path if not entry.endswith((".zip", ".jar"))]
    given = [str(tmp_path / "pyspark.zip"), str(tmp_path / "spark-core_2.13-4.0.1.jar"), *site]
    assert archives_last(given) == site


def test_the_path_stays_when_pyspark_is_only_in_the_archive(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    given = [str(tmp_path / "pyspark.zip"), str(tmp_path / "other")]
    assert archives_last(given) == given
