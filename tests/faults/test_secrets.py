"""Secrets (issue 17 §4): a password given as `${ENV}` never shows in logs, `--json`, report files or error
messages, also when the command fails because of that very connection or of another key of the config.
(The kill-point and concurrency drills run with a secret in every config and grep every output too.)"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from backfill.cli import main as backfill_main
from reconcile.cli import main as reconcile_main
from tests.faults.conftest import SECRET, SECRET_ENV
from tests.faults.harness import assert_no_secret

pytestmark = [pytest.mark.spark, pytest.mark.drill]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config(tmp_path: Path, extra: str = "") -> Path:
    conf = tmp_path / "secret.toml"
    conf.write_text(
        f'[job]\nname = "secret"\n[source]\npath = "{tmp_path / "scans"}"\n[target]\nwarehouse = "{tmp_path / "wh"}"\n'
        f'[object_store]\naccess_key = "drill"\nsecret_key = "${{{SECRET_ENV}}}"\n'
        f'[reconcile.upstream]\nkind = "mariadb"\nport = {closed_port()}\nuser = "drill"\n'
        f'password = "${{{SECRET_ENV}}}"\nconnect_timeout = 1\n{extra}'
    )
    return conf


@pytest.fixture(autouse=True)
def secret_in_env(monkeypatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


def test_reconcile_that_cannot_connect_shows_no_password_anywhere(spark, tmp_path, capfd) -> None:
    (tmp_path / "wh" / "app").mkdir(parents=True)
    spark.range(3).withColumnRenamed("id", "k").write.format("delta").save(str(tmp_path / "wh" / "app" / "t"))
    reports = {flag: tmp_path / f"report.{flag}" for flag in ("output", "junit", "markdown", "html")}
    args = [f"--{flag}={path}" for flag, path in reports.items()]
    code = reconcile_main(["run", "--config", str(config(tmp_path)), "--json", "--log-format", "json", *args])
    out, err = capfd.readouterr()
    assert code == 2, (out, err)
    assert "127.0.0.1" in out + err  # the failure is reported, naming the server, not the password
    assert_no_secret(out, err, *(p.read_text() for p in reports.values() if p.exists()))


@pytest.mark.parametrize(
    "extra",
    [
        "unknown_key = 1\n",  # an error in the same table as the password
        '[spark]\ndriver_memory = "lots"\n',  # an error elsewhere
    ],
)
def test_a_config_error_next_to_a_secret_does_not_print_it(tmp_path, capfd, extra: str) -> None:
    for main in (backfill_main, reconcile_main):
        assert main(["run", "--config", str(config(tmp_path, extra)), "--json"]) == 2
        out, err = capfd.readouterr()
        assert err.strip()
        assert_no_secret(out, err)


def test_the_loaded_config_never_shows_the_secret(tmp_path) -> None:
    from tidelake.config import load_config

    settings = load_config(config(tmp_path))
    assert settings.reconcile.upstream.password.reveal() == SECRET
    assert_no_secret(repr(settings), str(settings.object_store), repr(settings.reconcile))
