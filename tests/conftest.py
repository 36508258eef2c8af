"""Shared fixtures: one SparkSession per test run, a throwaway MariaDB and Kafka broker, a local S3
server, temporary
warehouses."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.packaging import InstalledWheel, install_wheel
from tests.servers import KafkaBroker, MariaDBServer
from tests.toxiproxy import ToxiproxyServer
from tidelake.s3local import LocalS3Server


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The one local SparkSession (local[2], Delta, 2 shuffle partitions, no UI) for the whole run, Hive-
    enabled on an embedded metastore in a temporary folder (tables register by name, as in production)."""
    from tidelake.config import SparkConfig, TargetConfig
    from tidelake.spark import build_session

    metastore = tmp_path_factory.mktemp("metastore")
    session = build_session(
        "tidelake-tests",
        SparkConfig(master="local[2]", shuffle_partitions=2, driver_memory="3g"),
        TargetConfig(warehouse=str(metastore / "unused"), metastore_dir=str(metastore)),
    )
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    path = tmp_path / "warehouse"
    path.mkdir()
    return str(path)


@pytest.fixture(params=["driver", "executors", "eager"])
def decode_on(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where kv-scan decodes a small table's changes: on the driver (the default, `kvscan.small_tables`), in
    a Spark job of its own on the executors, as a bigger table's, or its PUTs in the match+collapse task, as
    a big table's (`kvscan.eager_decode`). All must give the same tables and the same errors."""
    from backfill.sources.kvscan import eager_decode, small_tables

    if request.param == "executors":
        monkeypatch.setattr(small_tables, "DRIVER_DECODE_ROWS", 0)
    if request.param == "eager":
        monkeypatch.setattr(eager_decode, "EAGER_DECODE_EVENTS", 0)
        monkeypatch.setattr(eager_decode, "EAGER_DECODE_SHARE", 0)
    return str(request.param)


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """A real MariaDB server on 127.0.0.1 for this run (from the Debian package that .ci/run installs).

    Root has no password; user `tidelake` has `MariaDBServer.password`.
    """
    server = MariaDBServer(tmp_path_factory.mktemp("mariadb")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mariadb_url(request: pytest.FixtureRequest) -> str:
    """`mysql://root@127.0.0.1:PORT/`; TIDELAKE_TEST_MYSQL_URL points the suite at a server of your own."""
    if "TIDELAKE_TEST_MYSQL_URL" in os.environ:
        return os.environ["TIDELAKE_TEST_MYSQL_URL"]
    return request.getfixturevalue("mariadb").url


@pytest.fixture(scope="session")
def local_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3Server]:
    """A real S3 API server (S3Proxy, filesystem backend) on 127.0.0.1 for this run, stopped after it."""
    with LocalS3Server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A real Kafka broker (KRaft) on 127.0.0.1 for this run, from the jars `dev/setup.sh --test` caches."""
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka")).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> InstalledWheel:
    """The wheel of this checkout installed into a fresh venv outside it (tests/packaging.py)."""
    return install_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToxiproxyServer]:
    """A real TCP fault proxy (Toxiproxy, built by `dev/setup.sh --test`) on 127.0.0.1 for this run."""
    server = ToxiproxyServer(tmp_path_factory.mktemp("toxiproxy")).start()
    yield server
    server.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--drill",
        action="store_true",
        help="also run the reliability drill (tests/faults: real subprocesses killed at named points)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The drill runs a JVM per backfill and takes longer than the rest of the suite together: it runs on
    `--drill` (docs/development.md), not in the default command that CI runs."""
    if config.getoption("--drill"):
        return
    skip = pytest.mark.skip(
        reason="long tier (the reliability drill and tests too long for CI): runs with --drill (docs/development.md: Tests)"
    )
    for item in items:
        if item.get_closest_marker("drill"):
            item.add_marker(skip)
