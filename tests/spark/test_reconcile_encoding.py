"""The Spark half of the canonical encoding, on truth tables: it must match the spec and MariaDB's SQL.

Expected texts marked "MariaDB" were produced by the SQL half on MariaDB 10.11 (JSON_NORMALIZE,
TIME, TIMESTAMP, FLOAT rounding); the integration tests compare both halves on 50k live rows.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from reconcile import sparkenc
from reconcile.chunks import KeyRange, ranges_from_boundaries
from reconcile.diff import values_equal
from reconcile.encoding import FloatDigits, JsonMode, encode_row
from reconcile.schema import column_from_type
from reconcile.sparkside import array_literal, range_index

pytestmark = pytest.mark.spark


def texts(spark, type_text: str, spark_type: str, values: list, *, json_mode=JsonMode.NORMALIZED, digits=17):
    col = column_from_type("v", type_text)
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], f"i INT, v {spark_type}")
    encoded, names = sparkenc.encode(df, [col], json_mode, FloatDigits(min(digits, 9), digits))
    return [r[names[0]] for r in encoded.orderBy("i").collect()]


def test_json_normal_form_matches_mariadb_json_normalize(spark) -> None:
    docs = [
        '{"b": [1, 2.50, 1e3, -0.0, 1.5e-7, 12345678901234567890, "x y"], "a": {"d": null, "c": true}, "z": 3}',
        "1.0",
        "[1.10, 100, 1E2, 0.5e1, 0.30000000000000004]",
        "{}",
        "[]",
        '{"aa": 1, "b": 2}',
        '"text with 1.5 and -2 inside"',
        "not json",
        None,
    ]
    assert texts(spark, "json", "string", docs) == [
        '{"a":{"c":true,"d":null},"b":[1.0E0,2.5E0,1.0E3,0.0E0,1.5E-7,1.234567890123456789E19,"x y"],"z":3.0E0}',
        "1.0E0",
        "[1.1E0,1.0E2,1.0E2,5.0E0,3.0000000000000004E-1]",
        "{}",
        "[]",
        '{"aa":1.0E0,"b":2.0E0}',
        '"text with 1.5 and -2 inside"',  # numbers inside strings stay as they are
        "!not json",
        None,
    ]  # MariaDB (but the last two: JSON_NORMALIZE of invalid text is NULL, hashed as `!` + text)
    assert texts(spark, "json", "string", ['{"b":1, "a":2}'], json_mode=JsonMode.AS_STORED) == [
        '{"b":1, "a":2}'
    ]


def test_floats_round_half_even_to_significant_digits_and_special_values_survive_ansi(spark) -> None:
    values = [
        0.0,
        -0.0,
        1.0,
        0.1,
        -2.5,
        1000.0,
        123456.789,
        1e-300,
        float("nan"),
        float("inf"),
        float("-inf"),
        None,
    ]
    assert texts(spark, "double", "double", values, digits=10) == [
        "0", "0", "1000000000e0", "1000000000e-1", "-2500000000e0", "1000000000e3", "1234567890e5",
        "1000000000e-300", "NaN", "Inf", "-Inf", None,
    ]  # fmt: skip
    # Half-even at the last digit, as MySQL's ROUND(double) (rint): 2.5 -> 2, 3.5 -> 4.
    assert texts(spark, "double", "double", [2.5, 3.5, -2.5], digits=1) == ["2e0", "4e0", "-2e0"]
    # FLOAT is widened exactly: float32(0.1) is 0.100000001490116...
    assert texts(spark, "float", "float", [0.1], digits=9) == ["100000001e-1"]


def test_other_kinds(spark) -> None:
    assert texts(spark, "decimal(10,3)", "decimal(10,3)", [Decimal("1.500"), Decimal("-2.000"), Decimal("0.000")]) == [
        "1.5", "-2", "0",
    ]  # fmt: skip
    assert texts(spark, "decimal(50,10)", "string", ["100.0000000000", "-0.5000000000"]) == ["100", "-0.5"]
    assert texts(spark, "bigint unsigned", "decimal(20,0)", [Decimal(2**64 - 1)]) == ["18446744073709551615"]
    assert texts(spark, "time(3)", "string", ["-838:59:59.000", "01:02:03.5", "00:00:00", "bad"]) == [
        "-838:59:59.000000", "1:02:03.500000", "0:00:00.000000", "!bad",
    ]  # fmt: skip
    assert texts(spark, "bit(10)", "binary", [b"\x03\xff"]) == ["03FF"]
    utc = dt.UTC
    assert texts(spark, "timestamp(6)", "timestamp", [dt.datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=utc)]) == [
        "1000005"
    ]
    assert texts(spark, "datetime(6)", "timestamp_ntz", [dt.datetime(99, 1, 2, 3, 4, 5, 6)]) == [
        "0099-01-02 03:04:05.000006"
    ]
    assert texts(spark, "date", "date", [dt.date(2024, 2, 29)]) == ["2024-02-29"]


def test_spark_rows_encode_exactly_as_the_reference(spark) -> None:
    cols = [column_from_type("a", "varchar(9)"), column_from_type("b", "varchar(9)")]
    rows = [("a,b", "c"), ("a", "b,c"), (None, ""), ("", None), ("1:x", "é😀")]
    df = spark.createDataFrame(rows, "a STRING, b STRING")
    encoded = df.select(sparkenc.row(cols, JsonMode.NORMALIZED, FloatDigits(9, 17)).alias("r")).collect()
    assert [r["r"] for r in encoded] == [encode_row(list(row)) for row in rows]


def test_range_index_finds_each_key_in_its_range(spark) -> None:
    key = [column_from_type("k", "int")]
    ranges = ranges_from_boundaries([(10,), (20,), (30,)])
    df = spark.createDataFrame([(k,) for k in (-5, 9, 10, 25, 30, 99)], "k INT")
    assert range_index(df, key, ranges) == [0, 0, 1, 2, 3, 3]
    sparse = [KeyRange((10,), (12,)), KeyRange((25,), (26,))]
    assert range_index(df, key, sparse) == [-1, -1, 0, 1, -1, -1]
    assert range_index(df, key, [KeyRange(None, (10,)), KeyRange((30,), None)]) == [0, 0, -1, -1, 1, 1]
    many = ranges_from_boundaries([(k,) for k in range(0, 5000, 3)])  # a binary search, not a CASE tree
    assert range_index(df, key, many) == [0, 4, 4, 9, 11, 34]


def test_composite_keys_compare_lexicographically(spark) -> None:
    key = [column_from_type("a", "varchar(3)"), column_from_type("b", "int")]
    df = spark.createDataFrame([("a", 9), ("b", 1), ("b", 5), ("c", 0)], "a STRING, b INT")
    ranges = ranges_from_boundaries([("b", 2)])
    assert range_index(df, key, ranges) == [0, 0, 1, 1]


@pytest.mark.parametrize(
    ("type_text", "values"),
    [
        ("bigint", [1, None, -5]),
        ("bigint unsigned", [Decimal(2**64 - 1), Decimal(0)]),
        ("varchar(9)", ["a'b\\c", "é😀", "plain"]),
        ("varbinary(3)", [b"\x00\xff"]),
        ("date", [dt.date(1, 1, 1)]),
        ("datetime(6)", [dt.datetime(2024, 1, 2, 3, 4, 5, 6)]),
        ("decimal(10,2)", [Decimal("1.50")]),
        ("smallint", [3]),
    ],
)
def test_key_literals_round_trip_through_sql_text(spark, type_text: str, values: list) -> None:
    col = column_from_type("k", type_text)
    got = spark.range(1).select(
        array_literal([col], [None if v is None else (v,) for v in values]).alias("a")
    )
    assert [bytes(v) if isinstance(v, bytearray) else v for v in got.first()["a"]] == values


def test_timestamp_key_literals_are_utc_instants(spark) -> None:
    col = column_from_type("k", "timestamp(6)")
    moment = dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    got = spark.range(1).select(F.unix_micros(F.element_at(array_literal([col], [(moment,)]), 1)).alias("m"))
    assert got.first()["m"] == int(moment.timestamp()) * 10**6 + 6


def test_value_equality_applies_the_float_tolerance_and_null_semantics(spark) -> None:
    double = column_from_type("d", "double")
    rows = [
        (1.0, 1.0 + 1e-12),
        (1e9, 1e9 + 1e4),
        (1.0, 1.1),
        (None, None),
        (None, 0.0),
        (float("nan"), float("nan")),
    ]
    df = spark.createDataFrame(rows, "a DOUBLE, b DOUBLE")
    got = [r["e"] for r in df.select(values_equal(double, F.col("a"), F.col("b"), 1e-6).alias("e")).collect()]
    assert got == [True, False, False, True, False, True]
    text = column_from_type("s", "varchar(3)")
    df = spark.createDataFrame([("", None), ("x", "x"), ("\u00e9", "e\u0301")], "a STRING, b STRING")
    got = [r["e"] for r in df.select(values_equal(text, F.col("a"), F.col("b"), 0.0).alias("e")).collect()]
    assert got == [False, True, False]
