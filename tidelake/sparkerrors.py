"""Spark failures that are really bad input, turned back into an `InputError` that names the place.

Two kinds reach the driver as a JVM stack trace: a file Spark itself cannot read (not Parquet, cut short,
gone), and an error our own Python code raised inside a task (a row that does not decode, a CSV line that
does not parse). The second kind travels as a tagged `RuntimeError` (`in_task`), since an exception raised
in a Python worker loses its type and keeps only its text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from tidelake.errors import ConcurrentRunError, InputError

_TAG = "TIDELAKE_INPUT_ERROR"
_TAGGED = re.compile(rf"{_TAG}\[(.*?)\]\s*$", re.MULTILINE | re.DOTALL)
_FILE_IN_MESSAGE = re.compile(r"(?:reading file|file|path)\s+['\"`]?((?:file:|s3a?:|hdfs:|/)[^\s'\"`]+)")
_CONCURRENT_COMMIT = (
    "DELTA_CONCURRENT_", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED", "ConcurrentAppendException",
    "ConcurrentTransactionException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
    "ConcurrentWriteException", "MetadataChangedException", "ProtocolChangedException",
)  # fmt: skip
_UNREADABLE_FILE = (
    "FAILED_READ_FILE", "CANNOT_READ_FILE", "not a Parquet file", "Parquet column cannot be converted",
    "PATH_NOT_FOUND", "ParquetDecodingException", "Could not read footer",
)  # fmt: skip


def in_task(message: str) -> RuntimeError:
    """The exception to raise inside a Spark task for bad input; `input_errors` gives back the message."""
    return RuntimeError(f"{_TAG}[{message.replace(']', ')')}]")


def from_task(exc: BaseException) -> InputError | None:
    """The InputError a failed task stands for, if it failed on bad input (see `in_task`)."""
    found = _TAGGED.search(str(exc))
    return InputError(found.group(1).strip()) if found else None


@contextmanager
def input_errors(what: str) -> Iterator[None]:
    """Turn Spark failures on bad input inside the block into an InputError naming the file or place."""
    try:
        yield
    except InputError:
        raise
    except Exception as exc:  # Py4J / Spark exceptions carry the JVM message as text
        tagged = from_task(exc)
        if tagged is not None:
            raise tagged from None
        message = str(exc)
        if not any(marker in message for marker in _UNREADABLE_FILE):
            raise
        found = _FILE_IN_MESSAGE.search(message)
        place = found.group(1).rstrip(".") if found else f"a {what} file"
        reason = message.strip().splitlines()[0][:300]
        raise InputError(f"{place}: cannot read {what}: {reason}") from None


def is_concurrent_commit(exc: BaseException) -> bool:
    """True when Delta refused a commit because another writer committed to the table first."""
    message = str(exc)
    return any(marker in message for marker in _CONCURRENT_COMMIT)


@contextmanager
def concurrent_commits(job: str) -> Iterator[None]:
    """Turn Delta's refusal of a commit that raced another writer's into a `ConcurrentRunError`."""
    try:
        yield
    except Exception as exc:  # Py4J / Spark exceptions carry the JVM class and error class as text
        message = str(exc)
        marker = next((m for m in _CONCURRENT_COMMIT if m in message), None)
        if marker is None:
            raise
        first = next((line.strip() for line in message.splitlines() if marker in line), marker)[:300]
        raise ConcurrentRunError(
            f"job {job!r}: another run committed to the same table at the same time, so Delta refused this "
            f"run's commit (nothing of it is half-applied; run again to finish whatever is left): {first}"
        ) from None
