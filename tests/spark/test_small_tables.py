"""Small tables decoded on the driver (`sources/kvscan/small_tables`): one Spark job fetches them all, a
bigger table keeps its decode job, and the MERGE's key bounds are read from the Arrow rows as Spark's
min and max would give them."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from backfill.apply.merge import arrow_key_bounds, key_bound_aggregates
from backfill.run import run_backfill
from tests.captures import Capture, users_table
from tidelake.config import load_config
from tidelake.conventions import BEFORE_PREFIX

pytestmark = pytest.mark.spark


def test_small_tables_come_to_the_driver_in_one_fetch_and_a_bigger_one_is_decoded_by_a_task(
    spark, tmp_path: Path, monkeypatch
) -> None:
    from backfill.sources.kvscan import small_tables, source

    monkeypatch.setattr(small_tables, "DRIVER_DECODE_ROWS", 50)
    fetched: list[list[int]] = []

    def fetch_segments(collapsed, tables):
        fetched.append(list(tables))
        return small_tables.fetch_segments(collapsed, tables)

    monkeypatch.setattr(source, "fetch_segments", fetch_segments)
    big, one, two = users_table(100, "big"), users_table(200, "one"), users_table(300, "two")
    cap = Capture(tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=9000,
                  tables=[("app", big), ("app", one), ("app", two)])  # fmt: skip
    for handle in range(60):
        cap.put(1, big, handle, {2: f"b{handle}", 3: handle}, 200 + handle, 201 + handle)
    cap.put(1, one, 1, {2: "x", 3: 1}, 150, 151).put(1, one, 1, {2: "y", 3: 2}, 160, 161)
    cap.put(1, two, 5, {2: "z", 3: 3}, 170, 171).delete(1, 300, 6, 172, 173)
    cap.init_and_resolve(8000).write()
    conf = tmp_path / "job.toml"
    conf.write_text(f'[source]\npath = "{tmp_path / "scans"}"\n[target]\nwarehouse = "{tmp_path / "wh"}"\n')

    result = run_backfill(spark, load_config(conf))

    by_name = {t.table: t for t in result.tables}
    indexes = {t.table: i for i, t in enumerate(result.tables)}
    assert fetched == [sorted([indexes["app.one"], indexes["app.two"]])], "one fetch, of the small tables"
    assert by_name["app.big"].decode_tasks == 1
    assert by_name["app.one"].decode_tasks == by_name["app.two"].decode_tasks == 0
    read = {
        name: sorted(map(tuple, spark.read.format("delta").load(str(tmp_path / "wh" / "app" / name))
                         .select("id", "name", "score", "_tidb_commit_ts").collect()))
        for name in ("big", "one", "two")
    }  # fmt: skip
    assert read["one"] == [(1, "y", 2, 161)]
    assert read["two"] == [(5, "z", 3, 171)]
    assert read["big"] == [(h, f"b{h}", h, 201 + h) for h in range(60)]


@pytest.mark.parametrize(
    ("arrow_type", "spark_type", "values"),
    [
        (pa.int64(), "BIGINT", [7, -3, None, 2**62]),
        (pa.decimal128(20, 4), "DECIMAL(20,4)", [Decimal("1.5000"), Decimal("-0.0001"), Decimal("99.0000")]),
        # UTF-8 byte order: U+10000 sorts after U+FFFF (in UTF-16 code units it would not)
        (pa.string(), "STRING", ["b", "\uffff", "\U00010000", "a\u00e9", "", None]),
        (pa.date32(), "DATE", [datetime.date(2020, 2, 29), datetime.date(1000, 1, 1), None]),
    ],
    ids=["bigint", "decimal", "string", "date"],
)
def test_key_bounds_read_on_the_driver_equal_sparks_min_and_max(
    spark, arrow_type: pa.DataType, spark_type: str, values: list
) -> None:
    """Over the key and its window-start value (a key a change moves away from is deleted too)."""
    keys, before = values[: len(values) // 2 + 1], values[len(values) // 2 :]
    before = (before + [None] * len(keys))[: len(keys)]
    table = pa.table({"k": pa.array(keys, arrow_type), BEFORE_PREFIX + "k": pa.array(before, arrow_type)})
    both = spark.createDataFrame([(v,) for v in values], f"k {spark_type}")

    (expected,) = both.agg(*key_bound_aggregates("k")).collect()

    assert arrow_key_bounds(table, "k") == (expected["_key_lo"], expected["_key_hi"])
    assert arrow_key_bounds(table.select(["k"]), "k") == tuple(
        spark.createDataFrame([(v,) for v in keys], f"k {spark_type}").agg(*key_bound_aggregates("k")).first()
    )
