"""The pure parts of catalog registration and snapshots: config checks, where the embedded metastore
lives, location equality, SQL literals, and the ts every table stood at."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.apply.table_names import (
    CatalogTarget,
    embedded_derby,
    metastore_unreachable,
    same_location,
    sql_string,
)
from backfill.snapshot import NotAtTs, TableHistory, latest_common_ts, nearest, version_at
from reconcile.downstream import VersionTs
from tidelake.config import TargetConfig
from tidelake.errors import ConfigError
from tidelake.metastore import metastore_dir, metastore_settings, spark_sql_args

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("catalog", "my-cat", "catalog 'my-cat' must match"),
        ("database_prefix", "a.b_", "database_prefix 'a.b_' must match"),
        ("metastore_uri", "http://h:9083", "must be thrift://host:port"),
    ],
)
def test_bad_catalog_settings_name_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises((ValueError, ConfigError), match=message):
        TargetConfig(warehouse="/w", **{key: value})


def test_the_embedded_metastore_sits_beside_a_local_warehouse(tmp_path: Path) -> None:
    assert metastore_dir(TargetConfig(warehouse=str(tmp_path / "wh"))) == tmp_path / "metastore"
    assert metastore_dir(TargetConfig(warehouse=f"file:{tmp_path}/wh")) == tmp_path / "metastore"
    assert metastore_dir(TargetConfig(warehouse="s3a://b/wh")) == Path(".tidelake/metastore").absolute()
    settings = metastore_settings(TargetConfig(warehouse=str(tmp_path / "wh")))
    assert settings["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        f"jdbc:derby:;databaseName={tmp_path}/metastore/metastore_db;create=true"
    )
    assert settings["spark.sql.catalogImplementation"] == "hive"


def test_an_external_metastore_is_passed_through_and_off_means_nothing(tmp_path: Path) -> None:
    remote = TargetConfig(warehouse="s3a://b/wh", metastore_uri="thrift://hms:9083")
    assert metastore_settings(remote) == {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.hive.metastore.uris": "thrift://hms:9083",
    }
    assert "--driver-java-options" not in spark_sql_args(remote)
    assert metastore_settings(TargetConfig(warehouse=str(tmp_path), register=False)) == {}


def test_locations_and_names() -> None:
    assert same_location("file:/w/app/users", "file:///w/app/users/")
    assert same_location("/w/app/users", "file:/w/app/users")
    assert not same_location("s3a://b/w/app/users", "file:/w/app/users")
    assert sql_string("s3a://b/it's\\x") == "'s3a://b/it\\'s\\\\x'"
    target = CatalogTarget("spark_catalog", "lake_", "file:/w")
    assert target.qualified("shop", "or`ders") == "`spark_catalog`.`lake_shop`.`or``ders`"
    assert target.qualified(None, "t") == "`spark_catalog`.`lake_default`.`t`"


def history(name: str, *stood: int | None) -> TableHistory:
    return TableHistory("db", name, f"/w/db/{name}", [VersionTs(v, ts) for v, ts in enumerate(stood)])


def test_latest_is_the_newest_ts_every_table_stood_at() -> None:
    a = history("a", None, 100, 200, 300)
    b = history("b", 150, 200, 250)
    assert latest_common_ts([a, b]) == 200
    assert version_at(a, 200).version == 2
    with pytest.raises(NotAtTs, match="never stood at one resolved ts together"):
        latest_common_ts([a, history("c", 50)])


def test_a_ts_a_table_never_stood_at_names_the_nearest() -> None:
    assert nearest({100, 200, 300}, 250) == (200, 300)
    assert nearest({100}, 50) == (None, 100)
    with pytest.raises(
        NotAtTs, match=r"table db.a never stood at resolved ts 250: .* 200 before and 300 after"
    ):
        version_at(history("a", 100, 200, 300), 250)


def test_derby_network_server_and_services_are_not_the_embedded_metastore() -> None:
    """Only Derby inside the JVM serves one process at a time (the wait for it); a Derby network server
    or a Thrift service that does not answer is unreachable, not busy."""
    assert embedded_derby("jdbc:derby:;databaseName=/m/metastore_db;create=true", "")
    assert not embedded_derby("jdbc:derby://127.0.0.1:1527/metastore_db;create=true", "")
    assert not embedded_derby("jdbc:derby:;databaseName=/m", "thrift://h:9083")
    assert not embedded_derby("jdbc:mysql://h/metastore", "")


def test_a_metastore_that_does_not_answer_is_told_from_other_failures() -> None:
    assert metastore_unreachable(
        "java.sql.SQLNonTransientConnectionException: java.net.ConnectException : Error connecting to server "
        "127.0.0.1 on port 1527 with message Connection refused."
    )
    assert metastore_unreachable("org.apache.thrift.transport.TTransportException: java.net.SocketException")
    assert not metastore_unreachable("[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table")
