"""docs/configuration.md is generated from the config classes: it fails here when they drift apart."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from backfill import configdoc
from backfill.sources.registry import source_kinds
from tests import CHECKOUT
from tidelake.config import TidelakeConfig

pytestmark = pytest.mark.unit


def _sections(cls: type) -> set[type]:
    """Every config dataclass a config file can hold, below `cls`."""
    found: set[type] = set()
    for hint in typing.get_type_hints(cls).values():
        for arg in (hint, *typing.get_args(hint)):
            if dataclasses.is_dataclass(arg) and isinstance(arg, type) and arg not in found:
                found |= {arg, *_sections(arg)}
    return found


def test_the_reference_page_is_what_the_classes_say() -> None:
    page = (CHECKOUT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == configdoc.render(), "run: .venv/bin/python -m backfill.configdoc > docs/configuration.md"


def test_every_table_of_a_config_file_has_a_section() -> None:
    documented = {cls for _, cls in configdoc.SECTIONS}
    kinds = {k.settings for k in source_kinds().values() if k.settings is not None}
    assert _sections(TidelakeConfig) - {TidelakeConfig} | kinds <= documented
    assert documented <= _sections(TidelakeConfig) | kinds


def test_a_field_comment_reaches_the_page() -> None:
    assert "a Java regex; the matching topics are read together" in configdoc.render()
    assert "| `warehouse` | `str` | required |" in configdoc.render()
