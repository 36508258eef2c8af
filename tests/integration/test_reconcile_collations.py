"""reconcile against a real MariaDB for a table keyed by a utf8mb4_general_ci string.

MariaDB orders and compares such keys by collation ('a' < 'B' < 'b\\t'? no: PAD SPACE puts 'ab' after
'ab\\t'), Spark and Delta bytewise. Chunk boundaries, bisecting and the key-range predicates must still cut
both sides at the same keys, or equal tables would show differences. A respelled key (upstream 'ABC',
Delta still 'abc', as a consumer that ignored the before/after key rule would leave it) is a missing and an
extra row, and `--repair` fixes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.codec.collation import sort_key
from tests.integration.test_reconcile_mariadb import connect, run, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DB = "rc_coll"
# Orders differ: bytewise 'B' < 'Z' < 'a' < 'ab' < 'ab\x01' < 'ab\t' < 'é'; general_ci with PAD SPACE:
# 'a' < 'ab\x01' < 'ab\t' < 'ab' < 'B' < 'é' < 'Z' ('ab' is 'ab ' there, and ' ' sorts after '\t').
SPECIAL = ["a", "B", "ab", "ab\t", "ab\x01", "abc", "Abd", "é", "Z", "z1", "ss", "ñu", "Ñv", "~", "0", "日本"]
KEYS = SPECIAL + [f"{p}{n:02d}" for p in ("k", "M", "É", "Zz") for n in range(40)]


@pytest.fixture(scope="module")
def tables(mariadb, spark, tmp_path_factory) -> tuple[int, str, Path]:
    assert len({sort_key("utf8mb4_general_ci", k.encode()) for k in KEYS}) == len(KEYS), "keys collide"
    rows = [(k, i) for i, k in enumerate(KEYS)]
    with connect(mariadb.port) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(
            f"CREATE TABLE {DB}.names (name VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci "
            "NOT NULL, v INT, PRIMARY KEY (name))"
        )
        cur.executemany(f"INSERT INTO {DB}.names VALUES (%s, %s)", rows)
    warehouse = tmp_path_factory.mktemp("rc_coll")
    spark.createDataFrame(rows, "name STRING, v INT").write.format("delta").save(
        str(warehouse / DB / "names")
    )
    return mariadb.port, mariadb.password, warehouse


@pytest.mark.parametrize("chunk_size", [2, 7, 50])
def test_equal_tables_compare_equal_whatever_the_chunking(tables, tmp_path, capsys, chunk_size) -> None:
    port, password, warehouse = tables
    config = write_config(
        tmp_path / "c.toml", warehouse, port, password, tables=[f"{DB}.names"], chunk_size=chunk_size,
        leaf_rows=1,
    )  # fmt: skip
    code, doc, output = run(capsys, config)
    table = doc["tables"][0]
    assert (code, table["status"], table["strategy"]) == (0, "equal", "range"), output
    assert table["chunks"] > 1


def test_a_respelled_key_and_a_changed_row_are_found_and_repaired(tables, spark, tmp_path, capsys) -> None:
    port, password, warehouse = tables
    with connect(port) as conn, conn.cursor() as cur:
        cur.execute(f"UPDATE {DB}.names SET name = 'ABC' WHERE name = 'abc'")  # one row: 'abc' = 'ABC'
        cur.execute(f"UPDATE {DB}.names SET v = -1 WHERE name = 'ab'")
    try:
        config = write_config(
            tmp_path / "c.toml", warehouse, port, password, tables=[f"{DB}.names"], chunk_size=7, leaf_rows=1
        )
        code, doc, output = run(capsys, config)
        table = doc["tables"][0]
        assert code == 1, output
        assert (table["missing"], table["extra"], table["changed"]) == (1, 1, 1), output
        assert table["samples"]["missing"][0]["key"] == {"name": "ABC"}
        assert table["samples"]["extra"][0]["key"] == {"name": "abc"}
        assert table["samples"]["changed"][0]["key"] == {"name": "ab"}

        code, doc, output = run(capsys, config, "--repair")
        assert code == 0 or doc["tables"][0]["status"] == "repaired", output
        names = {r["name"] for r in spark.read.format("delta").load(str(warehouse / DB / "names")).collect()}
        assert "ABC" in names and "abc" not in names
        code, doc, output = run(capsys, config)
        assert code == 0 and doc["tables"][0]["status"] == "equal", output
    finally:
        with connect(port) as conn, conn.cursor() as cur:
            cur.execute(f"UPDATE {DB}.names SET name = 'abc' WHERE name = 'ABC'")
            cur.execute(f"UPDATE {DB}.names SET v = %s WHERE name = 'ab'", (KEYS.index("ab"),))
