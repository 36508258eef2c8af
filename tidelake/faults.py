"""Kill points for the reliability drill (`tests/faults/`): places where a process can be stopped on purpose.

`fault_point(name)` does nothing unless the environment variable `TIDELAKE_FAULT_POINT` (read once, at
import) equals `name`; then it writes `reached <name>` to the file `TIDELAKE_FAULT_SIGNAL` names (or
stderr) and blocks, so that the drill can SIGKILL the process at a point it provably reached, or do
something there (stop a server) and let it go on by creating the file `TIDELAKE_FAULT_RESUME` names.

`fault_stage(frame, name)` does the same inside the Spark tasks that read `frame` (the MERGE source):
each task passes its rows on and then blocks, so the kill lands while the job that writes the table's
data files runs, before Delta can commit them. A Python hook cannot sit between Delta's file writes and
its commit (both happen in the JVM), so this is the closest point that is provably reached.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

POINT_ENV = "TIDELAKE_FAULT_POINT"
SIGNAL_ENV = "TIDELAKE_FAULT_SIGNAL"
RESUME_ENV = "TIDELAKE_FAULT_RESUME"
_ARMED = os.environ.get(POINT_ENV) or None
_BLOCK_SECONDS = 3600.0


def fault_point(name: str) -> None:
    """Block here forever (after signalling) if the drill armed this point; otherwise nothing."""
    if _ARMED is not None and name == _ARMED:
        _signal_and_block(name)


def fault_stage(frame: DataFrame, name: str) -> DataFrame:
    """`frame` itself, or (armed) `frame` through a pass-through stage whose tasks block after their rows."""
    if _ARMED is None or name != _ARMED:
        return frame

    def pass_then_block(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from batches
        _signal_and_block(name)

    return frame.mapInArrow(pass_then_block, frame.schema)


def _signal_and_block(name: str) -> None:
    message = f"reached {name} pid={os.getpid()}\n"
    target = os.environ.get(SIGNAL_ENV)
    if target:
        with open(target, "a", encoding="utf-8") as signal:
            signal.write(message)
    else:
        sys.stderr.write(message)
        sys.stderr.flush()
    resume = os.environ.get(RESUME_ENV)
    deadline = time.monotonic() + _BLOCK_SECONDS
    while time.monotonic() < deadline and not (resume and os.path.exists(resume)):
        time.sleep(0.2)
