"""A run "killed" after its first table's commit: the apply stage's per-table step exits from the second
table on, leaving the tables as a SIGKILL between two tables' commits would."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import backfill.apply.stage as stage


@contextmanager
def killed_after_first_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Inside the block, a backfill run commits one table and then raises SystemExit("killed")."""
    real_apply, calls = stage._apply_table, []

    def apply_then_die(*args, **kwargs):
        if calls:
            raise SystemExit("killed")
        calls.append(1)
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(stage, "_apply_table", apply_then_die)
    try:
        with pytest.raises(SystemExit):
            yield
    finally:
        monkeypatch.setattr(stage, "_apply_table", real_apply)
