"""One version everywhere: the package's metadata, `--version` and CHANGELOG.md's newest entry."""

from __future__ import annotations

import re
from importlib import metadata

import pytest

from tests import CHECKOUT
from tidelake import __version__

pytestmark = pytest.mark.unit


def test_the_changelog_names_this_version_first() -> None:
    text = (CHECKOUT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## (\d+\.\d+\.\d+)$", text, re.MULTILINE)
    assert versions and versions[0] == __version__, versions


def test_the_installed_metadata_is_this_version() -> None:
    assert metadata.version("tidelake") == __version__, "reinstall: dev/setup.sh"
