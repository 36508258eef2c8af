"""The canonical row encoding: self-delimiting fields, no forged boundaries, float digits, identifiers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconcile.encoding import FloatDigits, JsonMode, decode_row, encode_row
from reconcile.schema import column_from_type
from reconcile.upstream.dialect import dialect_named
from tidelake.sqlident import quote_upstream_ident

MARIADB = dialect_named("mariadb", "11.4.2-MariaDB")
TIDB = dialect_named("tidb", "8.0.11-TiDB-v8.5.1")

pytestmark = pytest.mark.unit

texts = st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=6)


@given(texts)
def test_every_row_decodes_back_to_its_fields(fields: list[str | None]) -> None:
    assert decode_row(encode_row(fields)) == fields


@given(texts, texts)
def test_two_rows_encode_alike_only_when_their_fields_are_equal(
    a: list[str | None], b: list[str | None]
) -> None:
    assert (encode_row(a) == encode_row(b)) == (a == b)


def test_a_value_holding_the_separator_cannot_forge_another_row() -> None:
    # sync_diff_inspector's CONCAT_WS(',') hashes these two rows alike; the length prefix does not.
    assert encode_row(["a,b", "c"]) != encode_row(["a", "b,c"])
    # A value that looks like an encoded field stays one field.
    assert encode_row(["1:x1:y"]) != encode_row(["1:x", "1:y"])
    assert decode_row(encode_row(["1:x1:y"])) == ["1:x1:y"]


def test_null_and_empty_string_differ() -> None:
    assert encode_row([None]) == "N"
    assert encode_row([""]) == "0:"
    assert encode_row(["N"]) == "1:N"


def test_lengths_count_code_points_as_char_length_and_spark_length_do() -> None:
    assert encode_row(["é😀"]) == "2:é😀"


@pytest.mark.parametrize(
    ("tolerance", "float_digits", "double_digits"),
    [(0.0, 9, 17), (1e-9, 9, 10), (1e-6, 7, 7), (0.01, 3, 3), (0.5, 2, 2), (10.0, 1, 1), (1e-30, 9, 17)],
)
def test_float_digits_never_hide_a_difference_above_the_tolerance(
    tolerance: float, float_digits: int, double_digits: int
) -> None:
    digits = FloatDigits.for_tolerance(tolerance)
    assert (digits.float_digits, digits.double_digits) == (float_digits, double_digits)
    if tolerance > 0:
        # A grid step of 10^-(P-1) relative is at most the tolerance, unless capped by the type.
        assert 10 ** -(double_digits - 1) <= tolerance or double_digits == 17


def test_identifiers_are_validated_and_backtick_quoted() -> None:
    assert quote_upstream_ident("order") == "`order`"
    assert quote_upstream_ident("ünï code") == "`ünï code`"
    assert quote_upstream_ident("a`b") == "`a``b`"
    for bad in ("", "x" * 65, "nul\x00"):
        with pytest.raises(ValueError, match="is not a valid (MySQL|SQL) identifier"):
            quote_upstream_ident(bad)


def test_json_is_normalised_in_sql_only_on_mariadb() -> None:
    assert MARIADB.json_mode is JsonMode.NORMALIZED
    assert dialect_named("mariadb", "10.6.4-MariaDB").json_mode is JsonMode.AS_STORED  # no JSON_NORMALIZE
    assert TIDB.json_mode is JsonMode.AS_STORED
    col = column_from_type("j", "json")
    digits = FloatDigits.for_tolerance(0)
    assert "JSON_NORMALIZE(`j`)" in MARIADB.text(col, digits)
    assert TIDB.text(col, digits) == "CAST(`j` AS CHAR)"


def test_sql_row_wraps_each_field_and_hashes_the_first_64_bits() -> None:
    cols = [column_from_type("id", "bigint"), column_from_type("s", "varchar(10)")]
    row = MARIADB.row(cols, FloatDigits.for_tolerance(0))
    assert row == (
        "CONCAT(COALESCE(CONCAT(CHAR_LENGTH(CAST(`id` AS CHAR)), ':', CAST(`id` AS CHAR)), 'N'), "
        "COALESCE(CONCAT(CHAR_LENGTH(CONVERT(`s` USING utf8mb4)), ':', CONVERT(`s` USING utf8mb4)), 'N'))"
    )
    assert MARIADB.row_hash("x") == "CAST(CONV(SUBSTRING(MD5(x), 1, 16), 16, 10) AS UNSIGNED)"
    assert MARIADB.field("v") == "COALESCE(CONCAT(CHAR_LENGTH(v), ':', v), 'N')"


def test_every_kind_has_an_sql_text() -> None:
    digits = FloatDigits.for_tolerance(1e-9)
    for type_text in (
        "tinyint", "int unsigned", "bigint unsigned", "float", "double", "decimal(10,2)", "decimal(65,30)",
        "varchar(3)", "enum('a')", "set('a','b')", "json", "varbinary(3)", "blob", "bit(9)", "date",
        "datetime(6)", "timestamp(3)", "time(2)", "year",
    ):  # fmt: skip
        sql = MARIADB.text(column_from_type("c", type_text), digits)
        assert "`c`" in sql
