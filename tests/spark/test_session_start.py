"""A session tidelake starts maps the class archive dev/setup.sh wrote (tidelake/classarchive.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tidelake import classarchive

pytestmark = pytest.mark.spark


def vm_info(spark: Any) -> str:
    """The JVM's own report on itself, from `jcmd <pid> VM.info` of the JDK that runs it."""
    java = classarchive.java_executable()
    assert java is not None
    pid = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid()
    done = subprocess.run([str(java.parent / "jcmd"), str(pid), "VM.info"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_session_maps_the_class_archive_set_up_wrote(spark: Any) -> None:
    options = classarchive.java_options()
    if not options:
        pytest.skip("no class archive for this JDK and these jars: dev/setup.sh writes one")
    archive = Path(options[0].partition("=")[2])
    started_with = list(
        spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert options[0] in started_with
    mapped = re.search(r"CDS archive\(s\) mapped at: .*?size (\d+)", vm_info(spark))
    assert mapped is not None, "the JVM maps no class archive"
    # The JDK's own base archive is a few MB; the mapping covers ours (and the base) only when ours is used.
    assert int(mapped.group(1)) >= archive.stat().st_size
