"""The `reconcile` command."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress

from tidelake.cli import run_app
from tidelake.config import load_config
from tidelake.output import emit, error, progress

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


class _Bars:
    """Engine stages as rich progress bars on stderr."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar

    def stage(self, description: str, total: int) -> Callable[[int], None]:
        task = self.bar.add_task(description, total=total or None)
        return lambda n: self.bar.advance(task, n)


@app.command(epilog="Example: `reconcile run --config conf/prod.toml --json --max-diff 0`")
def run(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML config; default: conf/demo.toml.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write the JSON result to this file.")
    ] = None,
    tables: Annotated[
        list[str] | None,
        typer.Option(
            "--table", "-t", help="`db.table` pattern (wildcards `*?`); repeat; replaces the config's."
        ),
    ] = None,
    ignore_columns: Annotated[
        list[str] | None,
        typer.Option("--ignore-column", help="`col` or `db.table.col` to leave out; repeat."),
    ] = None,
    float_tolerance: Annotated[
        float | None, typer.Option("--float-tolerance", help="FLOAT/DOUBLE: |a-b| <= tol*max(1,|a|,|b|).")
    ] = None,
    at_ts: Annotated[
        int | None,
        typer.Option(
            "--at-ts", help="Compare at this TSO: the Delta version that resolved it (and TiDB at it)."
        ),
    ] = None,
    max_diff: Annotated[
        int | None, typer.Option("--max-diff", help="Exit 1 only when more rows than this differ.")
    ] = None,
    chunk_size: Annotated[int | None, typer.Option("--chunk-size", help="Upstream rows per chunk.")] = None,
    parallelism: Annotated[
        int | None, typer.Option("--parallelism", help="Upstream connections (queries at once).")
    ] = None,
    repair: Annotated[
        bool, typer.Option("--repair", help="Rewrite the differing keys in Delta from upstream (one MERGE).")
    ] = False,
) -> int:
    """Compare every configured table, chunk by chunk, and name the rows and columns that differ."""
    from reconcile import engine
    from reconcile.options import RunOptions
    from reconcile.upstream import open_upstream
    from tidelake.spark import session_for

    settings = load_config(config)
    try:
        options = RunOptions.from_config(
            settings.reconcile,
            tables=tables or None,
            ignore_columns=ignore_columns or None,
            float_tolerance=float_tolerance,
            at_ts=at_ts,
            max_diff=max_diff,
            chunk_size=chunk_size,
            parallelism=parallelism,
            repair=repair or None,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    with session_for(settings, "reconcile") as spark:
        upstream = open_upstream(spark, settings.reconcile.upstream, options.parallelism)
        try:
            with progress() as bar:
                result = engine.run(spark, settings, options, upstream, _Bars(bar))
        finally:
            upstream.close()
    emit(result, as_json, str(output) if output else None)
    for table in result.tables:
        if table.error:
            error(f"{table.table}: {table.error}", "reconcile")
    return result.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    return run_app(app, argv, "reconcile")


def entrypoint() -> None:
    sys.exit(main())
