"""Collation sort keys, byte for byte as TiDB's new collation framework writes them into clustered keys.

Vectors: TiDB pkg/util/collate/collate_test.go ``TestUTF8CollatorKey`` (columns binary, utf8mb4_bin,
utf8mb4_general_ci, utf8mb4_unicode_ci) and ``TestUTF8CollatorCompare`` (equalities the keys must show).
"""

from __future__ import annotations

import pytest

from backfill.codec import CodecError, TableSchema
from backfill.codec.collation import sort_key
from backfill.codec.keys import decode_record_key, encode_bytes, record_key
from backfill.codec.tableinfo import column_info, table_info

pytestmark = pytest.mark.unit

COLLATIONS = ("binary", "utf8mb4_bin", "utf8mb4_general_ci", "utf8mb4_unicode_ci")

# TestUTF8CollatorKey: (string, [binary, utf8mb4_bin, utf8mb4_general_ci, utf8mb4_unicode_ci])
KEY_VECTORS = [
    ("a", ["61", "61", "0041", "0e33"]),
    ("A", ["41", "41", "0041", "0e33"]),
    (
        "Foo © bar 𝌆 baz ☃ qux",
        [
            "466f6f20c2a92062617220f09d8c862062617a20e29883207175 78",
            "466f6f20c2a92062617220f09d8c862062617a20e29883207175 78",
            "0046004f004f002000a900200042004100520020fffd002000420041005a00202603002000510055 0058",
            "0eb90f820f82020902c502090e4a0e330fc00209fffd02090e4a0e33106a020906ff02090fb4101f105a",
        ],
    ),
    ("a ", ["6120", "61", "0041", "0e33"]),
    (
        "ﷻ",
        ["efb7bb", "efb7bb", "fdfb", "135e13ab0209135e13ab135013ab13b7"],
    ),
    ("中文", ["e4b8ade69687", "e4b8ade69687", "4e2d6587", "fb40ce2dfb40e587"]),
    ("갟감1", ["eab09feab09031", "eab09feab09031", "ac1fac100031", "fbc1ac1ffbc1ac100e2a"]),
    ("\U000ffffe\U000fffff", ["f3bfbfbef3bfbfbf", "f3bfbfbef3bfbfbf", "fffdfffd", "fffdfffd"]),
]


@pytest.mark.parametrize(("text", "keys"), KEY_VECTORS, ids=[repr(t) for t, _ in KEY_VECTORS])
def test_tidb_key_vectors(text, keys):
    """TiDB collate_test.go TestUTF8CollatorKey."""
    for collate, want in zip(COLLATIONS, keys, strict=True):
        assert sort_key(collate, text.encode()).hex() == want.replace(" ", ""), collate


# TestUTF8CollatorCompare: (left, right, [general_ci, unicode_ci]) with 0 = equal keys
COMPARE_VECTORS = [
    ("a", "A", [0, 0]),
    ("À", "A", [0, 0]),
    ("abc", "ab", [1, 1]),
    ("😜", "😃", [0, 0]),
    ("a", "a ", [0, 0]),
    ("a\t", "a", [1, 1]),
    ("ß", "s", [0, 1]),
    ("ß", "ss", [-1, 0]),
    ("æ", "ae", [1, 1]),
    ("\u212b", "A", [1, 0]),  # ANGSTROM SIGN
    ("\u00c5", "A", [0, 0]),
    ("가", "㉡", [1, 1]),
]


@pytest.mark.parametrize(("left", "right", "expect"), COMPARE_VECTORS)
def test_tidb_compare_vectors_hold_for_the_keys(left, right, expect):
    """TiDB collate_test.go TestUTF8CollatorCompare: comparing keys bytewise is comparing the strings."""
    for collate, want in zip(("utf8mb4_general_ci", "utf8mb4_unicode_ci"), expect, strict=True):
        a, b = sort_key(collate, left.encode()), sort_key(collate, right.encode())
        assert (a > b) - (a < b) == want, (collate, left, right)


def test_case_and_accent_changes_share_a_key_under_ci():
    for collate in ("utf8mb4_general_ci", "utf8mb4_unicode_ci"):
        assert sort_key(collate, b"abc") == sort_key(collate, b"ABC") == sort_key(collate, b"Abc  ")
        assert sort_key(collate, b"e") == sort_key(collate, "é".encode()) == sort_key(collate, b"E")
    assert sort_key("utf8mb4_bin", b"abc") != sort_key("utf8mb4_bin", b"ABC")


def test_invalid_utf8_ends_the_key():
    """TiDB's Key loops return the key so far at the first invalid byte."""
    assert sort_key("utf8mb4_general_ci", b"ab\xffcd") == bytes.fromhex("00410042")
    assert sort_key("utf8mb4_unicode_ci", b"\xff") == b""


def test_an_unknown_collation_is_a_clear_error():
    with pytest.raises(CodecError, match="utf8mb4_0900_ai_ci"):
        sort_key("utf8mb4_0900_ai_ci", b"a")


def test_record_key_of_a_ci_clustered_primary_key():
    """The record key holds the sort key as a bytes datum (reference §2.3): 'abc' and 'ABC' are one row."""
    schema = TableSchema.from_table_info(
        table_info(92, "ci", [column_info(1, "k", "varchar(8)", collate="utf8mb4_general_ci")], pk=["k"])
    )
    col = schema.by_id[1]
    key = record_key(92, [(col, "abc")])
    assert key == bytes.fromhex("74800000000000005c5f72") + b"\x01" + encode_bytes(
        bytes.fromhex("004100420043")
    )
    assert record_key(92, [(col, "ABC ")]) == key
    assert decode_record_key(key, common=True).handle == (bytes.fromhex("004100420043"),)
