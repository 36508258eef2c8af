"""The upstream seam: dialects by name and by server version, and what each one writes."""

from __future__ import annotations

import pytest

from reconcile.chunks import KeyRange
from reconcile.encoding import FloatDigits
from reconcile.schema import TableSchema, column_from_type
from reconcile.upstream import dialect
from reconcile.upstream.dialect import detect, dialect_named

pytestmark = pytest.mark.unit


def test_the_three_built_in_dialects_are_registered_by_name() -> None:
    assert set(dialect.names()) >= {"mysql", "mariadb", "tidb"}
    with pytest.raises(ValueError, match="no upstream dialect 'oracle'"):
        dialect_named("oracle")


@pytest.mark.parametrize(
    ("version", "name"),
    [
        ("8.0.11-TiDB-v7.5.1", "tidb"),
        ("5.7.25-TiDB-v8.5.0", "tidb"),
        ("11.4.2-MariaDB-deb12", "mariadb"),
        ("10.5.23-MariaDB-0+deb11u1", "mariadb"),
        ("8.0.36", "mysql"),
        ("8.4.0-commercial", "mysql"),
    ],
)
def test_a_server_version_picks_its_dialect(version: str, name: str) -> None:
    assert detect(version).name == name


def test_only_tidb_reads_at_a_ts_and_mysql_opens_consistent_snapshots() -> None:
    tidb, mysql = dialect_named("tidb"), dialect_named("mysql")
    assert tidb.reads_at_ts and not mysql.reads_at_ts
    assert tidb.snapshot_statements(449_000_000_000_000_000) == [
        ("SET @@tidb_snapshot = %s", ("449000000000000000",))
    ]
    assert tidb.snapshot_statements(None) == [("SET @@tidb_snapshot = %s", ("",))]
    statements = [sql for sql, _ in mysql.snapshot_statements(None)]
    assert statements[-1] == "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"
    assert mysql.lock_statements("d", "t`x") == ("LOCK TABLES `d`.`t``x` READ", "UNLOCK TABLES")


def test_statements_carry_parameters_and_keep_literal_percent_signs_for_pymysql() -> None:
    schema = TableSchema(
        "shop", "orders", (column_from_type("id", "bigint"), column_from_type("d", "date")), ("id",)
    )
    mysql = dialect_named("mysql")
    sql, params = mysql.checksum_query(
        schema, schema.columns, FloatDigits.for_tolerance(0), KeyRange((5,), (9,))
    )
    assert sql.startswith("SELECT COUNT(*), COALESCE(SUM(CAST(CONV(SUBSTRING(MD5(")
    assert "FROM `shop`.`orders` WHERE `id` >= %s AND `id` < %s" in sql
    assert "DATE_FORMAT(`d`, '%%Y-%%m-%%d')" in sql  # one %-formatting by pymysql gives '%Y-%m-%d'
    assert params == [5, 9]
    sql, params = mysql.split_query(schema, schema.columns, FloatDigits.for_tolerance(0), KeyRange(), 100)
    assert params == [100, 100] and "DIV %s" in sql and "WHERE TRUE" in sql


def test_tidb_gives_a_table_without_a_primary_key_its_hidden_row_id_as_key() -> None:
    tidb = dialect_named("tidb")
    plain = TableSchema("d", "t", (column_from_type("a", "int"),), ())
    asked: list[tuple[str, tuple]] = []

    def catalog(answer: str):
        def query(sql: str, params):
            asked.append((sql, tuple(params)))
            return [(answer,)]

        return query

    keyed = tidb.refine(catalog("NONCLUSTERED"), plain)
    assert keyed.primary_key == ("_tidb_rowid",)
    assert [c.name for c in keyed.columns] == ["_tidb_rowid", "a"]
    assert keyed.column("_tidb_rowid").delta_type == "bigint"
    assert "TIDB_PK_TYPE" in asked[0][0] and asked[0][1] == ("d", "t")
    assert tidb.refine(catalog("CLUSTERED"), plain) is plain
    with_key = TableSchema("d", "t", plain.columns, ("a",))
    assert tidb.refine(catalog("NONCLUSTERED"), with_key) is with_key  # its primary key identifies rows
    assert dialect_named("mariadb").refine(catalog("NONCLUSTERED"), plain) is plain
