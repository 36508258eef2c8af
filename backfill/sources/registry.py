"""The source kinds: each source package registers its kind, its settings class and its factory.

A source package (`backfill/sources/<name>/`) calls `register` in its `__init__`; `source_kinds()` imports
every package here once and returns what they registered. So a new input is one new package and nothing
else (docs/architecture.md "Adding a source"): the config loader learns its kind and its `[source.<table>]`
from the registration (`tidelake.config.parse_source_settings`), `open_source` its factory.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from backfill.sources.base import Source
    from tidelake.config import SourceConfig, UpstreamConfig

S = TypeVar("S")


@dataclass(frozen=True)
class RegisteredSource(Generic[S]):
    """One source kind (it satisfies `tidelake.config.SourceKind`, what the config loader needs)."""

    name: str  # the `source.kind` value
    # (config, settings, table patterns, the upstream database when one is configured)
    factory: Callable[[SourceConfig, S, Sequence[str], UpstreamConfig | None], Source[Any]]
    table: str | None = None  # `[source.<table>]` holds its settings
    settings: type[S] | None = None  # the frozen dataclass that table is parsed into
    needs_path: bool = True  # reads a folder (`source.path`)
    starts_from_snapshot: bool = False  # continues from a snapshot's TSO (`[source.initial]`)


_REGISTERED: dict[str, RegisteredSource[Any]] = {}
_LOADED = False


def register(source: RegisteredSource[Any]) -> None:
    """Make a source kind known (called by its package's `__init__`)."""
    if source.name in _REGISTERED and _REGISTERED[source.name] != source:
        raise ValueError(f"source kind {source.name!r} is registered twice")
    _REGISTERED[source.name] = source


def source_kinds() -> Mapping[str, RegisteredSource[Any]]:
    """Every registered source kind by name (the packages under backfill/sources/ are imported once)."""
    global _LOADED
    if not _LOADED:
        for found in pkgutil.iter_modules([str(Path(__file__).parent)]):
            if found.ispkg:
                importlib.import_module(f"backfill.sources.{found.name}")
        _LOADED = True
    return MappingProxyType(_REGISTERED)
