"""A run "killed" after its first table's commit: the apply stage's per-table step exits from the second
table on, leaving the tables as a SIGKILL between two tables' commits would."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath
from urllib.parse import urlparse

import pytest

import backfill.apply.stage as stage
from backfill.report import TableOutcome


@contextmanager
def killed_after_first_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[TableOutcome]]:
    """Inside the block, a backfill run commits one table and then raises SystemExit("killed"). Yields the
    list that then holds the outcome of that one table (tables walk on threads: which one is not fixed)."""
    real_apply, started, finished = stage._apply_table, [], []
    lock = threading.Lock()

    def walk_and_record(walk):
        outcome = yield from walk
        finished.append(outcome)
        return outcome

    def apply_then_die(*args, **kwargs):
        with lock:
            if started:
                raise SystemExit("killed")
            started.append(1)
        return walk_and_record(real_apply(*args, **kwargs))

    monkeypatch.setattr(stage, "_apply_table", apply_then_die)
    try:
        with pytest.raises(SystemExit):
            yield finished
    finally:
        monkeypatch.setattr(stage, "_apply_table", real_apply)


def table_label(outcome: TableOutcome) -> str:
    """`db.table` of the folder the outcome's table ended in (`<warehouse>/<db>/<table>`, any file system)."""
    assert outcome.path is not None, f"{outcome.table} has no Delta table after its walk"
    path = PurePosixPath(urlparse(outcome.path).path)
    return f"{path.parent.name}.{path.name}"
