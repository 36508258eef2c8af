"""Run a typer app as `main(argv) -> int` with tidelake's exit codes.

0 success or equal, 1 differences found, 2 bad input or config (usage errors included), 130 interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence

import click
import typer

from tidelake.errors import TidelakeError
from tidelake.output import error

EXIT_OK = 0
EXIT_DIFFERENCES = 1
EXIT_BAD_INPUT = 2


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
