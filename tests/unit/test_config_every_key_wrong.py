"""Garbage in, config (issue 17 §3): every key of every config table, set once to each value of the wrong
kind. Each case must load (the value is valid for the key) or fail with a `ConfigError` that names the
key; never another exception. A few cases go through the CLI too: exit 2, no traceback."""

from __future__ import annotations

import copy
import dataclasses
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from backfill.sources.registry import source_kinds
from tidelake.config import DEFAULT_CONFIG, SourceConfig, TidelakeConfig, config_from_toml
from tidelake.configload import load_dataclass
from tidelake.errors import ConfigError

pytestmark = pytest.mark.unit

WRONG: tuple[object, ...] = ("x", "", -1, 0, 10**12, 1.5, True, [], [1], {}, {"a": 1})
ENV = {"HOME": "/tmp"}  # `${...}` never resolves by accident


def _dataclass_of(hint: Any) -> type | None:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    if get_origin(hint) in (typing.Union, types.UnionType):
        found = [a for a in get_args(hint) if isinstance(a, type) and dataclasses.is_dataclass(a)]
        return found[0] if found else None
    return None


def keys(cls: type, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path of the config tree (tables of tables included, `db.pattern` maps as one key); under
    `[source]` the settings tables of the registered source kinds, not the fields that hold them."""
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init or (cls is SourceConfig and f.name in ("tables", "settings")):
            continue
        path = (*prefix, f.name)
        yield path
        nested = _dataclass_of(hints[f.name])
        if nested is not None:
            yield from keys(nested, path)
    if cls is SourceConfig:
        for kind in source_kinds().values():
            if kind.table is not None and kind.settings is not None:
                yield (*prefix, kind.table)
                yield from keys(kind.settings, (*prefix, kind.table))


def _set(doc: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    for part in path[:-1]:
        doc = doc.setdefault(part, {})
        if not isinstance(doc, dict):
            return
    doc[path[-1]] = value


BASE = tomllib.loads(DEFAULT_CONFIG.read_text(encoding="utf-8"))
CASES = [(path, value) for path in keys(TidelakeConfig) for value in WRONG]


def _outcome(path: tuple[str, ...], value: object) -> str | None:
    """None when the case ends as it must (loads, or a ConfigError naming the key); else what went wrong."""
    data = copy.deepcopy(BASE)
    _set(data, path, value)
    key, table = ".".join(path), ".".join(path[:-1])
    try:
        config_from_toml(data, ENV, source_kinds())
    except ConfigError as exc:
        message = str(exc)
        # the key itself, or its table (a check across the table's keys, "one of topic, topic_pattern") or
        # the key of that table that is really wrong (a required key the half-written table lacks)
        if key in message or (table and message.startswith((f"{table}:", f"{table}."))):
            return None
        return f"{key}={value!r}: the message does not name the key: {message}"
    except Exception as exc:  # anything but a ConfigError is a bug: a traceback for the user
        return f"{key}={value!r}: {type(exc).__name__}: {exc}"
    return None


def test_every_key_set_to_every_wrong_kind_is_rejected_naming_it_or_is_valid() -> None:
    failures = [f for f in (_outcome(path, value) for path, value in CASES) if f]
    assert failures == [], "\n".join(failures[:20])


def test_every_table_and_key_was_tried() -> None:
    tables = {p[:-1] for p, _ in CASES}
    assert len({p for p, _ in CASES}) >= 60 and len(tables) >= 8
    assert {("source", "kafka", "topic"), ("target", "layout", "deletion_vectors")} <= {p for p, _ in CASES}


@pytest.mark.parametrize(
    "text",
    [
        '[job]\nname = 7\n[source]\npath = "x"\n[target]\nwarehouse = "w"\n',
        '[source]\npath = "x"\nkind = "mysql"\n[target]\nwarehouse = "w"\n',
        '[source]\npath = "x"\n[target]\nwarehouse = "w"\n[target.layout]\ntarget_file_size = 12\n',
        '[source]\npath = "x"\n[target]\nwarehouse = "w"\n[reconcile]\nparallelism = -1\n',
    ],
    ids=["job.name", "source.kind", "target.layout.target_file_size", "reconcile.parallelism"],
)
def test_the_cli_exits_2_naming_the_key(tmp_path: Path, capsys, text: str, request) -> None:
    from backfill.cli import main

    conf = tmp_path / "job.toml"
    conf.write_text(text)
    assert main(["run", "--config", str(conf)]) == 2
    err = capsys.readouterr().err
    assert request.node.callspec.id.split(".")[-1] in err and "Traceback" not in err, err
    assert str(conf) in err


def test_mapping_keys_are_covered() -> None:
    """`target.table_layouts` is a table of layouts: a wrong layout inside it names its pattern."""
    data = copy.deepcopy(BASE)
    data["target"]["table_layouts"] = {"db.*": {"cluster_by_key": "yes"}}
    with pytest.raises(ConfigError, match=r"table_layouts\.db\.\*\.cluster_by_key"):
        load_dataclass(TidelakeConfig, data, "", ENV)
    assert isinstance(BASE, Mapping)
