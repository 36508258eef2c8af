"""Config is parsed at the edge: unknown keys, wrong types and missing variables fail with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.cli import main as backfill_main
from backfill.sources import load_backfill_config
from tidelake.config import DEFAULT_CONFIG, load_config
from tidelake.configload import Secret
from tidelake.errors import ConfigError
from tidelake.spark import LOG4J_OPTION, driver_java_options

pytestmark = pytest.mark.unit

MINIMAL = """
[source]
path = "/data/scans"
[target]
warehouse = "/data/warehouse"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


def test_embedded_demo_config_loads_with_paths_under_the_work_folder() -> None:
    config = load_config()
    assert DEFAULT_CONFIG.name == "demo.toml"
    assert config.job.app_id == "tidelake:demo"
    for path in (
        config.source.path,
        config.target.warehouse,
        config.reconcile.upstream.path,
        config.demo.out,
    ):
        assert path is not None and path.startswith(".tidelake/")


def test_defaults_fill_sections_left_out(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    assert config.spark.master == "local[*]"
    assert config.source.kind == "kv-scan"
    assert config.target.tables == ("*.*",)


def test_unknown_top_level_key_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, MINIMAL + "\n[sparkk]\nmaster = 'x'\n"))
    message = str(err.value)
    assert (
        "'sparkk'" in message
        and "valid keys: demo, job, object_store, reconcile, source, spark, target, upstream" in message
    )
    assert "job.toml" in message


def test_unknown_nested_key_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"spark: unknown key 'shufle_partitions'; valid keys: .*shuffle_partitions"
    ):
        load_config(write(tmp_path, MINIMAL + "\n[spark]\nshufle_partitions = 3\n"))


def test_wrong_type_names_the_key_and_the_value(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"spark\.shuffle_partitions: expected an integer, got a string \('8'\)"
    ):
        load_config(write(tmp_path, MINIMAL + "\n[spark]\nshuffle_partitions = '8'\n"))


def test_bool_is_not_an_integer(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"reconcile\.chunk_size: expected an integer, got a boolean"):
        load_config(write(tmp_path, MINIMAL + "\n[reconcile]\nchunk_size = true\n"))


def test_bad_choice_lists_the_valid_choices(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"source\.kind: 'kafka' is not a valid choice; valid choices: kv-scan"
    ):
        load_backfill_config(
            write(tmp_path, MINIMAL.replace('path = "/data/scans"', 'path = "/x"\nkind = "kafka"'))
        )


def test_value_checks_name_the_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"spark: shuffle_partitions must be at least 1, got 0"):
        load_config(write(tmp_path, MINIMAL + "\n[spark]\nshuffle_partitions = 0\n"))
    with pytest.raises(ConfigError, match=r"job: name 'a b' must match"):
        load_config(write(tmp_path, MINIMAL + "\n[job]\nname = 'a b'\n"))


def test_missing_required_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"target\.warehouse: required key is missing"):
        load_config(write(tmp_path, MINIMAL.replace('warehouse = "/data/warehouse"', "")))


def test_env_vars_expand_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    text = MINIMAL + '\n[reconcile.upstream]\nkind = "tidb"\npassword = "${TL_PW}"\nuser = "u$$1"\n'
    config = load_config(write(tmp_path, text), environ={"TL_PW": "s3cret"})
    assert config.reconcile.upstream.password.reveal() == "s3cret"
    assert config.reconcile.upstream.user == "u$1"
    assert "s3cret" not in repr(config)
    with pytest.raises(
        ConfigError, match=r"reconcile\.upstream\.password: environment variable TL_PW is not set"
    ):
        load_config(write(tmp_path, text), environ={})


def test_one_upstream_serves_backfill_and_reconcile(tmp_path: Path) -> None:
    """`[upstream]` is the upstream of every command; `[reconcile.upstream]` still names its own."""
    shared = MINIMAL + '\n[upstream]\nkind = "tidb"\nhost = "tidb.internal"\npassword = "${TL_PW}"\n'
    config = load_config(write(tmp_path, shared), environ={"TL_PW": "s3cret"})
    assert config.upstream is not None and config.reconcile.upstream is config.upstream
    assert (config.upstream.kind, config.upstream.host) == ("tidb", "tidb.internal")
    own = shared + '[reconcile.upstream]\nkind = "files"\npath = "/dump"\n'
    config = load_config(write(tmp_path, own), environ={"TL_PW": "s3cret"})
    assert (config.reconcile.upstream.kind, config.upstream and config.upstream.kind) == ("files", "tidb")
    assert load_config(write(tmp_path, MINIMAL)).upstream is None


def test_secret_never_shows_in_repr() -> None:
    assert "hunter2" not in repr(Secret("hunter2"))
    assert Secret("hunter2").reveal() == "hunter2"


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"job\.toml: not valid TOML"):
        load_config(write(tmp_path, "[source\n"))
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read config"):
        load_config(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ("\n[spark]\nmastr = 'local'\n", "unknown key 'mastr'"),
        ("\n[spark]\nshuffle_partitions = 'many'\n", "spark.shuffle_partitions: expected an integer"),
        (
            "\n[reconcile.upstream]\nkind = 'mysql'\npassword = '${TL_NOT_SET_ANYWHERE}'\n",
            "TL_NOT_SET_ANYWHERE",
        ),
    ],
)
def test_cli_exits_2_naming_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: str,
    named: str,
) -> None:
    monkeypatch.delenv("TL_NOT_SET_ANYWHERE", raising=False)
    code = backfill_main(["status", "--config", str(write(tmp_path, MINIMAL + extra))])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert named in err


def test_cli_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert backfill_main(["status", "--no-such-flag"]) == 2
    assert "no-such-flag" in capsys.readouterr().err


def test_the_jit_setting_reaches_the_driver_jvm_and_a_wrong_one_lists_the_choices(tmp_path: Path) -> None:
    quick = load_config(write(tmp_path, MINIMAL + '\n[spark]\njit = "quick"\n')).spark
    assert "-XX:TieredStopAtLevel=1" in driver_java_options(quick).split()
    assert "-XX:ReservedCodeCacheSize=240m" in driver_java_options(quick).split()  # not C1-only's 48 MB
    assert "TieredStopAtLevel" not in driver_java_options(load_config(write(tmp_path, MINIMAL)).spark)
    assert driver_java_options(quick).startswith(LOG4J_OPTION)
    with pytest.raises(
        ConfigError, match=r"spark\.jit: 'fast' is not a valid choice; valid choices: tiered, quick"
    ):
        load_config(write(tmp_path, MINIMAL + '\n[spark]\njit = "fast"\n'))
