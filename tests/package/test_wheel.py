"""The package as a new user gets it: the wheel built from this checkout, installed into a fresh venv in an
empty folder outside the checkout, runs `backfill demo` to "equal" on every table.

The wheel's jar setting points at the checkout's `.cache/jars` (TIDELAKE_JARS), so the test needs no
network: fetching the jars by their coordinates (`backfill jars`) is tested on its own (tests/unit/test_jars.py,
from a file:// Maven repository). pip installs the dependencies from its cache (dev/setup.sh filled it).
"""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path

import pytest

from tests.packaging import InstalledWheel, clean_env, run
from tidelake import __version__
from tidelake.jars import jar_cache

pytestmark = [pytest.mark.slow]


def test_the_wheel_runs_the_demo_from_an_empty_folder(
    installed_wheel: InstalledWheel, tmp_path: Path
) -> None:
    wheel = installed_wheel.wheel
    assert wheel.name == f"tidelake-{__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "tidelake/conf/demo.toml" in names and "tidelake/jars.lock" in names

    work = tmp_path / "work"  # an empty folder; HOME empty too, so no user cache from earlier runs
    env = clean_env(work / "home", TIDELAKE_JARS=str(jar_cache()))
    version = run([installed_wheel.bin("backfill"), "--version"], cwd=work, env=env)
    assert version.stdout.strip() == f"backfill {__version__}"
    started = time.monotonic()
    demo = run([installed_wheel.bin("backfill"), "demo", "--json"], cwd=work, env=env, timeout=900)
    seconds = time.monotonic() - started

    result = json.loads(demo.stdout)
    tables = result["reconcile"]["tables"]
    assert len(tables) >= 4 and {t["status"] for t in tables} == {"equal"}, tables
    assert result["reconcile"]["exit_code"] == 0
    assert (work / ".tidelake" / "demo" / "warehouse").is_dir(), "the demo works under the current folder"
    assert not (installed_wheel.site_packages / ".tidelake").exists()
    assert not (installed_wheel.site_packages / "conf").exists()
    # stderr holds our own lines: none of the JVM's start-up chatter
    assert "incubator modules" not in demo.stderr and "Setting default log level" not in demo.stderr
    print(
        f"\nwheel {wheel.stat().st_size / 1e6:.2f} MB built in {installed_wheel.build_seconds:.1f} s; venv and "
        f"install {installed_wheel.install_seconds:.1f} s; demo from the wheel {seconds:.1f} s"
    )
