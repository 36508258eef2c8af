"""Binary Arrow values joined into one bytes object straight from the array's buffers.

Every Kafka row value is joined with others once or twice before a parse (msgspec reads a JSON array, or
lines, in one call); a Python object per value (`to_pylist` and `bytes.join`) costs 2.5x as much
(bench/NOTES.md, Kafka source at 5M).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def joined(values: pa.Array | pa.ChunkedArray, *, sep: bytes, start: bytes = b"", end: bytes = b"") -> bytes:
    """``start + v0 + sep + v1 + ... + sep + vN + end`` (`sep`, `start`, `end`: one byte or none). A null
    value joins as an empty one."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not len(values):
        return start + end
    offsets, data = offsets_and_bytes(values)
    width = offsets.dtype
    places: list[np.ndarray] = [offsets[1:-1] - offsets[0]] if sep else []
    marks: list[np.ndarray] = [np.full(len(values) - 1, sep[0], np.uint8)] if sep else []
    if start:
        places, marks = [np.zeros(1, width), *places], [np.frombuffer(start, np.uint8), *marks]
    if end:
        places, marks = [*places, np.array([len(data)], width)], [*marks, np.frombuffer(end, np.uint8)]
    if not places:
        return data.tobytes()
    return np.insert(data, np.concatenate(places), np.concatenate(marks)).tobytes()


def offsets_and_bytes(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary (or string) array's value offsets, as stored, and the bytes from its first value's start to
    its last value's end, without a copy."""
    wide = pa.types.is_large_binary(values.type) or pa.types.is_large_string(values.type)
    width = np.dtype(np.int64 if wide else np.int32)
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, width, len(values) + 1, values.offset * width.itemsize)
    if data_buffer is None:
        return offsets, np.zeros(0, np.uint8)
    return offsets, np.frombuffer(data_buffer, np.uint8)[offsets[0] : offsets[-1]]


def json_array(values: pa.Array | pa.ChunkedArray) -> bytes:
    """JSON values (binary) -> one JSON array of them."""
    return joined(values, sep=b",", start=b"[", end=b"]")


def lines(values: pa.Array | pa.ChunkedArray) -> bytes:
    """Values one a line, each ended by a newline (none: no line)."""
    return joined(values, sep=b"\n", end=b"\n") if len(values) else b""


def nulled_unless(values: pa.Array, keep: np.ndarray) -> pa.Array:
    """Binary `values`, null where `keep` is false, sharing their buffers (no copy of the bytes; pyarrow
    20's `if_else` also gives an invalid array for a sliced binary input)."""
    if values.offset:
        values = pa.concat_arrays([values])
    _, offsets, data = values.buffers()
    valid = pa.array(np.asarray(keep, bool) & values.is_valid().to_numpy(zero_copy_only=False))
    return pa.Array.from_buffers(values.type, len(values), [valid.buffers()[1], offsets, data])


__all__ = ["joined", "json_array", "lines", "nulled_unless", "offsets_and_bytes"]
