"""The `reconcile` command."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tidelake.cli import (
    IntervalOption,
    LogFormatOption,
    OutputFileOption,
    QuietOption,
    VerboseOption,
    VersionOption,
    configure_output,
    configure_program,
    run_app,
)
from tidelake.config import load_config
from tidelake.errors import TidelakeError
from tidelake.output import DEFAULT_INTERVAL, emit, error, progress

if TYPE_CHECKING:
    from reconcile.result import ReconcileResult

app = typer.Typer(
    name="reconcile",
    help="Diff upstream TiDB/MySQL/MariaDB tables against their Delta tables; report or repair.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


@app.callback()
def _group(version: VersionOption = False, verbose: VerboseOption = False) -> None:
    """Diff upstream tables against their Delta tables (exit 0 equal, 1 differences, 2 error)."""
    configure_program(verbose)


@app.command(epilog="Example: `reconcile run --config conf/prod.toml --json --max-diff 0`")
def run(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML config; default: the embedded demo config.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
    output: OutputFileOption = None,
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
    tables_at_once: Annotated[
        int | None,
        typer.Option(
            "--tables-at-once", help="Tables compared side by side (each with its own connections)."
        ),
    ] = None,
    repair: Annotated[
        bool, typer.Option("--repair", help="Rewrite the differing keys in Delta from upstream (one MERGE).")
    ] = False,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write JUnit XML: one test case per table.")
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option("--markdown", help="Also write a Markdown summary (CI job summary, PR comment)."),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Also write one self-contained HTML page with chunk maps and rows."),
    ] = None,
    quiet: QuietOption = False,
    log_format: LogFormatOption = "text",
    progress_interval: IntervalOption = DEFAULT_INTERVAL,
) -> int:
    """Compare every configured table, chunk by chunk, and name the rows and columns that differ."""
    from reconcile import engine
    from reconcile.options import RunOptions
    from reconcile.result import ReconcileResult, TableResult
    from reconcile.upstream import open_upstream
    from tidelake.spark import session_for

    configure_output(quiet, log_format, progress_interval)
    reports = Reports(junit, markdown, html)
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
            tables_at_once=tables_at_once,
            repair=repair or None,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        with session_for(settings, "reconcile") as spark:
            upstream = open_upstream(spark, settings.reconcile.upstream, options.parallelism)
            try:
                with progress("reconcile", spark) as tracker:
                    result = engine.run(spark, settings, options, upstream, tracker)
            finally:
                upstream.close()
    except TidelakeError as exc:  # the run could not start (upstream unreachable): CI still gets its files
        reports.write(
            ReconcileResult(settings.reconcile.upstream.kind, (TableResult.failed("upstream", str(exc)),))
        )
        raise
    reports.write(result)
    emit(result, as_json, str(output) if output else None)
    for table in result.tables:
        if table.error:
            error(f"{table.table}: {table.error}", "reconcile")
    return result.exit_code


class Reports:
    """The report files a run asked for, written after it (or after it failed to start)."""

    def __init__(self, junit: Path | None, markdown: Path | None, html: Path | None) -> None:
        self.files = {"junit": junit, "markdown": markdown, "html": html}

    def write(self, result: ReconcileResult) -> None:
        from reconcile import reports

        render = {"junit": reports.junit_xml, "markdown": reports.markdown, "html": reports.html_page}
        for kind, path in self.files.items():
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(render[kind](result), encoding="utf-8")
                except OSError as exc:
                    error(f"cannot write the {kind} report {path}: {exc}", "reconcile")


def main(argv: Sequence[str] | None = None) -> int:
    return run_app(app, argv, "reconcile")


def entrypoint() -> None:
    sys.exit(main())
