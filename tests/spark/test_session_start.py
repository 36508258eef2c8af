"""A session tidelake starts maps the class archive dev/setup.sh wrote (tidelake/classarchive.py) and
runs the driver JVM with the collector of `tidelake.spark.GC_OPTION`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tidelake import classarchive
from tidelake.spark import class_archive_dir

pytestmark = pytest.mark.spark


def vm_info(spark: Any) -> str:
    """The JVM's own report on itself, from `jcmd <pid> VM.info` of the JDK that runs it."""
    java = classarchive.java_executable()
    assert java is not None, "no java found: JAVA_HOME or PATH"
    pid = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid()
    done = subprocess.run([str(java.parent / "jcmd"), str(pid), "VM.info"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_session_maps_the_class_archive_set_up_wrote_and_only_then(spark: Any) -> None:
    """With an archive for this JDK and these jars the JVM starts with it and maps it; without one (the
    test set-up writes none) it starts without the option, as a JVM with a stale archive must."""
    options = classarchive.java_options(class_archive_dir())
    started_with = list(
        spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    if not options:
        assert not any("SharedArchiveFile" in a for a in started_with)
        return
    archive = Path(options[0].partition("=")[2])
    assert options[0] in started_with
    mapped = re.search(r"CDS archive\(s\) mapped at: .*?size (\d+)", vm_info(spark))
    assert mapped is not None, "the JVM maps no class archive"
    # The JDK's own base archive is a few MB; the mapping covers ours (and the base) only when ours is used.
    assert int(mapped.group(1)) >= archive.stat().st_size


def test_the_driver_jvm_collects_with_the_throughput_collector(spark: Any) -> None:
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(str(bean.getName()) for bean in beans) == ["PS MarkSweep", "PS Scavenge"]
