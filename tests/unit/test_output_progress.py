"""Progress for scheduled jobs: plain lines at a steady interval without a terminal, JSON lines, quiet."""

from __future__ import annotations

import json
import re
import time

import pytest

from tidelake import output
from tidelake.output import OutputStyle, configure, error, progress

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def default_style():
    yield
    configure(OutputStyle())


def test_without_a_terminal_stages_print_plain_lines_at_a_steady_interval(capsys) -> None:
    configure(OutputStyle(interval=0.05))
    with progress("reconcile") as tracker:
        tick = tracker.stage("shop.orders: checksums", 40)
        tick(10)
        time.sleep(0.3)
        tick(30)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    pattern = re.compile(r"^reconcile: shop\.orders: checksums: (\d+)/40 done, [\d.]+/s, \d+s elapsed$")
    assert all(pattern.match(line) for line in lines), lines
    assert lines[0].startswith("reconcile: shop.orders: checksums: 0/40")
    assert len(lines) >= 4  # the start, several beats, the end
    assert lines[-1].startswith("reconcile: shop.orders: checksums: 40/40")


def test_json_log_format_makes_every_stderr_line_an_object(capsys) -> None:
    configure(OutputStyle(log_format="json", interval=0.05))
    with progress("backfill") as tracker:
        tracker.stage("run", 0)
        time.sleep(0.12)
    error("upstream unreachable", "backfill")
    out, err = capsys.readouterr()
    assert out == ""
    records = [json.loads(line) for line in err.splitlines()]
    assert {r["event"] for r in records} == {"progress", "error"}
    beat = records[0]
    assert beat["prog"] == "backfill" and beat["stage"] == "run" and beat["total"] is None
    assert {"time", "done", "rate", "elapsed_s"} <= set(beat)
    assert records[-1] == {**records[-1], "level": "error", "message": "upstream unreachable"}


def test_quiet_prints_nothing_but_errors(capsys) -> None:
    configure(OutputStyle(quiet=True, interval=0.01))
    with progress("reconcile") as tracker:
        tracker.stage("x", 1)(1)
        time.sleep(0.05)
    assert capsys.readouterr().err == ""
    error("boom", "reconcile")
    assert "reconcile: error: boom" in capsys.readouterr().err


def test_bad_styles_are_refused() -> None:
    with pytest.raises(ValueError, match="--log-format"):
        OutputStyle(log_format="xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--progress-interval"):
        OutputStyle(interval=0)
    assert output.DEFAULT_INTERVAL > 0
