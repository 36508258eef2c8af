"""Run a typer app as `main(argv) -> int` with tidelake's exit codes.

0 success or equal, 1 differences found, 2 bad input or config (usage errors included), 3 a concurrent run of
the same job won a commit race (`ConcurrentRunError`), 130 interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, cast

import click
import typer

from tidelake import __version__
from tidelake.errors import TidelakeError
from tidelake.output import DEFAULT_INTERVAL, LogFormat, OutputStyle, configure, error, set_verbose

EXIT_OK = 0
EXIT_DIFFERENCES = 1
EXIT_BAD_INPUT = 2
EXIT_CONCURRENT_RUN = 3


QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr (errors still).")]
LogFormatOption = Annotated[
    str,
    typer.Option(
        "--log-format", help="`text`, or `json`: progress and error lines on stderr as JSON objects."
    ),
]
IntervalOption = Annotated[
    float,
    typer.Option("--progress-interval", help="Seconds between progress lines when stderr is not a terminal."),
]


def _print_version(ctx: typer.Context, value: bool) -> None:
    if value:
        typer.echo(f"{ctx.info_name} {__version__}")
        raise typer.Exit()


OutputFileOption = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o",
        help="Also write the JSON result to this file (under spark-submit the driver's stderr joins stdout).",
    ),
]  # fmt: skip
VersionOption = Annotated[
    bool,
    typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version),
]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", help="Also the JVM's own start-up lines and Spark's warnings on stderr."),
]


def configure_program(verbose: bool) -> None:
    """Apply the options every command takes before its name (`backfill --verbose run`)."""
    set_verbose(verbose)


def configure_output(quiet: bool, log_format: str, interval: float = DEFAULT_INTERVAL) -> None:
    """Apply a command's `--quiet`, `--log-format` and `--progress-interval` to stderr."""
    try:
        # A plain str from the command line: OutputStyle checks it is one of LogFormat's choices.
        configure(OutputStyle(quiet, cast(LogFormat, log_format), interval))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def run_app(app: typer.Typer, argv: Sequence[str] | None, prog: str) -> int:
    try:
        returned = app(args=list(argv) if argv is not None else None, prog_name=prog, standalone_mode=False)
    except click.exceptions.UsageError as exc:
        exc.show()
        return EXIT_BAD_INPUT
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        error("interrupted", prog)
        return 130
    except TidelakeError as exc:
        error(str(exc), prog)
        return exc.exit_code
    except KeyboardInterrupt:
        error("interrupted", prog)
        return 130
    return returned if isinstance(returned, int) else EXIT_OK


class NotBuiltYet(TidelakeError):
    """A subcommand whose issue has not landed: says so, exit 2, no fake output."""
