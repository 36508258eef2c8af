"""TableSchema from TableInfo JSON, the Delta type mapping (docs/architecture.md "Delta conventions"),
absent-column fill rules (reference §3.5), and SchemaHistory over DDL jobs (reference §4.3)."""

from __future__ import annotations

import copy
import datetime as dt
from decimal import Decimal
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

from backfill.codec import CodecError, SchemaHistory, TableSchema, decode_row, encode_row, record_key
from backfill.codec.tableinfo import column_info, table_info

pytestmark = pytest.mark.unit


def _schema(cols, **kw) -> TableSchema:
    return TableSchema.from_table_info(table_info(45, "t", cols, **kw))


# ------------------------------------------------ type mapping (docs/architecture.md "Delta conventions")


@pytest.mark.parametrize(
    ("sql", "spark", "arrow"),
    [
        ("tinyint", "TINYINT", pa.int8()),
        ("smallint", "SMALLINT", pa.int16()),
        ("mediumint", "INT", pa.int32()),
        ("int", "INT", pa.int32()),
        ("bigint", "BIGINT", pa.int64()),
        ("tinyint unsigned", "SMALLINT", pa.int16()),
        ("smallint unsigned", "INT", pa.int32()),
        ("mediumint unsigned", "BIGINT", pa.int64()),
        ("int unsigned", "BIGINT", pa.int64()),
        ("bigint unsigned", "DECIMAL(20,0)", pa.decimal128(20, 0)),
        ("float", "FLOAT", pa.float32()),
        ("double", "DOUBLE", pa.float64()),
        ("decimal(12,2)", "DECIMAL(12,2)", pa.decimal128(12, 2)),
        ("decimal(38,10)", "DECIMAL(38,10)", pa.decimal128(38, 10)),
        ("decimal(65,30)", "STRING", pa.string()),
        ("char(3)", "STRING", pa.string()),
        ("varchar(10)", "STRING", pa.string()),
        ("text", "STRING", pa.string()),
        ("enum('a')", "STRING", pa.string()),
        ("set('a')", "STRING", pa.string()),
        ("json", "STRING", pa.string()),
        ("binary(3)", "BINARY", pa.binary()),
        ("varbinary(3)", "BINARY", pa.binary()),
        ("blob", "BINARY", pa.binary()),
        ("bit(9)", "BINARY", pa.binary()),
        ("date", "DATE", pa.date32()),
        ("datetime(3)", "TIMESTAMP_NTZ", pa.timestamp("us")),
        ("timestamp(6)", "TIMESTAMP", pa.timestamp("us", tz="UTC")),
        ("time(2)", "STRING", pa.string()),
        ("year", "SMALLINT", pa.int16()),
    ],
)
def test_delta_type_mapping(sql, spark, arrow):
    """The type map of docs/architecture.md "Delta conventions"."""
    col = _schema([column_info(1, "c", sql)]).columns[0]
    assert (col.spark_type, col.arrow_type) == (spark, arrow)


def test_schema_shapes():
    int_pk = _schema(
        [column_info(1, "id", "bigint", primary_key=True), column_info(2, "v", "varchar(3)")], pk="int"
    )
    assert (int_pk.pk_kind, int_pk.pk_columns, int_pk.physical_ids) == ("int", ("id",), (45,))
    assert int_pk.arrow_schema.names == ["id", "v"]
    assert int_pk.spark_ddl == "`id` BIGINT NOT NULL, `v` STRING"
    rowid = _schema([column_info(1, "a`b", "int", not_null=True)])
    assert (rowid.pk_kind, rowid.pk_columns) == ("rowid", ("_tidb_rowid",))
    assert rowid.arrow_schema.names == ["_tidb_rowid", "a`b"]
    assert rowid.spark_ddl == "`_tidb_rowid` BIGINT NOT NULL, `a``b` INT NOT NULL"
    common = _schema([column_info(1, "a", "varchar(5)"), column_info(2, "b", "int")], pk=["b", "a"])
    assert (common.pk_kind, common.pk_columns) == ("common", ("b", "a"))
    parts = TableSchema.from_table_info(
        table_info(50, "p", [column_info(1, "a", "int")], partitions=[(51, "p0"), (52, "p1")])
    )
    assert parts.physical_ids == (51, 52) and parts.table_id == 50


