"""What the simulator's TiCDC storage sink writes, against TiCDC's own facts: schema-file checksums and
columns from tiflow's table_definition tests, CSV lines from the docs and from tiflow's
csv_storage_update_pk_clustered results, canal-json types and values from tiflow's canal test table."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from backfill.codec import TableSchema
from backfill.codec.tableinfo import column_info, table_info
from tidbsim.storage_codec import (
    CsvEncoder,
    CsvOptions,
    canal_json_line,
    canal_value,
    csv_lines,
    go_fmt_v,
    java_sql_type,
    mysql_type,
)
from tidbsim.storage_schema import schema_file_path, table_column, table_definition

pytestmark = pytest.mark.unit


def _tiflow_table1(defaults: bool) -> TableSchema:
    """pingcap/tiflow pkg/sink/cloudstorage/table_definition_test.go generateTableDef."""
    cols = [
        column_info(1, "Id", "int", not_null=True, primary_key=True, default=10 if defaults else None),
        column_info(
            2, "LastName", "varchar(128)", not_null=True, default="Default LastName" if defaults else None
        ),
        column_info(3, "FirstName", "varchar(64)", default="Default FirstName" if defaults else None),
        column_info(4, "Birthday", "datetime", default=12345678 if defaults else None),
    ]
    return TableSchema.from_table_info(table_info(20, "table1", cols, pk="int"), schema_name="schema1")


def test_schema_file_checksums_match_tiflow_vectors():
    # TestTableDefinitionGenFilePath: the database file and table1 before (no defaults) and after the
    # column defaults were added to the test (both releases' vectors)
    db = table_definition("schema1", None, table_version=100)
    assert schema_file_path(db) == "schema1/meta/schema_100_3233644819.json"
    plain = table_definition("schema1", _tiflow_table1(False), table_version=100)
    assert schema_file_path(plain) == "schema1/table1/meta/schema_100_0785427252.json"
    with_defaults = table_definition("schema1", _tiflow_table1(True), table_version=100)
    assert schema_file_path(with_defaults) == "schema1/table1/meta/schema_100_3752767265.json"
    # TestTableDefinition: the columns as MarshalIndent writes them
    assert with_defaults["TableColumns"][0] == {
        "ColumnName": "Id",
        "ColumnType": "INT",
        "ColumnDefault": 10,
        "ColumnPrecision": "11",
        "ColumnNullable": "false",
        "ColumnIsPk": "true",
    }
    assert with_defaults["TableColumns"][3] == {
        "ColumnName": "Birthday",
        "ColumnType": "DATETIME",
        "ColumnDefault": 12345678,
    }


@pytest.mark.parametrize(
    ("sql_type", "expected"),
    [  # TestTableCol
        ("time(5)", {"ColumnType": "TIME", "ColumnScale": "5"}),
        ("int(5) unsigned", {"ColumnType": "INT UNSIGNED", "ColumnPrecision": "5"}),
        ("float(12,3)", {"ColumnType": "FLOAT", "ColumnPrecision": "12", "ColumnScale": "3"}),
        ("double", {"ColumnType": "DOUBLE", "ColumnPrecision": "22"}),
        ("bigint(20)", {"ColumnType": "BIGINT", "ColumnPrecision": "20"}),
        ("bit(5)", {"ColumnType": "BIT", "ColumnPrecision": "5"}),
        ("varchar(128)", {"ColumnType": "VARCHAR", "ColumnPrecision": "128"}),
        ("char(32)", {"ColumnType": "CHAR", "ColumnPrecision": "32"}),
        ("blob", {"ColumnType": "BLOB", "ColumnPrecision": "65535"}),
        ("text", {"ColumnType": "TEXT", "ColumnPrecision": "65535"}),
        ("enum('a','b')", {"ColumnType": "ENUM"}),
        ("set('a','b')", {"ColumnType": "SET"}),
        ("timestamp(2)", {"ColumnType": "TIMESTAMP", "ColumnScale": "2"}),
        ("timestamp", {"ColumnType": "TIMESTAMP"}),
        ("datetime", {"ColumnType": "DATETIME"}),
        ("date", {"ColumnType": "DATE"}),
        ("year", {"ColumnType": "YEAR", "ColumnPrecision": "4"}),
        ("decimal(10,2)", {"ColumnType": "DECIMAL", "ColumnPrecision": "10", "ColumnScale": "2"}),
    ],
)
def test_table_columns_match_tiflow(sql_type, expected):
    info = table_info(1, "t", [column_info(1, "c", sql_type)])
    col = TableSchema.from_table_info(info).columns[0]
    got = table_column(col)
    assert {k: v for k, v in got.items() if k != "ColumnName"} == expected


def _employee() -> TableSchema:
    cols = [
        column_info(1, "Id", "int", not_null=True, primary_key=True),
        column_info(2, "LastName", "varchar(20)"),
        column_info(3, "FirstName", "varchar(30)"),
        column_info(4, "HireDate", "date"),
        column_info(5, "OfficeLocation", "varchar(20)"),
    ]
    return TableSchema.from_table_info(table_info(9, "employee", cols, pk="int"), schema_name="hr")


def test_csv_rows_as_the_tidb_docs_show_them():
    # docs ticdc-csv.md (and tiflow csv_decoder_test.go): include-commit-ts, no old value
    t = _employee()
    row = {"Id": 101, "LastName": "Smith", "FirstName": "Bob", "HireDate": dt.date(2014, 6, 4)}
    row["OfficeLocation"] = "New York"
    opts = CsvOptions(terminator="\n")
    assert csv_lines(t, "hr", 433305438660591626, row, None, opts) == (
        b'"I","employee","hr",433305438660591626,101,"Smith","Bob","2014-06-04","New York"\n'
    )
    new = dict(row, OfficeLocation="Los Angeles")
    assert csv_lines(t, "hr", 433305438660591627, new, row, opts).startswith(b'"U","employee","hr",')
    old_value = CsvOptions(terminator="\n", output_old_value=True)
    assert csv_lines(t, "hr", 433305438660591627, new, row, old_value) == (
        b'"D","employee","hr",433305438660591627,true,101,"Smith","Bob","2014-06-04","New York"\n'
        b'"I","employee","hr",433305438660591627,true,101,"Smith","Bob","2014-06-04","Los Angeles"\n'
    )
    bare = CsvOptions(quote="", delimiter="|", null="NULL", terminator="\n")
    odd = dict(row, LastName="a|b\\c\nd", FirstName=None)
    assert (
        csv_lines(t, "hr", 1, None, odd, bare)
        == b"D|employee|hr|1|101|a\\|b\\\\c\\nd|NULL|2014-06-04|New York\n"
    )


def test_go_number_formats():
    assert [go_fmt_v(v, 64) for v in (1e6, 123456.0, 1e-05, 0.0001, 3.25)] == [
        "1e+06",
        "123456",
        "1e-05",
        "0.0001",
        "3.25",
    ]


def test_canal_json_line_as_tiflow_writes_it():
    t = _employee()
    row = {
        "Id": 1,
        "LastName": "a<b",
        "FirstName": None,
        "HireDate": dt.date(2020, 1, 2),
        "OfficeLocation": "x",
    }
    line = canal_json_line(t, "hr", 7 << 18, row, None, build_ms=99)
    doc = json.loads(line)
    assert line.endswith(b"}\r\n") and b"a\\u003cb" in line
    assert list(doc) == [
        "id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql", "sqlType", "mysqlType",
        "old", "data", "_tidb",
    ]  # fmt: skip
    assert doc["pkNames"] == ["Id"] and doc["type"] == "INSERT" and doc["es"] == 7
    assert doc["sqlType"] == {"Id": 4, "LastName": 12, "FirstName": 12, "HireDate": 91, "OfficeLocation": 12}
    assert doc["mysqlType"]["Id"] == "int" and doc["_tidb"] == {"commitTs": 7 << 18}
    assert doc["data"] == [
        {"Id": "1", "LastName": "a<b", "FirstName": None, "HireDate": "2020-01-02", "OfficeLocation": "x"}
    ]


# pingcap/tiflow tests/integration_tests/csv_storage_update_pk_clustered: prepare.sql's `test`.`update_pk`
# (id int PRIMARY KEY CLUSTERED, pad varchar(100) NOT NULL) and the changes run.sql makes, as TiCDC hands
# them to the CSV encoder (a moved primary key is a delete and an insert; an update keeps its old row).
UPDATE_PK_CHANGES = [
    (450253245302439944, {"id": 1, "pad": "example1"}, None),
    (450253245302439944, {"id": 2, "pad": "example2"}, None),
    (450253245302439946, {"id": 10, "pad": "example10"}, None),
    (450253245302439946, {"id": 20, "pad": "example20"}, None),
    (450253245302439947, {"id": 100, "pad": "example100"}, None),
    (450253245302439948, {"id": 1000, "pad": "example1000"}, None),
    (450253245485940746, {"id": 1, "pad": "example2"}, {"id": 1, "pad": "example1"}),
    (450253245485940746, {"id": 2, "pad": "example1"}, {"id": 2, "pad": "example2"}),
    (450253245485940749, None, {"id": 10, "pad": "example10"}),
    (450253245485940749, None, {"id": 20, "pad": "example20"}),
    (450253245485940749, {"id": 30, "pad": "example10"}, None),
    (450253245485940749, {"id": 40, "pad": "example20"}, None),
    (450253245485940752, None, {"id": 100, "pad": "example100"}),
    (450253245485940752, {"id": 200, "pad": "example100"}, None),
    (450253245485940753, {"id": 1000, "pad": "example1001"}, {"id": 1000, "pad": "example1000"}),
]


@pytest.mark.parametrize("result", ["changefeed1_pk.res", "changefeed4_pk.res"])
def test_csv_lines_match_tiflows_storage_results(result):
    update_pk = TableSchema.from_table_info(
        table_info(
            70,
            "update_pk",
            [
                column_info(1, "id", "int", primary_key=True),
                column_info(2, "pad", "varchar(100)", not_null=True),
            ],
            pk="int",
        ),
        schema_name="test",
    )
    opts = CsvOptions(terminator="\n", output_old_value=result == "changefeed4_pk.res")
    encoder = CsvEncoder(update_pk, "test", opts)
    got = b"".join(encoder.lines(ts, new, old) for ts, new, old in UPDATE_PK_CHANGES).decode()
    assert got == TIFLOW_RESULTS[result]


TIFLOW_RESULTS = {  # the .res files without their comment and blank lines
    "changefeed1_pk.res": """\
