"""How results reach people, schedulers and machines: result on stdout, everything else on stderr.

A command builds one result object with `to_dict()` and a `render(console)`; `emit` prints it as JSON
(with `--json`, and then nothing else ever reaches stdout) or as tables, and optionally writes the JSON
to a file.

Progress of long work goes to stderr in one of three shapes, chosen once per command (`configure`):
rich bars when stderr is a terminal; plain lines at a steady interval when it is not (Airflow, cron,
Kubernetes logs), each with stage, done/total, rate and elapsed time, plus the running Spark tasks;
nothing with `--quiet`. `--log-format json` makes every progress and error line one JSON object.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

stderr = Console(stderr=True)
stdout = Console()

LogFormat = Literal["text", "json"]
DEFAULT_INTERVAL = 30.0  # seconds between plain progress lines


@dataclass(frozen=True)
class OutputStyle:
    """What a command's flags say about stderr: `--quiet`, `--log-format`, `--progress-interval`."""

    quiet: bool = False
    log_format: LogFormat = "text"
    interval: float = DEFAULT_INTERVAL

    def __post_init__(self) -> None:
        if self.log_format not in ("text", "json"):
            raise ValueError(f"--log-format must be text or json, got {self.log_format!r}")
        if self.interval <= 0:
            raise ValueError(f"--progress-interval must be positive, got {self.interval}")


_style = OutputStyle()
_verbose = False
_activity: list[str] = []  # what the running stage does now, innermost last (`activity`)


def configure(style: OutputStyle) -> None:
    """Set the style for the rest of this process (a command calls it once, from its flags)."""
    global _style
    _style = style


def set_verbose(verbose: bool) -> None:
    """`--verbose`: the JVM's own start-up lines and warnings reach stderr too."""
    global _verbose
    _verbose = verbose


def verbose() -> bool:
    return _verbose


@contextmanager
def activity(description: str) -> Iterator[None]:
    """Say what the work does now (reading a folder, waiting on brokers): progress lines name it."""
    _activity.append(description)
    try:
        yield
    finally:
        _activity.remove(description)


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


def _json_line(prog: str, event: str, **fields: Any) -> None:
    record = {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        "prog": prog,
        "event": event,
    }
    sys.stderr.write(json.dumps({**record, **fields}, default=str) + "\n")
    sys.stderr.flush()


def note(message: str, prog: str) -> None:
    """One line of information on stderr (not an error), in the configured log format."""
    if _style.quiet:
        return
    if _style.log_format == "json":
        _json_line(prog, "note", level="info", message=message)
        return
    sys.stderr.write(f"{prog}: {message}\n")
    sys.stderr.flush()


def error(message: str, prog: str) -> None:
    if _style.log_format == "json":
        _json_line(prog, "error", level="error", message=message)
        return
    stderr.print(f"[bold red]{prog}: error:[/] {escape(message)}", highlight=False, soft_wrap=True)


class Tracker(Protocol):
    """Stages of long work: `stage(description, total)` returns the function that counts work done."""

    def stage(self, description: str, total: int) -> Callable[[int], None]: ...


class _Silent:
    def stage(self, description: str, total: int) -> Callable[[int], None]:
        return lambda n: None


SILENT: Tracker = _Silent()


class _Bars:
    """Stages as rich progress bars (a terminal)."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar

    def stage(self, description: str, total: int) -> Callable[[int], None]:
        task = self.bar.add_task(description, total=total or None)
        return lambda n: self.bar.advance(task, n)


class _Lines:
    """Stages as plain lines on stderr: one when a stage starts, then one every `interval` seconds."""

    def __init__(self, prog: str, style: OutputStyle, spark: SparkSession | None) -> None:
        self.prog = prog
        self.style = style
        self.spark = spark
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stage: tuple[str, int, float] | None = None  # description, total, started
        self._done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="tidelake-progress", daemon=True)

    def stage(self, description: str, total: int) -> Callable[[int], None]:
        with self._lock:
            self._stage = (description, total, time.monotonic())
            self._done = 0
        self.line()
        return self._advance

    def _advance(self, n: int) -> None:
        with self._lock:
            self._done += n

    def _beat(self) -> None:
        while not self._stop.wait(self.style.interval):
            self.line()

    def line(self) -> None:
        with self._lock:
            if self._stage is None:
                return
            description, total, stage_started = self._stage
            done = self._done
        now = time.monotonic()
        rate = done / max(now - stage_started, 1e-9)
        tasks = _spark_tasks(self.spark)
        doing = _activity[-1] if _activity else None
        fields: dict[str, Any] = {
            "stage": description,
            "activity": doing,
            "done": done,
            "total": total or None,
            "rate": round(rate, 2),
            "elapsed_s": round(now - self.started, 1),
        }
        if tasks is not None:
            fields["spark_tasks_done"], fields["spark_tasks_total"] = tasks
        if self.style.log_format == "json":
            _json_line(self.prog, "progress", **fields)
            return
        text = f"{self.prog}: {description}"
        if doing:
            text += f": {doing}"
        if total:
            text += f": {done}/{total} done, {rate:.1f}/s"
        elif done:
            text += f": {done} done, {rate:.1f}/s"
        text += f", {now - self.started:.0f}s elapsed"
        if tasks is not None:
            text += f", spark tasks {tasks[0]}/{tasks[1]}"
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def __enter__(self) -> _Lines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.line()


def _spark_tasks(spark: SparkSession | None) -> tuple[int, int] | None:
    """(completed, all) tasks of the Spark stages running now, or None without Spark or stages."""
    if spark is None:
        return None
    try:
        tracker = spark.sparkContext.statusTracker()
        found = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
    except Exception:
        return None
    infos = [i for i in found if i is not None]
    if not infos:
        return None
    return sum(i.numCompletedTasks for i in infos), sum(i.numTasks for i in infos)


@contextmanager
def progress(prog: str, spark: SparkSession | None = None) -> Iterator[Tracker]:
    """The progress tracker the configured style asks for (see the module docstring)."""
    if _style.quiet:
        yield _Silent()
    elif stderr.is_terminal and _style.log_format == "text":
        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=stderr,
            transient=True,
        )
        with bar:
            yield _Bars(bar)
    else:
        with _Lines(prog, _style, spark) as lines:
            yield lines
