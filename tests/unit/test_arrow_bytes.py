"""Binary Arrow values read straight from the buffers are the values."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill.sources.ticdc.arrow_bytes import decoded_each

pytestmark = pytest.mark.unit

VALUES = [b'{"a":1}', b"", b'{"b":"x\\ny"}', b"[2]"]


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary(), pa.string()])
def test_decoded_each_reads_every_value_in_place(kind):
    """Each value's own bytes, on arrays, slices and chunks; a null reads as empty."""
    texts = [v.decode() for v in VALUES] if kind == pa.string() else VALUES
    array = pa.array([*texts, None, texts[0]], kind)
    expected = [*VALUES, b"", VALUES[0]]
    assert decoded_each(array, bytes) == expected
    assert decoded_each(array.slice(2, 3), bytes) == expected[2:5]
    assert decoded_each(pa.chunked_array([array.slice(0, 1), array.slice(1)]), bytes) == expected
    assert decoded_each(array.slice(0, 0), bytes) == []
    import msgspec

    assert decoded_each(array.slice(2, 1), msgspec.json.decode) == [{"b": "x\ny"}]


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


def test_one_array_keeps_an_only_chunk_as_it_is():
    """A single-chunk column is that chunk, its buffers unchanged (no copy); several chunks are joined."""
    from backfill.sources.ticdc.arrow_bytes import one_array

    array = pa.array(VALUES, pa.binary())
    only = one_array(pa.chunked_array([array]))
    assert only.buffers()[2].address == array.buffers()[2].address
    assert one_array(pa.chunked_array([array.slice(0, 1), array.slice(1)])).to_pylist() == VALUES
    assert one_array(pa.chunked_array([], pa.binary())).to_pylist() == []
    assert one_array(array) is array
