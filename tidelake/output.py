"""How results reach people and machines: rich tables and progress on stderr, JSON on stdout.

A command builds one result object with `to_dict()` and a `render(console)`; `emit` prints it as JSON
(with `--json`) or as tables, and optionally writes the JSON to a file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

stderr = Console(stderr=True)
stdout = Console()


class Result(Protocol):
    def to_dict(self) -> dict[str, Any]: ...

    def render(self, console: Console) -> None: ...


def emit(result: Result, as_json: bool, output: str | None = None) -> None:
    document = json.dumps(result.to_dict(), indent=2, sort_keys=False, default=str)
    if output:
        Path(output).write_text(document + "\n", encoding="utf-8")
    if as_json:
        sys.stdout.write(document + "\n")
        sys.stdout.flush()
    else:
        result.render(stdout)


def error(message: str, prog: str) -> None:
    stderr.print(f"[bold red]{prog}: error:[/] {escape(message)}", highlight=False, soft_wrap=True)


@contextmanager
def progress(enabled: bool = True) -> Iterator[Progress]:
    """A progress display on stderr; invisible when stderr is not a terminal."""
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        disable=not enabled or not stderr.is_terminal,
    )
    with bar:
        yield bar
