"""jsonvec (vectorised JSON text) gives exactly jsonbin's text, and flags every cell jsonbin rejects."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backfill.codec import CodecError, jsonbin, jsonvec

pytestmark = pytest.mark.unit

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["", "a\nb", "\u2028", "é", 'q"', "x" * 200]),
)
KEYS = st.sampled_from(["a", "b", "tags", "é", "", "k" * 3])
DOCS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=15,
)


def _cell(doc) -> bytes:
    code, raw = jsonbin.encode_value(doc)
    return bytes([code]) + raw


def _reference(cell: bytes) -> str | None:
    try:
        return jsonbin.cell_to_text(cell)
    except CodecError:
        return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(DOCS, min_size=1, max_size=30), shapes=st.lists(DOCS, min_size=1, max_size=3))
def test_same_text_as_jsonbin(docs, shapes):
    cells = [_cell(d) for d in docs] + [_cell(d) for d in shapes] * 5  # repeated shapes form groups
    texts, bad = jsonvec.cells_to_text(pa.array(cells, pa.binary()))
    assert not bad.any()
    assert texts.to_pylist() == [jsonbin.cell_to_text(c) for c in cells]


@settings(max_examples=300, deadline=None)
@given(doc=DOCS.filter(lambda d: isinstance(d, dict | list)), data=st.data())
def test_corrupt_cells_are_flagged_never_wrong(doc, data):
    cell = bytearray(_cell(doc))
    pos = data.draw(st.integers(0, len(cell) - 1))
    cell[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(cell)))
    cells = [bytes(cell), bytes(cell[:cut]), _cell(doc)]
    texts, bad = jsonvec.cells_to_text(pa.array(cells, pa.binary()))
    for i, c in enumerate(cells):
        ref = _reference(c)
        if bad[i]:
            assert ref is None
        else:
            assert texts[i].as_py() == ref


def test_shapes_in_one_batch():
    docs = [{"k": i, "tags": ["a", "b"][: i % 3], "ok": i % 2 == 0} for i in range(50)]
    docs += [[1, 2.5, {"a": "é\n"}], 3, "s", {}, [], {"": [None]}]
    cells = [_cell(d) for d in docs]
    texts, bad = jsonvec.cells_to_text(pa.array(cells, pa.binary()).slice(1))
    assert not bad.any()
    assert texts.to_pylist() == [jsonbin.cell_to_text(c) for c in cells[1:]]
