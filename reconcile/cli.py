"""The `reconcile` command."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from tidelake.cli import NotBuiltYet, run_app
from tidelake.config import load_config

app = typer.Typer(
    name="reconcile",
    help="Diff upstream TiDB/MySQL/MariaDB tables against their Delta tables; report or repair.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


@app.callback()
def _group() -> None:
    """Diff upstream tables against their Delta tables (exit 0 equal, 1 differences, 2 error)."""


@app.command(epilog="Example: `reconcile run --config conf/prod.toml --json --max-diff 0`")
def run(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML config; default: conf/demo.toml.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
) -> int:
    """Compare every configured table, chunk by chunk, and name the rows and columns that differ."""
    load_config(config)
    raise NotBuiltYet("`reconcile run` is not built yet (issue: reconcile)")


def main(argv: Sequence[str] | None = None) -> int:
    return run_app(app, argv, "reconcile")


def entrypoint() -> None:
    sys.exit(main())
