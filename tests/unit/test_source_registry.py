"""Source kinds come from their packages' registrations: the config loader learns each kind, its settings
table and class from them, `open_source` its factory (docs/architecture.md "Adding a source")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from backfill.sources.kafka.settings import KafkaSourceConfig
from backfill.sources.registry import RegisteredSource, source_kinds
from backfill.sources.storage.settings import StorageSourceConfig
from tidelake.config import SourceConfig, config_from_toml
from tidelake.errors import ConfigError

pytestmark = pytest.mark.unit

TARGET = {"target": {"warehouse": "/wh"}}


def test_the_three_source_packages_register_their_kinds() -> None:
    kinds = source_kinds()
    assert {name: (k.table, k.settings, k.needs_path) for name, k in kinds.items()} == {
        "kv-scan": (None, None, True),
        "ticdc-storage": ("storage", StorageSourceConfig, True),
        "ticdc-kafka": ("kafka", KafkaSourceConfig, False),
    }


@dataclass(frozen=True)
class ParquetDropSettings:
    pattern: str = "*.parquet"
    rows_per_batch: int = 1000

    def __post_init__(self) -> None:
        if self.rows_per_batch < 1:
            raise ValueError("rows_per_batch must be at least 1")


def _no_factory(config: SourceConfig, settings: ParquetDropSettings, tables: Sequence[str]) -> Any:
    raise AssertionError("not opened here")


def test_a_registered_kind_is_all_the_loader_needs() -> None:
    """A kind the loader has never heard of: its registration brings its table, its class and its checks."""
    kinds = {
        **source_kinds(),
        "parquet-drop": RegisteredSource(
            name="parquet-drop", factory=_no_factory, table="drop", settings=ParquetDropSettings
        ),
    }
    source = {"kind": "parquet-drop", "path": "/in", "drop": {"rows_per_batch": 5}}
    config = config_from_toml({"source": source, **TARGET}, {}, kinds)
    assert config.source.settings == ParquetDropSettings(rows_per_batch=5)

    bad = {**source, "drop": {"rows_per_batch": 0}}
    with pytest.raises(ConfigError, match=r"^source\.drop: rows_per_batch must be at least 1$"):
        config_from_toml({"source": bad, **TARGET}, {}, kinds)
    typo = {**source, "dorp": {}}
    with pytest.raises(ConfigError, match=r"source: unknown key 'dorp'; valid keys: .*drop.*kafka.*storage"):
        config_from_toml({"source": typo, **TARGET}, {}, kinds)
    with pytest.raises(ConfigError, match=r"source\.kind: 'parquet-drop' is not a valid choice"):
        config_from_toml({"source": source, **TARGET}, {}, source_kinds())


def test_without_the_kinds_the_tables_are_kept_as_written() -> None:
    """reconcile reads no source: its load keeps `[source.<table>]` unparsed, and a stray key still fails."""
    config = config_from_toml(
        {"source": {"kind": "ticdc-storage", "path": "/s", "storage": {"x": 1}}, **TARGET}
    )
    assert config.source.settings is None and dict(config.source.tables) == {"storage": {"x": 1}}
    with pytest.raises(ConfigError, match=r"source: unknown key 'pth'"):
        config_from_toml({"source": {"pth": "/s"}, **TARGET})