def test_invisible_columns_are_not_in_the_schema():
    """Only public, visible, stored columns are CDC-visible (TiCDC skips virtual generated columns)."""
    schema = _schema(
        [
            column_info(1, "a", "int"),
            column_info(2, "w", "int", state=2),  # write-only
            column_info(3, "h", "int", hidden=True),
            column_info(4, "g", "int", generated_expr="`a` + 1"),
            column_info(5, "gs", "int", generated_expr="`a` + 2", generated_stored=True),
        ]
    )
    assert [c.name for c in schema.columns] == ["a", "gs"]


# ---------------------------------------------------------------- absent columns and unknown ids


def test_fill_rules_for_absent_columns():
    """reference §3.5 / TiCDC getDefaultOrZeroValue: origin default -> NULL if nullable -> ENUM first
    element -> zero value; the int PK comes from the key."""
    schema = _schema(
        [
            column_info(1, "id", "int", primary_key=True),
            column_info(2, "od_int", "int", origin_default="42"),
            column_info(3, "od_dec", "decimal(6,2)", origin_default="1.5"),
            column_info(4, "od_enum", "enum('x','y')", origin_default="y"),
            column_info(5, "od_set", "set('x','y','z')", origin_default="z,x"),
            column_info(6, "od_dt", "datetime(2)", origin_default="2020-01-02 03:04:05.67"),
            column_info(7, "od_bit", "bit(12)", origin_default_bit="AQI="),
            column_info(8, "od_time", "time", origin_default="-01:02:03"),
            column_info(9, "nullable", "varchar(4)"),
            column_info(10, "nn_enum", "enum('first','second')", not_null=True),
            column_info(11, "nn_str", "varchar(4)", not_null=True),
            column_info(12, "nn_int", "bigint", not_null=True),
            column_info(13, "nn_json", "json", not_null=True),
            column_info(14, "nn_dec", "decimal(5,3)", not_null=True),
            column_info(15, "nn_date", "date", not_null=True),
            column_info(16, "nn_bin", "binary(2)", not_null=True),
            column_info(17, "nn_time", "time(1)", not_null=True),
            column_info(18, "nn_year", "year", not_null=True),
            column_info(19, "od_year", "year", origin_default="2024"),
            column_info(20, "od_float", "float", origin_default="0.1"),
            column_info(21, "od_unsigned", "bigint unsigned", origin_default="18446744073709551615"),
        ],
        pk="int",
    )
    row = decode_row(schema, record_key(45, 9), encode_row(schema, {}))
    assert row == {
        "id": 9,
        "od_int": 42,
        "od_dec": Decimal("1.50"),
        "od_enum": "y",
        "od_set": "x,z",
        "od_dt": dt.datetime(2020, 1, 2, 3, 4, 5, 670000),
        "od_bit": b"\x01\x02",
        "od_time": "-01:02:03",
        "nullable": None,
        "nn_enum": "first",
        "nn_str": "",
        "nn_int": 0,
        "nn_json": "null",
        "nn_dec": Decimal("0.000"),
        "nn_date": None,
        "nn_bin": b"",
        "nn_time": "00:00:00.0",
        "nn_year": 0,
        "od_year": 2024,
        "od_float": float.fromhex("0x1.99999ap-4"),
        "od_unsigned": Decimal(18446744073709551615),
    }


def test_timestamp_origin_default_zones():
    """TIMESTAMP origin defaults: UTC text when ColumnInfo.version >= 1, server zone text when 0."""
    cols = [
        column_info(1, "v1", "timestamp", origin_default="2024-03-01 12:00:00", version=1),
        column_info(2, "v0", "timestamp", origin_default="2024-03-01 12:00:00", version=0),
        column_info(3, "other", "int"),
    ]
    schema = _schema(cols)
    raw = encode_row(schema, {3: 1})
    utc = dt.datetime(2024, 3, 1, 12, tzinfo=dt.UTC)
    assert decode_row(schema, 1, raw)["v0"] == utc  # zone unknown: taken as UTC
    row = decode_row(schema, 1, raw, tz=ZoneInfo("Asia/Shanghai"))
    assert row["v1"] == utc and row["v0"] == dt.datetime(2024, 3, 1, 4, tzinfo=dt.UTC)


