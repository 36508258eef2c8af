"""`[source.storage]`: the storage sink's settings, checked at the edge."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.sources import load_backfill_config
from tests import CHECKOUT
from tidelake.errors import ConfigError

pytestmark = pytest.mark.unit

BASE = '[source]\nkind = "ticdc-storage"\npath = "/sink"\n[target]\nwarehouse = "/wh"\n'


def load(tmp_path: Path, extra: str = ""):
    path = tmp_path / "job.toml"
    path.write_text(BASE + extra)
    return load_backfill_config(path)


def test_storage_example_config_loads() -> None:
    config = load_backfill_config(CHECKOUT / "conf" / "storage-example.toml")
    assert config.source.kind == "ticdc-storage" and config.source.settings.protocol == "csv"
    assert config.source.settings.null == "\\N" and config.source.settings.terminator == "\r\n"


def test_defaults_and_options(tmp_path: Path) -> None:
    storage = load(tmp_path).source.settings
    assert (storage.protocol, storage.date_separator, storage.delimiter, storage.quote) == (
        "csv",
        "day",
        ",",
        '"',
    )
    options = load(tmp_path, '[source.storage]\ndelimiter = "|"\nquote = ""\n').source.settings.csv_options()
    assert (options.delimiter, options.quote) == ("|", "")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[source.storage]\ninclude_commit_ts = false\n", "source.storage: csv include_commit_ts = false"),
        ("[source.storage]\nprotocol = 'open-protocol'\n", "source.storage.protocol"),
        ("[source.storage]\ndate_separator = 'week'\n", "source.storage.date_separator"),
        ("[source.storage]\ndelimiter = ''\n", "csv delimiter"),
        ("[source.storage]\nbinary_encoding = 'base32'\n", "source.storage.binary_encoding"),
        ("[source.storage]\nfile_index_width = 6\n", "file_index_width"),
    ],
)
def test_bad_storage_settings_are_config_errors(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, extra)


def test_canal_json_needs_no_csv_settings(tmp_path: Path) -> None:
    config = load(tmp_path, "[source.storage]\nprotocol = 'canal-json'\ninclude_commit_ts = false\n")
    assert config.source.settings.protocol == "canal-json"
