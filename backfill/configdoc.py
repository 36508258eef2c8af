"""The configuration reference (docs/configuration.md), generated from the config classes themselves: each
section's docstring, and per key its type, default and the comments written beside it in tidelake/config.py.

    .venv/bin/python -m backfill.configdoc > docs/configuration.md

It lives in the backfill package because the source kinds' own tables (`[source.storage]`,
`[source.kafka]`, ...) come from the source registry (`backfill/sources/registry.py`).

tests/unit/test_config_reference.py fails when the page and the classes drift apart.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import sys
import textwrap
import tokenize
from collections.abc import Mapping
from typing import Any

from backfill.sources.registry import source_kinds
from tidelake import config
from tidelake.configload import Secret

_SOURCE_FIELDS = ("path", "kind", "verify_checksums")  # [source]'s own keys: the rest are the kinds' tables


def _source_sections() -> tuple[tuple[str, type], ...]:
    """`[source.<table>]` of every registered source kind that has settings, by table name."""
    kinds = source_kinds().values()
    return tuple(
        sorted(
            (f"source.{k.table}", k.settings) for k in kinds if k.table is not None and k.settings is not None
        )
    )


# Every TOML table of a config file, in the order a reader meets them, with the class that parses it.
SECTIONS: tuple[tuple[str, type], ...] = (
    ("job", config.JobConfig),
    ("source", config.SourceConfig),
    *_source_sections(),
    ("source.initial", config.InitialLoadConfig),
    ("upstream", config.UpstreamConfig),
    ("target", config.TargetConfig),
    ("target.layout", config.TableLayout),
    ("spark", config.SparkConfig),
    ("object_store", config.ObjectStoreConfig),
    ("reconcile", config.ReconcileConfig),
    ("reconcile.upstream", config.UpstreamConfig),
    ("demo", config.DemoConfig),
)
HEADER = """# Configuration reference

One TOML file per job, given with `--config` (`backfill run`, `status`, `snapshot`, `maintain`, `demo`;
`reconcile run`). Without it the embedded demo config is used (`backfill doctor` shows where it is).
Relative paths are taken from the current folder; a source or warehouse path may be any Hadoop file system
URI (`file://`, `s3a://`, `hdfs://`). `${NAME}` takes an environment variable (a missing one is an error,
`$$` is a literal `$`): use it for passwords and keys, which are never printed. An unknown key or a bad
value stops the command with exit 2 and a message that names the file and the key.

Generated from the config classes (`tidelake/config.py`, the source kinds' `settings.py`) by
`python -m backfill.configdoc`; a test fails
when this page and the classes disagree.
"""


def field_comments(cls: type) -> dict[str, str]:
    """The comments beside each field of a dataclass's source: the lines right above it and the one after it."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[str, str] = {}
    pending: list[str] = []
    current: str | None = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#").strip()
            if token.line.strip().startswith("#"):
                pending.append(text)
            elif current is not None and token.start[1] > 0:
                comments[current] = " ".join(filter(None, (comments.get(current, ""), text)))
        elif token.start[1] == 4 and token.string in ("def", "@"):
            break  # the fields come first; comments in methods are not about them
        elif (
            token.type == tokenize.NAME
            and token.start[1] == 4
            and token.line[4:].split(":")[0] == token.string
        ):
            current = token.string
            if pending:
                comments[current] = " ".join(pending)
            pending = []
        elif token.type == tokenize.NL and not token.line.strip():
            pending = []
    return comments


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if isinstance(value, Secret):
        return '`""`'
    if dataclasses.is_dataclass(value):
        return "a table"
    if isinstance(value, Mapping):
        return "`{}`"
    if value is None:
        return "none"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, str):
        return "`" + repr(value).replace("'", '"').replace("|", "\\|") + "`"
    return f"`{value!r}`".replace("'", '"')


def render_section(name: str, cls: type) -> str:
    doc = inspect.cleandoc(cls.__doc__ or "")
    lines = [f"## `[{name}]`", ""]
    if doc:
        lines += [doc, ""]
    lines += ["| key | type | default | |", "|---|---|---|---|"]
    comments = field_comments(cls)
    for field in dataclasses.fields(cls):
        if cls is config.SourceConfig and field.name not in _SOURCE_FIELDS:
            continue  # `tables` and `settings` hold the kinds' own tables, documented below
        kind = str(field.type).replace("|", "\\|")
        note = comments.get(field.name, "")
        nested = [
            f"`[{n}]`" for n, c in SECTIONS if n.startswith(f"{name}.") and n.endswith(f".{field.name}")
        ]
        if nested:
            note = " ".join(filter(None, (f"its own table: {nested[0]}", note)))
        if field.name == "table_layouts":
            per_table = 'per table: `[target.table_layouts."db.table"]`, keys as in `[target.layout]`'
            note = " ".join(filter(None, (per_table, note)))
        note = note.replace("|", "\\|")
        lines.append(f"| `{field.name}` | `{kind}` | {_default(field)} | {note} |")
    return "\n".join(lines) + "\n"


def render() -> str:
    return HEADER + "".join("\n" + render_section(name, cls) for name, cls in SECTIONS)


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