def test_unknown_ids_dropped_and_write_only_columns():
    """Rows written during ADD COLUMN (write-only) carry an id the old schema lacks: it is dropped. Rows
    written before it lack the column the new schema has: it is filled from the origin default."""
    old_cols = [column_info(1, "id", "bigint", primary_key=True), column_info(2, "a", "varchar(5)")]
    new_cols = [*old_cols, column_info(3, "b", "int", origin_default="7", default="7")]
    old, new = _schema(old_cols, pk="int"), _schema(new_cols, pk="int")
    for version in (1, 2):
        with_b = encode_row(new, {2: "x", 3: 99}, version=version)
        assert decode_row(old, record_key(45, 1), with_b) == {"id": 1, "a": "x"}
        without_b = encode_row(old, {2: "x"}, version=version)
        assert decode_row(new, record_key(45, 1), without_b) == {"id": 1, "a": "x", "b": 7}


def test_encoder_skips_what_tidb_skips():
    """TiDB CanSkip: the int-PK handle column, and NULLs of columns with NULL default and origin default."""
    schema = _schema(
        [
            column_info(1, "id", "bigint", primary_key=True),
            column_info(2, "a", "int"),
            column_info(3, "b", "int", default="1"),
        ],
        pk="int",
    )
    assert encode_row(schema, {1: 5, 2: None, 3: None}) == encode_row(schema, {3: None})


# ---------------------------------------------------------------- SchemaHistory


def _info(table_id, cols, name="t", **kw):
    return table_info(table_id, name, cols, **kw)


def _job(job_id, jtype, finished_ts, info, table_id=None, state=6, schema_name="db", **extra):
    return {
        "id": job_id,
        "type": jtype,
        "schema_name": schema_name,
        "table_name": info["name"]["O"] if info else "",
        "table_id": table_id if table_id is not None else (info["id"] if info else 0),
        "state": state,
        "binlog": {"SchemaVersion": job_id, "TableInfo": info, "FinishedTS": finished_ts},
        **extra,
    }


BASE = [column_info(1, "id", "bigint", primary_key=True), column_info(2, "a", "varchar(5)")]


def test_history_version_lookup_uses_commit_ts_minus_one():
    """reference §4.3 / seed 004: a row committed at the DDL's finish ts still uses the old schema."""
    initial = _info(45, BASE, pk="int")
    added = _info(45, [*BASE, column_info(3, "b", "int", origin_default="0")], pk="int")
    h = SchemaHistory(initial, [_job(10, 5, 1000, added)], schema_name="db", initial_ts=500)
    assert [c.name for c in h.version_for(1000).columns] == ["id", "a"]
    assert [c.name for c in h.version_for(1001).columns] == ["id", "a", "b"]
    assert h.version_for(501).name == "t"


def test_history_ignores_unfinished_duplicate_and_unrelated_jobs():
    initial = _info(45, BASE, pk="int")
    added = _info(45, [*BASE, column_info(3, "b", "int")], pk="int")
    other = _info(99, BASE, name="other", pk="int")
    h = SchemaHistory(initial, schema_name="db")
    assert not h.apply_ddl_job(_job(10, 5, 1000, added, state=1))  # running
    assert not h.apply_ddl_job(_job(11, 5, 1000, other))
    assert h.apply_ddl_job(_job(12, 5, 1000, added))
    assert h.apply_ddl_job(_job(12, 5, 1000, added))  # same job from an overlapping scan
    assert len(h.versions) == 2


def test_history_out_of_order_jobs_are_sorted():
    initial = _info(45, BASE, pk="int")
    v1 = _info(45, [*BASE, column_info(3, "b", "int")], pk="int")
    v2 = _info(45, [*BASE, column_info(3, "b", "int"), column_info(4, "c", "int")], pk="int")
    h = SchemaHistory(initial, [_job(21, 5, 2000, v2), _job(20, 5, 1000, v1)], schema_name="db")
    assert [len(v.schema.columns) for v in h.versions] == [2, 3, 4]


