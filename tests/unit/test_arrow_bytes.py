"""Binary Arrow values joined straight from the buffers give what `bytes.join` over the values gives."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill.sources.ticdc.arrow_bytes import joined, json_array, lines

pytestmark = pytest.mark.unit

VALUES = [b'{"a":1}', b"", b'{"b":"x\\ny"}', b"[2]"]


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()])
def test_joined_matches_bytes_join_on_arrays_slices_and_chunks(kind):
    array = pa.array(VALUES, kind)
    assert json_array(array) == b"[" + b",".join(VALUES) + b"]"
    assert lines(array) == b"".join(v + b"\n" for v in VALUES)
    assert joined(array.slice(1, 2), sep=b";") == b";".join(VALUES[1:3])  # an array with an offset
    chunked = pa.chunked_array([array.slice(0, 3), array.slice(3)])
    assert json_array(chunked) == json_array(array)
    assert joined(array, sep=b"") == b"".join(VALUES)


def test_nothing_and_nulls():
    assert json_array(pa.array([], pa.binary())) == b"[]"
    assert lines(pa.array([], pa.binary())) == b""
    assert json_array(pa.array([b"1", None, b"2"], pa.binary())) == b"[1,,2]"  # a null: an empty value
