"""The session's Python workers import pyspark from the installed package, with none of Spark's archives
on their path (`tidelake.pyspark_daemon`): each task would otherwise read the archives' directories."""

from __future__ import annotations

import pytest

from tidelake.pyspark_daemon import is_spark_archive

pytestmark = pytest.mark.spark


def _where(_: object) -> object:
    import sys

    import pyspark

    yield pyspark.__file__, tuple(entry for entry in sys.path if is_spark_archive(entry))


def test_workers_import_the_installed_pyspark(spark) -> None:
    import pyspark

    found = set(spark.sparkContext.parallelize(range(4), 4).mapPartitions(_where).collect())
    assert found == {(pyspark.__file__, ())}