def test_history_truncate_rename_drop_create():
    initial = _info(45, BASE, pk="int")
    truncated = _info(60, BASE, pk="int")  # TRUNCATE gives a new table id
    renamed = _info(60, BASE, name="t2", pk="int")
    h = SchemaHistory(initial, schema_name="db")
    assert h.apply_ddl_job(_job(30, 11, 1000, truncated, table_id=45))
    assert h.apply_ddl_job(_job(31, 14, 2000, renamed))
    assert h.apply_ddl_job(_job(32, 4, 3000, renamed))  # drop
    assert h.live_physical_ids(999) == {45} and h.live_physical_ids(1000) == {60}
    assert h.schema_for_row(45, 1001) is None  # rows of the truncated id are dropped by the caller
    assert h.schema_for_row(60, 1001).table_id == 60
    assert h.version_for(2001).name == "t2"
    assert h.version_for(3001) is None and h.live_physical_ids(3000) == frozenset()
    assert h.logical_table_id(45) == 45 and h.logical_table_id(60) == 60 and h.logical_table_id(7) is None


def test_history_created_in_window():
    created = _info(70, BASE, name="fresh", pk="int")
    h = SchemaHistory(None, schema_name="db", table_name="fresh")
    assert not h.apply_ddl_job(_job(40, 3, 500, _info(71, BASE, name="else", pk="int")))
    assert h.apply_ddl_job(_job(41, 3, 1000, created))
    assert h.version_for(1000) is None and h.version_for(1001).table_id == 70


def test_history_columns_and_partitions():
    cols = [column_info(1, "id", "bigint", primary_key=True), column_info(2, "a", "int")]
    initial = _info(50, cols, pk="int", partitions=[(51, "p0"), (52, "p1")])
    dropped_col = _info(50, cols[:1], pk="int", partitions=[(51, "p0"), (52, "p1")])
    modified = copy.deepcopy(dropped_col)
    modified["cols"].append(column_info(3, "a", "varchar(10)", offset=1))
    add_part = copy.deepcopy(modified)
    add_part["partition"]["definitions"].append({"id": 53, "name": {"O": "p2", "L": "p2"}})
    trunc_part = copy.deepcopy(add_part)
    trunc_part["partition"]["definitions"][0]["id"] = 54
    drop_part = copy.deepcopy(trunc_part)
    del drop_part["partition"]["definitions"][1]
    h = SchemaHistory(
        initial,
        [
            _job(1, 6, 100, dropped_col),
            _job(2, 12, 200, modified),
            _job(3, 19, 300, add_part),
            _job(4, 23, 400, trunc_part),
            _job(5, 20, 500, drop_part),
        ],
        schema_name="db",
    )
    assert [c.name for c in h.version_for(101).columns] == ["id"]
    assert h.version_for(201).by_name["a"].spark_type == "STRING"
    assert h.live_physical_ids(300) == {51, 52, 53}
    assert h.live_physical_ids(400) == {54, 52, 53}
    assert h.live_physical_ids(500) == {54, 53}
    assert h.schema_for_row(52, 501) is None and h.schema_for_row(53, 501).table_id == 50
    assert h.logical_table_id(52) == 50


def test_bad_table_info_is_a_codec_error():
    with pytest.raises(CodecError):
        TableSchema.from_table_info({"name": {"O": "x"}})
    with pytest.raises(CodecError):
        TableSchema.from_table_info(table_info(1, "x", [column_info(1, "g", "int")]) | {"pk_is_handle": True})


def test_schemas_and_errors_pickle():
    """Spark ships schemas to executors and errors back to the driver."""
    import pickle

    schema = _schema(
        [column_info(1, "id", "bigint", primary_key=True), column_info(2, "j", "json")], pk="int"
    )
    again = pickle.loads(pickle.dumps(schema))
    assert again.arrow_schema == schema.arrow_schema and again.by_id.keys() == schema.by_id.keys()
    err = pickle.loads(pickle.dumps(CodecError("bad", table_id=1, handle=2, offset=3)))
    assert (err.table_id, err.handle, err.offset, str(err)) == (1, 2, 3, "bad (table 1, handle 2, offset 3)")


def test_an_enum_default_without_its_elements_reads_as_its_text():
    """A storage sink's schema file written by tiflow names no ENUM/SET elements: an ADD COLUMN's default
    cannot become an index, so existing rows read the default's own text (not an error)."""
    from backfill.codec.values import fill_value

    schema = _schema(
        [
            column_info(1, "id", "int", primary_key=True),
            column_info(2, "e", "enum", origin_default="hi"),
            column_info(3, "s", "set", origin_default="a,b"),
        ],
        pk="int",
    )
    assert schema.by_name["e"].elems == ()
    assert (fill_value(schema.by_name["e"]), fill_value(schema.by_name["s"])) == ("hi", "a,b")
