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


def test_nulled_unless_shares_the_bytes_of_a_slice_too():
    """pyarrow 20's `if_else` gives an invalid array for a sliced binary input (a Kafka batch cut from a
    bigger one); `nulled_unless` keeps the values where asked, null elsewhere, valid either way."""
    import numpy as np

    from backfill.sources.ticdc.arrow_bytes import nulled_unless

    array = pa.array([b"x" * 40, None, b"abc", b"", b"yz"], pa.binary())
    for part in (array, array.slice(1, 4), array.slice(2)):
        keep = np.arange(len(part)) % 2 == 0
        out = nulled_unless(part, keep)
        out.validate(full=True)
        assert out.to_pylist() == [v if k else None for v, k in zip(part.to_pylist(), keep, strict=True)]
