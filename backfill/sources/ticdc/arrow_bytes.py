"""Binary Arrow values read straight from the array's buffers.

Every Kafka row value is parsed once or twice (its head, the supersede selection's key, the typing): a
Python bytes object per value (`to_pylist`) costs more than the parse, and so does joining all values into
one buffer for one parse (bench/NOTES.md, Kafka source at 5M). Values are read in place instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pyarrow as pa


def one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as one Array: a ChunkedArray's only chunk as it is (``combine_chunks`` copies even one
    chunk: ~26 ms per 35 MB batch of values, 7 CPU s of a 5M canal-json run's typing)."""
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


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


T = TypeVar("T")


def decoded_each(values: pa.Array | pa.ChunkedArray, decode: Callable[[memoryview], T]) -> list[T]:
    """`decode` of each value's bytes, read in place (a memoryview of the array's buffer). A msgspec parse
    per value costs less than one parse of all of them joined (1.05 against 1.9 CPU s per 200k open-protocol
    values of ~940 bytes: no 190 MB join and no list grown by the parser). A null value reads as empty."""
    offsets, data = offsets_and_bytes(one_array(values))
    at = (offsets - offsets[0]).tolist()
    view = memoryview(data.data)
    return list(map(decode, map(view.__getitem__, map(slice, at[:-1], at[1:]))))


def nulled_unless(values: pa.Array, keep: np.ndarray) -> pa.Array:
    """Binary `values`, null where `keep` is false, sharing their buffers (no copy of the bytes; pyarrow
    20's `if_else` also gives an invalid array for a sliced binary input)."""
    if values.offset:
        values = pa.concat_arrays([values])
    _, offsets, data = values.buffers()
    valid = pa.array(np.asarray(keep, bool) & values.is_valid().to_numpy(zero_copy_only=False))
    return pa.Array.from_buffers(values.type, len(values), [valid.buffers()[1], offsets, data])


__all__ = ["decoded_each", "nulled_unless", "offsets_and_bytes", "one_array"]
