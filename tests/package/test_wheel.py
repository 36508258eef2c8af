"""The package as a new user gets it: the wheel built from this checkout, installed into a fresh venv in an
empty folder outside the checkout, runs `backfill demo` to "equal" on every table.

The wheel's jar setting points at the checkout's `.cache/jars` (TIDELAKE_JARS), so the test needs no
network: fetching the jars by their coordinates (`backfill jars`) is tested on its own (test_jars_fetch.py).
pip installs the dependencies from its cache (dev/setup.sh filled it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests import CHECKOUT
from tidelake import __version__
from tidelake.jars import jar_cache

pytestmark = [pytest.mark.slow]


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{command[:3]} exit {done.returncode}:\n{done.stderr[-4000:]}"
    return done


def test_the_wheel_runs_the_demo_from_an_empty_folder(tmp_path: Path) -> None:
    started = time.monotonic()
    _run(
        [sys.executable, "-m", "pip", "wheel", str(CHECKOUT), "--no-deps", "-q", "-w", str(tmp_path / "dist")]
    )
    (wheel,) = (tmp_path / "dist").glob("tidelake-*.whl")
    assert wheel.name == f"tidelake-{__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "tidelake/conf/demo.toml" in names and "tidelake/jars.lock" in names
    built = time.monotonic()

    venv = tmp_path / "venv"
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    installed = time.monotonic()

    work = tmp_path / "work"  # an empty folder; HOME empty too, so no user cache from earlier runs
    (work / "home").mkdir(parents=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYSPARK", "SPARK_", "TIDELAKE_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        HOME=str(work / "home"), TIDELAKE_JARS=str(jar_cache()), XDG_CACHE_HOME=str(work / "home/.cache")
    )
    version = _run([str(venv / "bin" / "backfill"), "--version"], cwd=work, env=env)
    assert version.stdout.strip() == f"backfill {__version__}"
    demo = _run([str(venv / "bin" / "backfill"), "demo", "--json"], cwd=work, env=env, timeout=900)
    finished = time.monotonic()

    result = json.loads(demo.stdout)
    tables = result["reconcile"]["tables"]
    assert len(tables) >= 4 and {t["status"] for t in tables} == {"equal"}, tables
    assert result["reconcile"]["exit_code"] == 0
    assert (work / ".tidelake" / "demo" / "warehouse").is_dir(), "the demo works under the current folder"
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert not (site / ".tidelake").exists() and not (site / "conf").exists()
    # stderr holds our own lines: none of the JVM's start-up chatter
    assert "incubator modules" not in demo.stderr and "Setting default log level" not in demo.stderr
    print(
        f"\nwheel {wheel.stat().st_size / 1e6:.2f} MB built in {built - started:.1f} s; venv and install "
        f"{installed - built:.1f} s; demo from the wheel {finished - installed:.1f} s"
    )
