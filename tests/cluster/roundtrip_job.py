"""A small job submitted to the standalone cluster by test_cluster.py, through tidelake's session factory.

It writes a Delta table with an idempotent MERGE, reads it back, and prints one JSON line with what it saw:
the master it ran on, the executors that ran its tasks, and the rows.
"""

import json
import sys

from pyspark.sql import functions as F

from tidelake import delta
from tidelake.spark import open_session

if __name__ == "__main__":
    path = sys.argv[1]
    session = open_session("tidelake-cluster-roundtrip")
    spark = session.spark
    try:
        spark.range(0).selectExpr("CAST(id AS INT) AS k", "CAST(id AS STRING) AS v").write.format(
            "delta"
        ).save(path)
        source = (
            spark.range(1000)
            .repartition(4)
            .select(F.col("id").cast("int").alias("k"), F.hex("id").alias("v"))
        )
        for _ in range(2):  # the second run must be a no-op
            delta.merge_with_txn(
                spark, path,
                lambda t: t.alias("t").merge(source.alias("s"), "t.k = s.k").whenNotMatchedInsertAll(),
                app_id="tidelake:cluster", txn_version=42, metadata={"from": "cluster"},
            )  # fmt: skip
        back = spark.read.format("delta").load(path)
        # Executors registered with the driver, besides the driver itself.
        executors = len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1
        print(json.dumps({
            "master": spark.sparkContext.master,
            "count": back.count(),
            "distinct": back.select("k").distinct().count(),
            "sum": back.agg(F.sum("k")).first()[0],
            "txn_version": delta.recorded_txn_version(spark, path, "tidelake:cluster"),
            "table_version": delta.table_version(spark, path),
            "executors": executors,
        }))  # fmt: skip
    finally:
        session.close()
