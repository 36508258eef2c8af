"""Benchmark reconcile against a full pull: ``python bench/reconcile.py --rows 2000000``.

Starts a throwaway MariaDB (tests.servers.MariaDBServer), makes a table of ``--rows`` rows and its Delta
copy from one Spark DataFrame (MariaDB loads Spark's CSV with LOAD DATA), then for the equal case and for
a case with ``--diffs`` differences (a third each changed, deleted and inserted upstream) prints:
wall time, rows/s, bytes read from the upstream (every byte pymysql received), and the time of the
naive way in the same run: pull the whole upstream table into Spark (pymysql, in parallel, via Arrow)
and diff it against the Delta table with one full outer join.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and bench/reconcile.py would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.servers

import pymysql  # noqa: E402

from reconcile import engine  # noqa: E402
from reconcile.chunks import ranges_from_boundaries  # noqa: E402
from reconcile.diff import diff_keyed  # noqa: E402
from reconcile.encoding import FloatDigits  # noqa: E402
from reconcile.options import RunOptions  # noqa: E402
from reconcile.schema import compare_schemas  # noqa: E402
from reconcile.sparkside import rows_to_frame  # noqa: E402
from reconcile.upstream.sql import SqlUpstream  # noqa: E402
from tests.servers import MariaDBServer  # noqa: E402
from tidelake import delta  # noqa: E402
from tidelake.config import (  # noqa: E402
    ReconcileConfig,
    SparkConfig,
    TidelakeConfig,
    UpstreamConfig,
    load_config,
)
from tidelake.configload import Secret  # noqa: E402
from tidelake.spark import build_session  # noqa: E402

DB, TABLE = "bench", "orders"
DDL = f"""CREATE TABLE {DB}.{TABLE} (
  id BIGINT NOT NULL PRIMARY KEY, customer INT NOT NULL, status VARCHAR(16) NOT NULL, sku VARCHAR(32),
  amount DECIMAL(12,2) NOT NULL, quantity SMALLINT NOT NULL, weight DOUBLE, created DATETIME(6) NOT NULL,
  note VARCHAR(64)) ENGINE=InnoDB"""
SPARK_COLUMNS = """id * 7 AS id, CAST(id % 100003 AS INT) AS customer,
  element_at(array('new', 'paid', 'shipped', 'returned'), CAST(id % 4 AS INT) + 1) AS status,
  CASE WHEN id % 13 = 0 THEN NULL ELSE substr(md5(CAST(id AS STRING)), 1, 20) END AS sku,
  CAST((id * 37) % 10000000 / 100 AS DECIMAL(12,2)) AS amount, CAST(id % 50 AS SMALLINT) AS quantity,
  CASE WHEN id % 17 = 0 THEN NULL ELSE CAST(id AS DOUBLE) / 7 END AS weight,
  timestamp_ntz'2020-01-01 00:00:00' + make_dt_interval(0, 0, 0, id * 1.000013) AS created,
  CASE WHEN id % 5 = 0 THEN '' ELSE concat('note ', CAST(id % 997 AS STRING)) END AS note"""


def load(spark, server: MariaDBServer, rows: int, work: Path) -> str:
    """The same rows into MariaDB (LOAD DATA of Spark's CSV) and into a Delta table; returns its path."""
    df = spark.range(rows).selectExpr(*[c.strip() for c in _split(SPARK_COLUMNS)])
    warehouse = work / "warehouse"
    path = str(warehouse / DB / TABLE)
    with delta.delta_transaction(spark, "tidelake:bench", 1, {"resolved_ts": 1, "checkpoint_ts": 0}):
        df.write.format("delta").save(path)
    csv = work / "csv"
    spark.read.format("delta").load(path).write.option("sep", "\t").option("nullValue", "\\N").option(
        "emptyValue", ""
    ).option("timestampNTZFormat", "yyyy-MM-dd HH:mm:ss.SSSSSS").option("quoteAll", False).option(
        "escapeQuotes", False
    ).csv(str(csv))
    with _root(server) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(DDL)
        for part in sorted(csv.glob("part-*.csv")):
            cur.execute(
                f"LOAD DATA INFILE %s INTO TABLE {DB}.{TABLE} FIELDS TERMINATED BY '\\t' "
                "OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\n'",
                (str(part),),
            )
    shutil.rmtree(csv)
    return str(warehouse)


def _split(columns: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in columns:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def _create_user(server: MariaDBServer) -> None:
    with _root(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE USER IF NOT EXISTS 'tidelake'@'%%' IDENTIFIED BY %s", (server.password,))
        cur.execute("GRANT ALL ON *.* TO 'tidelake'@'%'")


def _root(server: MariaDBServer) -> pymysql.connections.Connection:
    return pymysql.connect(
        host="127.0.0.1", port=server.port, user="root", autocommit=True, local_infile=True
    )


def settings(server: MariaDBServer, warehouse: str, parallelism: int) -> TidelakeConfig:
    base = load_config()
    upstream = UpstreamConfig(
        kind="mariadb", host="127.0.0.1", port=server.port, user="tidelake", password=Secret(server.password)
    )
    return TidelakeConfig(
        source=base.source,
        target=type(base.target)(warehouse=warehouse),
        job=base.job,
        spark=base.spark,
        reconcile=ReconcileConfig(upstream=upstream, tables=(f"{DB}.{TABLE}",), parallelism=parallelism),
    )


def reconcile_once(spark, config: TidelakeConfig) -> tuple[float, int, int]:
    """(seconds, differing rows, upstream bytes) of one `reconcile run`."""
    options = RunOptions.from_config(config.reconcile)
    began = time.perf_counter()
    upstream = SqlUpstream(config.reconcile.upstream, options.parallelism)
    try:
        result = engine.run(spark, config, options, upstream)
    finally:
        upstream.close()
    return time.perf_counter() - began, result.differences, result.upstream_bytes


def full_pull(spark, config: TidelakeConfig) -> tuple[float, int, int]:
    """(seconds, differing rows, upstream bytes) of the naive way: pull everything, one full outer join."""
    options = RunOptions.from_config(config.reconcile)
    began = time.perf_counter()
    upstream = SqlUpstream(config.reconcile.upstream, options.parallelism)
    try:
        schema = upstream.schema(DB, TABLE)
        snapshot = spark.read.format("delta").load(f"{config.target.warehouse}/{DB}/{TABLE}")
        comparison = compare_schemas(
            schema, {f.name: f.dataType.simpleString() for f in snapshot.schema.fields}
        )
        digits = FloatDigits.for_tolerance(options.float_tolerance)
        with upstream.open_table(schema, comparison.columns, digits, None) as reader:
            ranges = ranges_from_boundaries(
                reader.boundaries(100_000)
            )  # parallel reads, like a JDBC partitioning
            with ThreadPoolExecutor(max_workers=options.parallelism) as pool:
                parts = list(
                    pool.map(lambda r: rows_to_frame(spark, comparison.columns, reader.rows([r])), ranges)
                )
        pulled = parts[0]
        for part in parts[1:]:
            pulled = pulled.unionByName(part)
        diff = diff_keyed(pulled, snapshot, comparison, tolerance=options.float_tolerance, sample_size=0)
        differing = diff.counts.total
        diff.differences.unpersist()
    finally:
        upstream.close()
    return time.perf_counter() - began, differing, upstream.bytes_received


def make_differences(server: MariaDBServer, rows: int, count: int) -> None:
    """A third each: changed, deleted, inserted upstream (spread over the key space)."""
    step = max(1, rows // (count + 1))
    ids = [(i * step) * 7 for i in range(1, count + 1)]
    with _root(server) as conn, conn.cursor() as cur:
        for n, key in enumerate(ids):
            if n % 3 == 0:
                cur.execute(f"UPDATE {DB}.{TABLE} SET amount = amount + 0.01 WHERE id = %s", (key,))
            elif n % 3 == 1:
                cur.execute(f"DELETE FROM {DB}.{TABLE} WHERE id = %s", (key,))
            else:
                cur.execute(
                    f"INSERT INTO {DB}.{TABLE} VALUES (%s, 1, 'new', NULL, 1.00, 1, NULL, '2024-01-01', NULL)",
                    (key + 1,),
                )


def table_bytes(server: MariaDBServer) -> int:
    with _root(server) as conn, conn.cursor() as cur:
        cur.execute(f"ANALYZE TABLE {DB}.{TABLE}")
        cur.fetchall()
        cur.execute(
            "SELECT DATA_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (DB, TABLE),
        )
        return int(cur.fetchone()[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--diffs", type=int, default=100)
    p.add_argument("--parallelism", type=int, default=4)
    p.add_argument("--master", default=f"local[{os.cpu_count() or 2}]")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tidelake-bench-reconcile-"))
    server = MariaDBServer(work / "mariadb")
    (work / "mariadb").mkdir()
    spark = build_session("tidelake-bench-reconcile", SparkConfig(master=args.master, shuffle_partitions=4))
    try:
        try:
            server.start()
        except ValueError as exc:  # tests/servers.py's CREATE USER ... '%' trips pymysql's formatting
            if "unsupported format character" not in str(exc):
                raise
            _create_user(server)
        began = time.perf_counter()
        config = settings(server, load(spark, server, args.rows, work), args.parallelism)
        size = table_bytes(server)
        print(f"loaded {args.rows:,} rows into MariaDB ({size / 2**20:,.0f} MiB of data) and Delta "
              f"in {time.perf_counter() - began:.1f}s")  # fmt: skip
        reconcile_once(spark, config)  # JVM warm-up, so both timings below start equal
        for case in ("equal", f"{args.diffs} differences"):
            if case != "equal":
                make_differences(server, args.rows, args.diffs)
            seconds, found, received = reconcile_once(spark, config)
            pull_seconds, pull_found, pulled = full_pull(spark, config)
            print(
                f"{case}: reconcile {seconds:.1f}s = {args.rows / seconds:,.0f} rows/s, found {found}, "
                f"read {received:,} bytes upstream = {100 * received / size:.2f}% of the table "
                f"({100 * received / pulled:.2f}% of a full pull); "
                f"full pull + join {pull_seconds:.1f}s (found {pull_found}, {pulled:,} bytes): "
                f"{pull_seconds / seconds:.1f}x faster"
            )
    finally:
        spark.stop()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