"I","update_pk","test",450253245302439944,1,"example1"
"I","update_pk","test",450253245302439944,2,"example2"
"I","update_pk","test",450253245302439946,10,"example10"
"I","update_pk","test",450253245302439946,20,"example20"
"I","update_pk","test",450253245302439947,100,"example100"
"I","update_pk","test",450253245302439948,1000,"example1000"
"U","update_pk","test",450253245485940746,1,"example2"
"U","update_pk","test",450253245485940746,2,"example1"
"D","update_pk","test",450253245485940749,10,"example10"
"D","update_pk","test",450253245485940749,20,"example20"
"I","update_pk","test",450253245485940749,30,"example10"
"I","update_pk","test",450253245485940749,40,"example20"
"D","update_pk","test",450253245485940752,100,"example100"
"I","update_pk","test",450253245485940752,200,"example100"
"U","update_pk","test",450253245485940753,1000,"example1001"
""",
    "changefeed4_pk.res": """\
"I","update_pk","test",450253245302439944,false,1,"example1"
"I","update_pk","test",450253245302439944,false,2,"example2"
"I","update_pk","test",450253245302439946,false,10,"example10"
"I","update_pk","test",450253245302439946,false,20,"example20"
"I","update_pk","test",450253245302439947,false,100,"example100"
"I","update_pk","test",450253245302439948,false,1000,"example1000"
"D","update_pk","test",450253245485940746,true,1,"example1"
"I","update_pk","test",450253245485940746,true,1,"example2"
"D","update_pk","test",450253245485940746,true,2,"example2"
"I","update_pk","test",450253245485940746,true,2,"example1"
"D","update_pk","test",450253245485940749,false,10,"example10"
"D","update_pk","test",450253245485940749,false,20,"example20"
"I","update_pk","test",450253245485940749,false,30,"example10"
"I","update_pk","test",450253245485940749,false,40,"example20"
"D","update_pk","test",450253245485940752,false,100,"example100"
"I","update_pk","test",450253245485940752,false,200,"example100"
"D","update_pk","test",450253245485940753,true,1000,"example1000"
"I","update_pk","test",450253245485940753,true,1000,"example1001"
""",
}


@pytest.mark.parametrize(
    ("sql_type", "value", "mysql", "java", "encoded"),
    [  # pingcap/tiflow pkg/sink/codec/canal/canal_test_util.go testColumnsTable (codec-domain values)
        ("tinyint", 127, "tinyint", -6, "127"),
        ("tinyint unsigned", 127, "tinyint unsigned", -6, "127"),
        ("tinyint unsigned", 128, "tinyint unsigned", 5, "128"),
        ("smallint unsigned", 32768, "smallint unsigned", 4, "32768"),
        ("mediumint unsigned", 8388608, "mediumint unsigned", 4, "8388608"),
        ("int unsigned", 2147483647, "int unsigned", 4, "2147483647"),
        ("int unsigned", 2147483648, "int unsigned", -5, "2147483648"),
        ("bigint", 9223372036854775807, "bigint", -5, "9223372036854775807"),
        ("bigint unsigned", Decimal(9223372036854775807), "bigint unsigned", -5, "9223372036854775807"),
        ("bigint unsigned", Decimal(9223372036854775808), "bigint unsigned", 3, "9223372036854775808"),
        ("float", 3.14, "float", 7, "3.14"),
        ("double", 2.71, "double", 8, "2.71"),
        ("decimal", Decimal(2333), "decimal", 3, "2333"),
        ("varchar(20)", "测试Varchar", "varchar", 12, "测试Varchar"),
        ("char(20)", "测试String", "char", 1, "测试String"),
        ("tinytext", "测试Tinytext", "tinytext", 2005, "测试Tinytext"),
        ("text", "测试text", "text", 2005, "测试text"),
        ("blob", b"\xe6\xb5", "blob", 2004, "\xe6\xb5"),  # bytes read as ISO-8859-1
        ("varbinary(10)", b"\x00\xff", "varbinary", 2004, "\x00\xff"),
        ("date", dt.date(2020, 2, 20), "date", 91, "2020-02-20"),
        ("datetime", dt.datetime(2020, 2, 20, 2, 20, 20), "datetime", 93, "2020-02-20 02:20:20"),
        ("time", "02:20:20", "time", 92, "02:20:20"),
        ("year", 2020, "year", 12, "2020"),
        ("enum('a','b')", "a", "enum", 4, "1"),
        ("set('a','b')", "a,b", "set", -7, "3"),
        ("bit(10)", b"\x01\x02", "bit", -7, "258"),
    ],
)
def test_canal_json_types_and_values_match_tiflow(sql_type, value, mysql, java, encoded):
    table = TableSchema.from_table_info(table_info(1, "t", [column_info(1, "c", sql_type)]))
    col = table.columns[0]
    assert (mysql_type(col), java_sql_type(col, value), canal_value(col, value)) == (mysql, java, encoded)
    line = json.loads(canal_json_line(table, "d", 1 << 18, {"c": value}, None, build_ms=0))
    assert (line["data"][0]["c"], line["sqlType"]["c"], line["mysqlType"]["c"]) == (encoded, java, mysql)
