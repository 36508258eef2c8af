"""Which rows lie in a partition, as a Spark condition from TiDB's partition definitions: RANGE bounds
(lower inclusive, upper exclusive, MAXVALUE), LIST values, HASH on an integer, and where NULL goes."""

from __future__ import annotations

import pytest

from backfill.apply.ddl import partition_membership
from backfill.apply.exchange import check_membership, rows_in_partition
from backfill.codec import TableSchema
from tests.captures import users_table
from tidelake.errors import InputError

pytestmark = pytest.mark.spark

IDS = [None, -5, 0, 9, 10, 11, 19, 20, 10**12]


def schema(
    kind: int, definitions: list[dict], expr: str = "`id`", columns: list | None = None
) -> TableSchema:
    table = users_table(300, "events")
    table["cols"][0]["type"]["Flag"] = 0  # a nullable id, so that NULL rows can be asked about
    table["pk_is_handle"] = False
    named = [d | {"name": {"O": f"p{i}", "L": f"p{i}"}} for i, d in enumerate(definitions)]
    table["partition"] = {
        "type": kind,
        "expr": expr,
        "columns": columns,
        "num": len(named),
        "definitions": named,
    }
    return TableSchema.from_table_info(table, schema_name="app")


def members(spark, s: TableSchema, pid: int, *, never_null: bool = False) -> list:
    frame = spark.createDataFrame([(i,) for i in IDS], "id BIGINT")
    condition = rows_in_partition(s, pid) if never_null else partition_membership(s, pid)
    return [r["id"] for r in frame.filter(condition).collect()]


RANGE = schema(
    1, [{"id": 1, "less_than": ["10"]}, {"id": 2, "less_than": ["20"]}, {"id": 3, "less_than": ["MAXVALUE"]}]
)


def test_range_bounds_lower_inclusive_upper_exclusive_and_maxvalue(spark) -> None:
    assert members(spark, RANGE, 1) == [None, -5, 0, 9]  # NULL sorts first: the first partition holds it
    assert members(spark, RANGE, 2) == [10, 11, 19]
    assert members(spark, RANGE, 3) == [20, 10**12]


def test_range_columns_on_one_column(spark) -> None:
    bounds = [{"id": 1, "less_than": ["11"]}, {"id": 2, "less_than": ["MAXVALUE"]}]
    s = schema(1, bounds, expr="", columns=[{"O": "id", "L": "id"}])
    assert members(spark, s, 2) == [11, 19, 20, 10**12]


def test_list_values_and_null_only_where_listed(spark) -> None:
    s = schema(3, [{"id": 1, "in_values": [["0"], ["9"]]}, {"id": 2, "in_values": [["NULL"], ["20"]]}])
    assert members(spark, s, 1) == [0, 9]
    assert members(spark, s, 2) == [None, 20]


def test_hash_on_an_integer_column(spark) -> None:
    """MOD(id, 3) as MySQL's HASH takes it (never negative: pmod); NULL goes to partition 0."""
    s = schema(2, [{"id": 1}, {"id": 2}, {"id": 3}])
    assert members(spark, s, 1) == [None, 0, 9]
    assert members(spark, s, 2) == [-5, 10, 19, 10**12]
    assert members(spark, s, 3) == [11, 20]


def test_an_exchange_moves_or_keeps_every_row(spark) -> None:
    """`rows_in_partition` is never NULL: a row is in p (moves) or not (stays)."""
    frame = spark.createDataFrame([(i,) for i in IDS], "id BIGINT")
    inside = frame.filter(rows_in_partition(RANGE, 2)).count()
    outside = frame.filter(~rows_in_partition(RANGE, 2)).count()
    assert (inside, outside) == (3, len(IDS) - 3)


def test_a_partition_expression_is_refused_naming_the_job_and_both_tables(spark) -> None:
    s = schema(1, [{"id": 1, "less_than": ["2000"]}, {"id": 2, "less_than": ["MAXVALUE"]}], expr="YEAR(`id`)")
    normal = TableSchema.from_table_info(users_table(400, "spare"), schema_name="app")
    with pytest.raises(
        InputError, match=r"DDL job 7 \(EXCHANGE PARTITION\) between app.events and app.spare: .*YEAR"
    ):
        check_membership(s, 1, 7, normal)
