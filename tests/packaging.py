"""The package as users get it, for the tests that run it: the wheel built from this checkout, installed
into a fresh venv outside the checkout (dependencies from pip's cache), and the environment a run there sees."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests import CHECKOUT


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run `command`; its stderr's tail in the failure when it exits non-zero."""
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{command[:3]} exit {done.returncode}:\n{done.stderr[-4000:]}"
    return done


@dataclass(frozen=True)
class InstalledWheel:
    wheel: Path
    venv: Path
    build_seconds: float
    install_seconds: float

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    @property
    def site_packages(self) -> Path:
        return (
            self.venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        )


def install_wheel(base: Path) -> InstalledWheel:
    started = time.monotonic()
    run([sys.executable, "-m", "pip", "wheel", str(CHECKOUT), "--no-deps", "-q", "-w", str(base / "dist")])
    (wheel,) = (base / "dist").glob("tidelake-*.whl")
    built = time.monotonic()
    venv = base / "venv"
    run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    return InstalledWheel(wheel, venv, built - started, time.monotonic() - built)


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without anything that points at the checkout or its Spark, HOME at
    `home` (an empty user cache), plus `extra`."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYSPARK", "SPARK_", "TIDELAKE_", "PYTHON", "VIRTUAL_ENV"))
    }
    return {**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), **extra}
