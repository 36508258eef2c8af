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


def test_a_stage_without_counts_names_what_it_does_now_not_0_of_unknown(capsys) -> None:
    configure(OutputStyle(interval=0.05))
    with progress("backfill") as tracker:
        tracker.stage("run", 0)
        with output.activity("plan: asking Kafka at 127.0.0.1:9 for the offsets of topic 't'"):
            time.sleep(0.12)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "backfill: run, 0s elapsed"
    assert (
        "backfill: run: plan: asking Kafka at 127.0.0.1:9 for the offsets of topic 't', 0s elapsed" in lines
    )
    assert not any("/?" in line or "backfill: backfill" in line for line in lines)


def test_the_jvm_start_up_chatter_stays_off_stderr_unless_verbose() -> None:
    import os
    import tempfile

    from tidelake.spark import _copy_jvm_output

    jvm = (
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b'Setting default log level to "WARN".\n'
        b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n"
        b"Deleted 3 files and directories in a total of 1 directories.\n"
    )
    for verbose, kept in ((False, jvm.splitlines(keepends=True)[-1]), (True, jvm)):
        read_end, write_end = os.pipe()
        os.write(write_end, jvm)
        os.close(write_end)
        with tempfile.TemporaryFile() as copied:
            _copy_jvm_output(read_end, os.dup(copied.fileno()), verbose)
            copied.seek(0)
            assert copied.read() == kept
