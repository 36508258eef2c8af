"""The initial load from the upstream over JDBC (`backfill/initial/jdbc.py`), its pure parts: the key
ranges a table's read is split into (every row in exactly one), the statement every connection starts
with, the SQL and URL; and `[source.initial] upstream_tso` in the config."""

from __future__ import annotations

import sqlite3

import pytest

from backfill.codec import TableSchema
from backfill.codec.ddl_text import create_table_info
from backfill.initial.jdbc import jdbc_url, select_sql, session_settings, split_predicates
from tidelake.config import UpstreamConfig, config_from_toml
from tidelake.errors import ConfigError

pytestmark = pytest.mark.unit


def _holds(predicate: str, value: int | None) -> bool:
    """`predicate` evaluated by a real SQL engine (SQLite takes MySQL's backquoted names) for one value."""
    with sqlite3.connect(":memory:") as db:
        return bool(
            db.execute(f"SELECT COUNT(*) FROM (SELECT ? AS k) WHERE {predicate}", (value,)).fetchone()[0]
        )


@pytest.mark.parametrize(("low", "high", "parts"), [(1, 100, 8), (-5, 5, 3), (7, 8, 8), (-(2**62), 2**62, 4)])
def test_the_ranges_hold_every_row_once_nulls_and_strays_included(low: int, high: int, parts: int) -> None:
    predicates = split_predicates("k", low, high, parts)
    assert 2 <= len(predicates) <= min(parts, high - low + 1)
    for value in (None, low - 10, low, (low + high) // 2, high, high + 10):
        assert sum(_holds(p, value) for p in predicates) == 1, (value, predicates)


def test_one_range_when_there_is_nothing_to_split() -> None:
    assert split_predicates("k", None, None, 8) == ("1 = 1",)
    assert split_predicates("k", 4, 4, 8) == ("1 = 1",)
    assert split_predicates("k", 1, 100, 1) == ("1 = 1",)


def test_every_connection_reads_the_snapshot_in_utc() -> None:
    assert session_settings(True, 448069946574110721) == {
        "sessionVariables": "time_zone='+00:00',tidb_snapshot='448069946574110721'"
    }
    assert session_settings(False, 5) == {
        "sessionVariables": "time_zone='+00:00'",
        "sessionInitStatement": "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
    }


def test_bit_is_read_as_its_number_and_the_split_column_rides_along() -> None:
    sql = "CREATE TABLE `t` (`id` int NOT NULL, `b` bit(3), `raw` varbinary(4), PRIMARY KEY (`id`) NONCLUSTERED)"
    _, _, info = create_table_info(sql, table_id=1, default_schema="app")
    schema = TableSchema.from_table_info(info, schema_name="app")
    assert select_sql(schema, "_tidb_rowid") == (
        "(SELECT `id` AS `id`, CAST(`b` AS UNSIGNED) AS `b`, `raw` AS `raw`, `_tidb_rowid` FROM `app`.`t`) "
        "AS tidelake_snapshot"
    )


def test_the_url_keeps_the_password_out_and_asks_for_tls_as_configured() -> None:
    url = jdbc_url(UpstreamConfig(kind="tidb", host="db", port=4000, ssl_ca="/ca.pem", connect_timeout=3))
    assert url.startswith("jdbc:mysql://db:4000/?permitMysqlScheme&")
    assert "sslMode=verify-full" in url and "serverSslCert=/ca.pem" in url and "connectTimeout=3000" in url
    assert "sslMode" not in jdbc_url(UpstreamConfig(kind="mysql"))
    assert "sslMode=trust" in jdbc_url(UpstreamConfig(kind="mysql", ssl=True, ssl_verify=False))


BASE = {"source": {"kind": "ticdc-storage", "path": "/s"}, "target": {"warehouse": "/w", "tables": ["a.*"]}}


@pytest.mark.parametrize(
    ("initial", "upstream", "message"),
    [
        ({"upstream_tso": 5}, None, "upstream_tso reads the [upstream] database"),
        ({"upstream_tso": 5}, {"kind": "files", "path": "/x"}, "upstream_tso reads the [upstream] database"),
        (
            {"upstream_tso": 5, "dumpling": "/d"},
            {"kind": "tidb"},
            "dumpling and upstream_tso exclude each other",
        ),
        ({"upstream_tso": 0}, {"kind": "tidb"}, "upstream_tso must be a TSO"),
        (
            {"upstream_tso": 5, "upstream_partitions": 0},
            {"kind": "tidb"},
            "upstream_partitions must be 1..1024",
        ),
        (
            {"upstream_tso": 5, "upstream_fetch_size": 0},
            {"kind": "tidb"},
            "upstream_fetch_size must be at least 1",
        ),
        ({}, {"kind": "tidb"}, "give dumpling (an export's folder) or upstream_tso"),
        ({"upstream_tso": 5, "from": "x"}, {"kind": "tidb"}, "unknown key 'from'"),
    ],
)
def test_upstream_tso_is_validated(initial: dict, upstream: dict | None, message: str) -> None:
    data = {**BASE, "source": {**BASE["source"], "initial": initial}}
    if upstream is not None:
        data["upstream"] = upstream
    with pytest.raises(ConfigError) as raised:
        config_from_toml(data)
    assert message in str(raised.value)


def test_upstream_tso_with_a_server() -> None:
    data = {
        **BASE,
        "source": {**BASE["source"], "initial": {"upstream_tso": 9}},
        "upstream": {"kind": "tidb"},
    }
    initial = config_from_toml(data).source.initial
    assert initial is not None and (initial.upstream_tso, initial.upstream_partitions, initial.dumpling) == (
        9,
        8,
        "",
    )
    assert initial.described == "[upstream] at upstream_tso 9"
