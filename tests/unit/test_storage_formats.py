"""TiCDC's storage-sink formats, from TiCDC's own tests: schema-file checksums (tiflow
table_definition_test.go), CSV lines (csv_decoder_test.go, csv_message_test.go and the real outputs of
the csv_storage_update_pk integration tests) and canal-json lines (canal_json_txn_event_decoder_test.go)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from backfill.codec import TableSchema
from backfill.sources.ticdc.canal_json import parse_canal_json
from backfill.sources.ticdc.change_rows import to_arrow
from backfill.sources.ticdc.csv_format import CsvOptions, CsvTokenizer, parse_csv
from backfill.sources.ticdc.schema_file import (
    TableColumn,
    TableDefinition,
    columns_from_sql,
    definition_json,
    parse_schema_file_name,
    read_schema_file,
    schema_file_name,
)
from backfill.sources.ticdc.text_values import TextDialect
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parent.parent / "data" / "ticdc_storage"


def tiflow_table_def() -> TableDefinition:
    """`generateTableDef()` of tiflow's table_definition_test.go, as FromTableInfo writes it."""
    columns = (
        TableColumn("Id", "INT", default=10, precision="11", nullable="false", is_pk="true"),
        TableColumn("LastName", "VARCHAR", default="Default LastName", precision="128", nullable="false"),
        TableColumn("FirstName", "VARCHAR", default="Default FirstName", precision="64"),
        TableColumn("Birthday", "DATETIME", default=12345678),
    )
    return TableDefinition("table1", "schema1", 1, 100, "", 0, columns, 4)


def test_schema_file_checksums_match_tiflow_vectors() -> None:
    assert schema_file_name(tiflow_table_def()) == "schema_100_3752767265.json"
    database = TableDefinition("", "schema1", 1, 100, "", 0, (), 0)
    assert schema_file_name(database) == "schema_100_3233644819.json"
    # The checksum ignores column order (tiflow TestTableDefinitionSum32), query, type and table version.
    d = tiflow_table_def()
    shuffled = TableDefinition(d.table, d.schema, 1, 7, "ALTER TABLE x", 5, d.columns[::-1], 4)
    assert shuffled.checksum() == d.checksum()


def test_schema_file_round_trips_and_a_wrong_checksum_names_the_file() -> None:
    d = tiflow_table_def()
    text = definition_json(d)
    assert json.loads(text)["TableColumns"][0] == {
        "ColumnName": "Id", "ColumnType": "INT", "ColumnDefault": 10, "ColumnPrecision": "11",
        "ColumnNullable": "false", "ColumnIsPk": "true",
    }  # fmt: skip
    assert read_schema_file(text, "schema_100_3752767265.json", "x/meta/schema_100_3752767265.json") == d
    with pytest.raises(InputError, match=r"x/meta/schema_100_0000000001.json: checksum mismatch"):
        read_schema_file(text, "schema_100_0000000001.json", "x/meta/schema_100_0000000001.json")
    with pytest.raises(InputError, match="TableVersion 100 differs from the name's 101"):
        read_schema_file(text, "schema_101_3752767265.json", "f")
    with pytest.raises(InputError, match="f: schema file is not JSON"):
        read_schema_file("{", "schema_100_3752767265.json", "f")
    assert parse_schema_file_name("schema_100_3752767265.json") == (100, 3752767265)
    assert parse_schema_file_name("schema_100_375276726.json") is None


def test_schema_file_types_map_to_kv_scan_delta_types() -> None:
    cols = columns_from_sql([
        ("a", "INT UNSIGNED", {"precision": "10", "is_pk": "true", "nullable": "false"}),
        ("b", "BIGINT UNSIGNED", {"precision": "20"}),
        ("c", "DECIMAL", {"precision": "12", "scale": "2"}),
        ("d", "VARBINARY", {"precision": "16"}),
        ("e", "DATETIME", {"scale": "3"}),
        ("f", "TIMESTAMP", {}),
        ("g", "ENUM", {"elems": "x,y"}),
        ("h", "SET", {}),
        ("i", "BIT", {"precision": "12"}),
        ("j", "YEAR", {"precision": "4"}),
        ("k", "TIME", {}),
        ("l", "TEXT", {"precision": "65535"}),
        ("m", "BLOB", {"precision": "65535"}),
        ("n", "DECIMAL", {"precision": "65", "scale": "4"}),
        ("o", "JSON", {}),
        ("p", "TINYINT", {"precision": "4"}),
        ("q", "DOUBLE", {"precision": "22"}),
    ])  # fmt: skip
    schema = TableSchema.from_table_info(
        TableDefinition("t", "d", 1, 1, "", 0, cols, len(cols)).table_info(9)
    )
    assert [c.spark_type for c in schema.columns] == [
        "BIGINT", "DECIMAL(20,0)", "DECIMAL(12,2)", "BINARY", "TIMESTAMP_NTZ", "TIMESTAMP", "STRING", "STRING",
        "BINARY", "SMALLINT", "STRING", "STRING", "BINARY", "STRING", "STRING", "TINYINT", "DOUBLE",
    ]  # fmt: skip
    assert schema.pk_kind == "int" and schema.pk_columns == ("a",)
    assert schema.by_name["g"].elems == ("x", "y") and schema.by_name["i"].flen == 12
    keyless = TableDefinition("t", "d", 1, 1, "", 0, cols[1:3], 2).table_info(9)
    assert TableSchema.from_table_info(keyless).pk_kind == "rowid"
    two = columns_from_sql(
        [("a", "VARCHAR", {"precision": "8", "is_pk": "true"}), ("b", "INT", {"is_pk": "true"})]
    )
    assert TableSchema.from_table_info(TableDefinition("t", "d", 1, 1, "", 0, two, 2).table_info(9)).pk_columns == (
        "a", "b",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ CSV


def employee_schema(pk: bool = False) -> TableSchema:
    """`hr.employee(Id int, LastName varchar(255), FirstName varchar(255), HireDate date, OfficeLocation ...)`."""
    cols = columns_from_sql([
        ("Id", "INT", {"precision": "11", **({"is_pk": "true", "nullable": "false"} if pk else {})}),
        ("LastName", "VARCHAR", {"precision": "255"}),
        ("FirstName", "VARCHAR", {"precision": "255"}),
        ("HireDate", "DATE", {}),
        ("OfficeLocation", "VARCHAR", {"precision": "255"}),
    ])  # fmt: skip
    return TableSchema.from_table_info(
        TableDefinition("employee", "hr", 1, 1, "", 0, cols, 5).table_info(7), schema_name="hr"
    )


def decode_csv(text: str, schema: TableSchema, options: CsvOptions, where: str = "f.csv") -> list[dict]:
    rows = parse_csv(text, options, [c.name for c in schema.columns], where)
    dialect = TextDialect(options.binary_encoding, False, "UTC")
    return to_arrow(schema, rows, dialect, where=where).to_pylist()


def test_tiflow_csv_decoder_fixture() -> None:
    text = (
        '"I","employee","hr",433305438660591626,101,"Smith","Bob","2014-06-04","New York"\n'
        '"U","employee","hr",433305438660591627,101,"Smith","Bob","2015-10-08","Los Angeles"\n'
        '"D","employee","hr",433305438660591629,101,"Smith","Bob","2017-03-13","Dallas"\n'
        '"I","employee","hr",433305438660591630,102,"Alex","Alice","2017-03-14","Shanghai"\n'
        '"U","employee","hr",433305438660591630,102,"Alex","Alice","2018-06-15","Beijing"\n'
    )
    rows = decode_csv(text, employee_schema(), CsvOptions(terminator="\n"))
    assert [
        (r["_tidb_op"], r["_tidb_commit_ts"], r["_tidb_line"], r["Id"], r["OfficeLocation"]) for r in rows
    ] == [
        ("PUT", 433305438660591626, 1, 101, "New York"),
        ("PUT", 433305438660591627, 2, 101, "Los Angeles"),
        ("DELETE", 433305438660591629, 3, 101, "Dallas"),
        ("PUT", 433305438660591630, 4, 102, "Shanghai"),
        ("PUT", 433305438660591630, 5, 102, "Beijing"),
    ]
    assert rows[0]["HireDate"] == dt.date(2014, 6, 4) and rows[0]["_tidb_rowid"] is None


@pytest.mark.parametrize(
    ("options", "line", "fields"),
    [
        (CsvOptions(terminator="\n"), '"I","table1","test",435661838416609281,123,"hello,world"\n',
         ["I", "table1", "test", "435661838416609281", "123", "hello,world"]),
        (CsvOptions(delimiter="!", quote="", terminator="\n"), "U!table2!test!435661838416609281!a\\!b\\!c!def\n",
         ["U", "table2", "test", "435661838416609281", "a!b!c", "def"]),
        (CsvOptions(delimiter="!", quote="", terminator="\n", output_old_value=True, output_handle_key=True),
         "D!table2!test!435661838416609281!true!1!a\\!b\\!c!abc\nI!table2!test!435661838416609281!true!1!a\\!b\\!c!def\n",
         ["D", "table2", "test", "435661838416609281", "true", "1", "a!b!c", "abc",
          "I", "table2", "test", "435661838416609281", "true", "1", "a!b!c", "def"]),
        (CsvOptions(delimiter="[*]", quote="", terminator="\r\n"), "D[*]table4[*]test[*]1[*]a\\[\\*\\]b\\[\\*\\]c[*]def\r\n",
         ["D", "table4", "test", "1", "a[*]b[*]c", "def"]),
        (CsvOptions(delimiter="[*]", quote="'", terminator="\n"),
         "'I'[*]'table5'[*]'test'[*]1[*]'a[*]b[*]c'[*]'def'[*]\\N[*]12345.678\n",
         ["I", "table5", "test", "1", "a[*]b[*]c", "def", None, "12345.678"]),
        (CsvOptions(quote="", terminator="\n"), "U,table6,test,435661838416609281,a\\\\b\\\\c,def\\n\n",
         ["U", "table6", "test", "435661838416609281", "a\\b\\c", "def\n"]),
        (CsvOptions(quote="'", terminator="\n"), "'I','table7','test',1,'\\','\\\r','\\\\'\n",
         ["I", "table7", "test", "1", "\\", "\\\r", "\\\\"]),
        (CsvOptions(delimiter="\t", terminator="\n"),
         '"D"\t"table8"\t"test"\t435661838416609281\t"a\tb"\t123.456\t"你好，世界"\n',
         ["D", "table8", "test", "435661838416609281", "a\tb", "123.456", "你好，世界"]),
        (CsvOptions(), '"I","t","d",1,"say ""hi""","\\N",\\N\r\n', ["I", "t", "d", "1", 'say "hi"', "\\N", None]),
    ],
)  # fmt: skip
def test_tiflow_csv_message_vectors_tokenize(options: CsvOptions, line: str, fields: list) -> None:
    """csv_message_test.go TestCSVMessageEncode outputs read back; a quoted \\N is text, a bare one NULL."""
    found = [f for _, fs in CsvTokenizer(options).lines(line, "f") for f in fs]
    assert found == fields


def final_state(rows: list[dict], key: tuple[str, ...]) -> dict:
    """The shared collapse rule in plain Python: per key the last by (commit ts, PUT over DELETE, line)."""
    last: dict = {}
    for r in rows:
        k = tuple(r[c] for c in key)
        order = (r["_tidb_commit_ts"], r["_tidb_op"] == "PUT", r["_tidb_line"])
        if k not in last or order > last[k][0]:
            last[k] = (order, r)
    return {k: r for k, (_, r) in last.items() if r["_tidb_op"] == "PUT"}


@pytest.mark.parametrize("clustering", ["clustered", "nonclustered"])
@pytest.mark.parametrize("changefeed", [1, 2, 3, 4])
def test_csv_storage_update_pk_results_reach_the_upstream_state(clustering: str, changefeed: int) -> None:
    """tiflow's csv_storage_update_pk integration outputs (PK swaps in one txn, split D/D/I/I, single-row key
    moves, plain updates; changefeeds 2 and 4 with output-old-value) end in run.sql's final tables."""
    folder = DATA / f"csv_storage_update_pk_{clustering}"
    options = CsvOptions(terminator="\n", output_old_value=changefeed in (2, 4))
    pk = columns_from_sql([("id", "INT", {"precision": "11", "is_pk": "true", "nullable": "false"}),
                           ("pad", "VARCHAR", {"precision": "100", "nullable": "false"})])  # fmt: skip
    uk = columns_from_sql([("id", "INT", {"precision": "11", "is_pk": "true", "nullable": "false"}),
                           ("uk", "INT", {"precision": "11", "nullable": "false"}),
                           ("pad", "VARCHAR", {"precision": "100", "nullable": "false"})])  # fmt: skip
    for name, cols, expected in [
        ("pk", pk, {1: ("example2",), 2: ("example1",), 30: ("example10",), 40: ("example20",),
                    200: ("example100",), 1000: ("example1001",)}),
        ("uk", uk, {1: (2, "example1"), 2: (1, "example2"), 10: (30, "example10"), 20: (40, "example20"),
                    100: (200, "example100"), 1000: (1000, "example1001")}),
    ]:  # fmt: skip
        text = (folder / f"changefeed{changefeed}_{name}.res").read_text()
        text = "".join(line + "\n" for line in text.splitlines() if line.strip() and not line.startswith("#"))
        schema = TableSchema.from_table_info(
            TableDefinition(f"update_{name}", "test", 1, 1, "", 0, cols, len(cols)).table_info(5),
            schema_name="test",
        )
        rows = decode_csv(text, schema, options)
        state = final_state(rows, ("id",))
        if (clustering, changefeed, name) == ("nonclustered", 3, "pk"):
            # The test's own DIFF_RES: raw `U` rows without old values cannot delete the old keys.
            expected = {**expected, 10: ("example10",), 20: ("example20",), 100: ("example100",)}
        assert {
            k[0]: tuple(v for c, v in r.items() if c in ("uk", "pad")) for k, r in state.items()
        } == expected


def test_csv_options_values_and_header() -> None:
    cols = columns_from_sql([
        ("id", "BIGINT", {"precision": "20", "is_pk": "true", "nullable": "false"}),
        ("b", "VARBINARY", {"precision": "8"}), ("f", "DOUBLE", {"precision": "22"}),
        ("e", "ENUM", {"elems": "x,y"}), ("s", "SET", {"elems": "p,q"}), ("bit", "BIT", {"precision": "12"}),
        ("ts", "TIMESTAMP", {"scale": "6"}), ("u", "BIGINT UNSIGNED", {"precision": "20"}),
        ("d", "DECIMAL", {"precision": "6", "scale": "2"}), ("t", "TIME", {}), ("dt", "DATETIME", {}),
    ])  # fmt: skip
    schema = TableSchema.from_table_info(
        TableDefinition("t", "d", 1, 1, "", 0, cols, len(cols)).table_info(3)
    )
    options = CsvOptions(
        delimiter="|", quote="'", null="NULL", terminator="\n", binary_encoding="hex", header=True
    )
    text = (
        "ticdc-meta$operation|ticdc-meta$table|ticdc-meta$schema|ticdc-meta$commit-ts|id|b|f|e|s|bit|ts|u|d|t|dt\n"
        "'I'|'t'|'d'|5|1|'00ff'|1e+21|'y'|'p,q'|4095|'2024-01-02 03:04:05.123456'|18446744073709551615|'-1.50'|"
        "'-838:59:59'|'0000-00-00 00:00:00'\n"
        "'D'|'t'|'d'|6|1|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL\n"
    )
    rows = parse_csv(text, options, [c.name for c in schema.columns], "f.csv")
    table = to_arrow(schema, rows, TextDialect("hex", False, "+08:00"), where="f.csv")
    first = table.to_pylist()[0]
    assert first["b"] == b"\x00\xff" and first["f"] == 1e21 and (first["e"], first["s"]) == ("y", "p,q")
    assert first["bit"] == b"\x0f\xff" and first["u"] == Decimal(18446744073709551615)
    assert first["ts"] == dt.datetime(2024, 1, 1, 19, 4, 5, 123456, tzinfo=dt.UTC)
    assert first["d"] == Decimal("-1.50") and first["t"] == "-838:59:59" and first["dt"] is None
    assert [r["_tidb_line"] for r in table.to_pylist()] == [2, 3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('"I","employee","hr",1,101,"Smith","Bob","2014-06-04"\n', "f.csv:1: 8 fields, expected 9"),
        ('"I","employee","hr",1,101,"Smith","Bob","2014-06-04","NY"\n"I","e","hr",2,"x\n',
         "f.csv:2: malformed CSV"),
        ('"I","employee","hr",1,101,"Smith","Bob","2014-06-04","NY"\n"X","e","hr",2,1,"a","b","2014-06-04","c"\n',
         "f.csv:2: operation 'X' is not I, U or D"),
        ('"I","employee","hr","Smith","Bob","2014-06-04","NY","a","b"\n', "include-commit-ts = true"),
        ('"I","employee","hr",1,oops,"Smith","Bob","2014-06-04","NY"\n', "f.csv:1: column 'Id': 'oops' is not an integer"),
        ('"I","employee","hr",1,1,"Smith","Bob","2014/06/04","NY"\n', "f.csv:1: column 'HireDate': '2014/06/04' is not a date"),
        ('"I","employee","hr",1,1,"Smith","Bob","2014-06-04","NY"', "f.csv:1: the file ends inside a line"),
    ],
)  # fmt: skip
def test_bad_csv_names_file_and_line(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        decode_csv(text, employee_schema(), CsvOptions(terminator="\n"))
    assert message in str(err.value)


def test_csv_without_commit_ts_is_refused_naming_the_sink_option() -> None:
    with pytest.raises(ValueError, match="include-commit-ts = true"):
        CsvOptions(include_commit_ts=False)


# ----------------------------------------------------------------------------------------- canal-json

# tiflow canal_json_txn_event_decoder_test.go TestCanalJSONBatchDecoderWithTerminator: INSERT, UPDATE, DELETE.
TIFLOW_CANAL_LINES = (DATA / "tiflow_canal_json_txn_decoder.jsonl").read_text().splitlines()


def canal_employee_schema() -> TableSchema:
    cols = columns_from_sql([
        ("id", "INT", {"precision": "11", "is_pk": "true", "nullable": "false"}),
        ("LastName", "VARCHAR", {"precision": "255"}), ("FirstName", "VARCHAR", {"precision": "255"}),
        ("HireDate", "DATE", {}), ("OfficeLocation", "VARCHAR", {"precision": "255"}),
    ])  # fmt: skip
    return TableSchema.from_table_info(
        TableDefinition("employee", "test", 1, 1, "", 0, cols, 5).table_info(7)
    )


def decode_canal(lines: list[str], schema: TableSchema, terminator: str = "\n") -> list[dict]:
    names = [c.name for c in schema.columns]
    rows = parse_canal_json(
        terminator.join(lines) + terminator, terminator, names, schema.pk_columns, "f.json"
    )
    return to_arrow(schema, rows, TextDialect("latin1", True, "UTC"), where="f.json").to_pylist()


def with_commit_ts(line: str, ts: int) -> str:
    doc = json.loads(line)
    doc["_tidb"] = {"commitTs": ts}
    return json.dumps(doc, ensure_ascii=False)


def test_tiflow_canal_json_lines_need_the_tidb_extension() -> None:
    with pytest.raises(InputError, match=r"f.json:1: no _tidb.commitTs; .*enable-tidb-extension=true"):
        decode_canal(TIFLOW_CANAL_LINES, canal_employee_schema())
    lines = [with_commit_ts(line, ts) for line, ts in zip(TIFLOW_CANAL_LINES, (10, 20, 30), strict=True)]
    rows = decode_canal(lines, canal_employee_schema(), "\r\n")
    assert [
        (r["_tidb_op"], r["_tidb_commit_ts"], r["id"], r["HireDate"], r["OfficeLocation"]) for r in rows
    ] == [
        ("PUT", 10, 101, dt.date(2014, 6, 4), "New York"),
        ("PUT", 20, 101, dt.date(2015, 10, 8), "Los Angeles"),
        ("DELETE", 30, 101, dt.date(2015, 10, 8), "Los Angeles"),
    ]


def test_canal_json_values_as_ticdc_writes_them() -> None:
    cols = columns_from_sql([
        ("id", "INT", {"precision": "11", "is_pk": "true", "nullable": "false"}),
        ("b", "BLOB", {"precision": "65535"}), ("e", "ENUM", {"elems": "x,y,z"}), ("s", "SET", {"elems": "p,q,r"}),
        ("e2", "ENUM", {}), ("bit", "BIT", {"precision": "3"}), ("f", "FLOAT", {"precision": "12"}),
    ])  # fmt: skip
    schema = TableSchema.from_table_info(
        TableDefinition("t", "d", 1, 1, "", 0, cols, len(cols)).table_info(3)
    )
    data = {"id": "1", "b": "\u0000\u00ff\u0080a", "e": "2", "s": "5", "e2": "3", "bit": "5", "f": "0.000001"}
    moved = {"id": "2", "b": None, "e": "1", "s": "0", "e2": "1", "bit": "0", "f": "1"}
    line = {"type": "INSERT", "isDdl": False, "data": [data], "old": None, "_tidb": {"commitTs": 7}}
    update = {
        "type": "UPDATE",
        "isDdl": False,
        "data": [moved],
        "old": [{"id": "1"}],
        "_tidb": {"commitTs": 8},
    }
    ddl = {"type": "ALTER", "isDdl": True, "sql": "ALTER TABLE t ADD COLUMN x INT", "_tidb": {"commitTs": 9}}
    rows = decode_canal([json.dumps(line), json.dumps(update), json.dumps(ddl)], schema)
    assert rows[0]["b"] == b"\x00\xff\x80a" and (rows[0]["e"], rows[0]["s"], rows[0]["e2"]) == (
        "y",
        "p,r",
        "3",
    )
    assert rows[0]["bit"] == b"\x05" and rows[0]["f"] == pytest.approx(1e-6)
    # An update that moves the key: the old key's DELETE, then the new row's PUT (same ts and line).
    assert [(r["_tidb_op"], r["id"], r["_tidb_commit_ts"], r["_tidb_line"]) for r in rows[1:]] == [
        ("DELETE", 1, 8, 2), ("PUT", 2, 8, 2),
    ]  # fmt: skip
    assert rows[2]["s"] == "" and rows[2]["e"] == "x"


def test_bad_canal_json_names_file_and_line() -> None:
    good = with_commit_ts(TIFLOW_CANAL_LINES[0], 5)
    with pytest.raises(InputError, match=r"f.json:2: not JSON"):
        decode_canal([good, '{"type": "INSERT", "data": [{'], canal_employee_schema())
    bad_column = with_commit_ts(
        TIFLOW_CANAL_LINES[0].replace('"OfficeLocation":"New York"', '"Office":"New York"'), 5
    )
    with pytest.raises(InputError, match=r"f.json:1: column 'Office' is not in the table's schema file"):
        decode_canal([bad_column], canal_employee_schema())
    with pytest.raises(InputError, match=r"f.json:1: column 'id': 'x' is not an integer"):
        decode_canal(
            [with_commit_ts(TIFLOW_CANAL_LINES[0].replace('"id":"101"', '"id":"x"'), 5)],
            canal_employee_schema(),
        )


def test_updates_of_a_table_without_a_key() -> None:
    """A multiset needs the old row of an update: canal-json's `old` gives it (DELETE old, PUT new); a CSV
    `U` row does not, so it is refused naming output-old-value."""
    cols = columns_from_sql([("k", "INT", {"precision": "11"}), ("v", "VARCHAR", {"precision": "8"})])
    schema = TableSchema.from_table_info(TableDefinition("t", "d", 1, 1, "", 0, cols, 2).table_info(3))
    update = {"type": "UPDATE", "isDdl": False, "data": [{"k": "1", "v": "new"}], "old": [{"v": "old"}],
              "_tidb": {"commitTs": 8}}  # fmt: skip
    names = [c.name for c in schema.columns]
    rows = parse_canal_json(json.dumps(update) + "\n", "\n", names, [], "f.json")
    typed = to_arrow(schema, rows, TextDialect("latin1", True), where="f.json").to_pylist()
    assert [(r["_tidb_op"], r["k"], r["v"]) for r in typed] == [("DELETE", 1, "old"), ("PUT", 1, "new")]
    with pytest.raises(InputError, match=r"f.csv:2: an update \(U\) .* output-old-value = true"):
        parse_csv('"I","t","d",1,1,"a"\n"U","t","d",2,1,"b"\n', CsvOptions(terminator="\n"), names, "f.csv",
                  keyless=True)  # fmt: skip


def test_canal_json_enum_set_names_from_content_compatible_mysql_types() -> None:
    """tiflow's schema files carry no ENUM/SET elements; with content-compatible=true canal-json's
    mysqlType does (`enum('a','b')`), so the numbers still become names."""
    from backfill.sources.storage.decode import FileFormat, decode_file

    cols = columns_from_sql(
        [("id", "INT", {"precision": "11", "is_pk": "true"}), ("e", "ENUM", {}), ("s", "SET", {})]
    )
    schema = TableSchema.from_table_info(TableDefinition("t", "d", 1, 1, "", 0, cols, 3).table_info(3))
    line = {"type": "INSERT", "isDdl": False, "data": [{"id": "1", "e": "2", "s": "3"}], "old": None,
            "mysqlType": {"id": "int", "e": "enum('x','it''s')", "s": "set('p','q')"}, "_tidb": {"commitTs": 5}}  # fmt: skip
    fmt = FileFormat("canal-json", "\n")
    table = decode_file((json.dumps(line) + "\n").encode(), "f.json", fmt, schema, ordinal=1, newest=False,
                        window=(0, 10))  # fmt: skip
    assert table.to_pylist()[0]["e"] == "it's" and table.to_pylist()[0]["s"] == "p,q"
    line["mysqlType"] = {"id": "int", "e": "enum", "s": "set"}  # without content-compatible: numbers kept
    table = decode_file((json.dumps(line) + "\n").encode(), "f.json", fmt, schema, ordinal=1, newest=False,
                        window=(0, 10))  # fmt: skip
    assert (table.to_pylist()[0]["e"], table.to_pylist()[0]["s"]) == ("2", "3")


def test_canal_json_whole_file_and_line_by_line_agree() -> None:
    """A regular file is parsed in one go, one with a blank line line by line: the same changes either way,
    including a moved key, a watermark and a row that leaves a column out (filled like TiCDC)."""
    lines = [with_commit_ts(line, ts) for line, ts in zip(TIFLOW_CANAL_LINES, (10, 20, 30), strict=True)]
    moved = json.loads(lines[1])
    moved["old"] = [{"id": "100"}]
    partial = json.loads(lines[0])
    del partial["data"][0]["OfficeLocation"]
    partial["_tidb"] = {"commitTs": 40}
    watermark = {"type": "TIDB_WATERMARK", "isDdl": False, "data": None, "_tidb": {"watermarkTs": 41}}
    body = [lines[0], json.dumps(moved), json.dumps(watermark), lines[2], json.dumps(partial)]
    whole = decode_canal(body, canal_employee_schema())
    by_line = decode_canal([*body[:2], "", *body[2:]], canal_employee_schema())
    assert [(r["_tidb_op"], r["id"], r["_tidb_line"]) for r in whole] == [
        ("PUT", 101, 1), ("DELETE", 100, 2), ("PUT", 101, 2), ("DELETE", 101, 4), ("PUT", 101, 5),
    ]  # fmt: skip
    assert [{**r, "_tidb_line": 0} for r in whole] == [{**r, "_tidb_line": 0} for r in by_line]
    assert whole[-1]["OfficeLocation"] is None and whole[1]["LastName"] is None


def canal_row(kind: str, ts: int, data: dict, old: dict | None = None) -> str:
    """One canal-json row line with its commit ts; ``old`` the old values of an UPDATE."""
    return json.dumps({"type": kind, "isDdl": False, "data": [data], "old": None if old is None else [old],
                       "_tidb": {"commitTs": ts}})  # fmt: skip


def _columnar_file(body: list[str], names: tuple[str, ...], keys: list[str]):
    """The columnar path's rows of a file of `body` lines (None: it leaves them to the exact path)."""
    from backfill.sources.ticdc.canal_json import _RAW_MESSAGES, _columnar, _whole_file

    messages = _whole_file(("\n".join(body) + "\n").encode(), "\n", _RAW_MESSAGES)
    assert messages is not None, "the file's lines do not parse"
    return _columnar(messages, names, keys)


def test_canal_json_columnar_and_exact_paths_agree() -> None:
    """A plain file is typed column by column by Arrow's JSON reader, where an absent column reads as NULL;
    the exact path (one struct a row, taken for a file with a blank line) tells absent from NULL. Both give
    the same changes: an absent column of a PUT filled like TiCDC, a NULL kept, a DELETE with only its key,
    an update whose old values leave the key out (not a moved key), DDL and watermark lines skipped."""

    full = {"id": "1", "LastName": "A", "FirstName": "B", "HireDate": "2020-01-02", "OfficeLocation": "X"}
    body = [
        canal_row("INSERT", 10, full),
        canal_row("INSERT", 11, {**full, "id": "2", "OfficeLocation": None}),  # a NULL, not absent
        canal_row("INSERT", 12, {k: v for k, v in {**full, "id": "3"}.items() if k != "OfficeLocation"}),
        json.dumps({"type": "TIDB_WATERMARK", "isDdl": False, "data": None, "_tidb": {"watermarkTs": 12}}),
        canal_row("UPDATE", 13, {**full, "LastName": "C"}, {"LastName": "A"}),  # only the changed column
        json.dumps(
            {"type": "ALTER", "isDdl": True, "sql": "ALTER TABLE t ADD x INT", "_tidb": {"commitTs": 14}}
        ),
        canal_row("DELETE", 15, {"id": "2"}),  # delete-only-output-handle-key-columns
    ]
    schema = canal_employee_schema()
    names = tuple(c.name for c in schema.columns)
    parsed = _columnar_file(body, names, ["id"])
    assert parsed is not None, "the plain file left the columnar path"
    assert (_values(parsed.ops), _values(parsed.lines)) == (["PUT"] * 4 + ["DELETE"], [1, 2, 3, 5, 7])
    columnar = decode_canal(body, schema)
    exact = decode_canal([body[0], "", *body[1:]], schema)
    assert [{**r, "_tidb_line": 0} for r in columnar] == [{**r, "_tidb_line": 0} for r in exact]
    assert [(r["_tidb_op"], r["id"], r["_tidb_line"]) for r in columnar] == [
        ("PUT", 1, 1), ("PUT", 2, 2), ("PUT", 3, 3), ("PUT", 1, 5), ("DELETE", 2, 7),
    ]  # fmt: skip
    assert columnar[1]["OfficeLocation"] is None and columnar[2]["OfficeLocation"] is None
    assert columnar[3]["LastName"] == "C"


def test_canal_json_updates_of_a_table_without_a_key_columnar_and_exact_agree() -> None:
    """A table without a key is a multiset: an UPDATE deletes its old row (the old values over the new ones)
    and puts the new one. The columnar path does it with Arrow, the exact path row by row: the same changes,
    whether ``old`` holds only the changed columns, a NULL (kept, not taken from the new row), nothing, or
    is missing (a plain PUT); an absent value of the PUT is still filled like TiCDC."""

    cols = (
        TableColumn("k", "INT", precision="11", nullable="false"),
        TableColumn("v", "VARCHAR", default="dflt", precision="8"),
        TableColumn("w", "VARCHAR", precision="8"),
    )
    schema = TableSchema.from_table_info(TableDefinition("t", "d", 1, 1, "", 0, cols, 3).table_info(3))
    body = [
        canal_row("INSERT", 10, {"k": "1", "v": "a", "w": "x"}),
        canal_row("UPDATE", 11, {"k": "1", "v": "b", "w": "x"}, {"v": "a"}),  # only the changed column
        json.dumps({"type": "TIDB_WATERMARK", "isDdl": False, "data": None, "_tidb": {"watermarkTs": 11}}),
        canal_row("UPDATE", 12, {"k": "1", "v": "b", "w": "y"}, {"k": "1", "v": "b", "w": None}),
        canal_row("UPDATE", 13, {"k": "2", "w": None}, {"k": "1"}),  # v absent from both: the PUT's filled
        canal_row("UPDATE", 14, {"k": "2", "v": "c", "w": "z"}),  # no old values: a PUT only
        json.dumps(
            {"type": "ALTER", "isDdl": True, "sql": "ALTER TABLE t ADD x INT", "_tidb": {"commitTs": 15}}
        ),
        canal_row("UPDATE", 16, {"k": "3", "v": "c", "w": "z"}, {}),  # old values without a column
        canal_row("DELETE", 17, {"k": "3", "v": "c", "w": "z"}),
    ]
    names = tuple(c.name for c in schema.columns)
    assert _columnar_file(body, names, []) is not None, "left the columnar path"
    columnar = decode_canal(body, schema)
    exact = decode_canal([body[0], "", *body[1:]], schema)
    assert [{**r, "_tidb_line": 0} for r in columnar] == [{**r, "_tidb_line": 0} for r in exact]
    assert [(r["_tidb_op"], r["k"], r["v"], r["w"], r["_tidb_commit_ts"], r["_tidb_line"]) for r in columnar] == [
        ("PUT", 1, "a", "x", 10, 1),
        ("DELETE", 1, "a", "x", 11, 2), ("PUT", 1, "b", "x", 11, 2),
        ("DELETE", 1, "b", None, 12, 4), ("PUT", 1, "b", "y", 12, 4),
        ("DELETE", 1, None, None, 13, 5), ("PUT", 2, "dflt", None, 13, 5),
        ("PUT", 2, "c", "z", 14, 6),
        ("DELETE", 3, "c", "z", 16, 8), ("PUT", 3, "c", "z", 16, 8),
        ("DELETE", 3, "c", "z", 17, 9),
    ]  # fmt: skip


def test_canal_json_null_written_or_left_out_columnar_and_exact_agree() -> None:
    """The columnar path takes a NULL its row writes as `"name":null` (TiCDC's compact JSON) as present and
    decodes the other rows with a NULL exactly: the same changes as the exact path, whether the text is
    another column's (`"OfficeLocation":null` is not `"Location":null`), inside a string, or spaced."""
    from backfill.sources.ticdc.canal_json import _null_text

    cols = (
        TableColumn("id", "INT", precision="11", is_pk="true", nullable="false"),
        TableColumn("Location", "VARCHAR", default="dflt", precision="32"),
        TableColumn("OfficeLocation", "VARCHAR", precision="32"),
        TableColumn("Note", "VARCHAR", precision="32"),
    )
    schema = TableSchema.from_table_info(TableDefinition("t", "d", 1, 1, "", 0, cols, 4).table_info(3))

    def compact(ts: int, data: dict) -> str:
        return json.dumps(
            {"type": "INSERT", "data": [data], "_tidb": {"commitTs": ts}}, separators=(",", ":")
        )

    body = [
        compact(10, {"id": "1", "OfficeLocation": None, "Note": "x"}),  # Location left out
        compact(11, {"id": "2", "Location": None, "OfficeLocation": "y", "Note": '"Location":null'}),
        compact(
            12, {"id": "3", "OfficeLocation": "z", "Note": '"Location":null'}
        ),  # left out, text in a string
        canal_row(
            "INSERT", 13, {"id": "4", "Location": None, "OfficeLocation": None, "Note": None}
        ),  # spaced
        canal_row("INSERT", 14, {"id": "5"}),
    ]
    names = tuple(c.name for c in schema.columns)
    assert _columnar_file(body, names, ["id"]) is not None
    columnar = decode_canal(body, schema)
    exact = decode_canal([body[0], "", *body[1:]], schema)
    assert [{**r, "_tidb_line": 0} for r in columnar] == [{**r, "_tidb_line": 0} for r in exact]
    assert [(r["id"], r["Location"], r["OfficeLocation"], r["Note"]) for r in columnar] == [
        (1, "dflt", None, "x"), (2, None, "y", '"Location":null'), (3, "dflt", "z", '"Location":null'),
        (4, None, None, None), (5, "dflt", None, None),
    ]  # fmt: skip
    assert _null_text("Location", names) == '"Location":null'
    assert _null_text("a b", ["a b"]) is None and _null_text("a", ["a", 'b"a']) is None


def _values(column: object) -> list[object]:
    """A ParsedRows field as a list: whole-file parsers give Arrow arrays, line parsers lists."""
    return column.to_pylist() if hasattr(column, "to_pylist") else list(column)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[null]", r"f.json:2: not a canal-json message"),  # a bare null row would crash Arrow's reader
        ('[{"id": 7}]', r"f.json:2: not a canal-json message"),  # a number where canal-json writes text
        ('[{"LastName": "Z"}]', r"f.json:2: a row change without the key column 'id'"),
        ('[{"id": "7", "Office": "Q"}]', r"f.json:2: column 'Office' is not in the table's schema file"),
        ('[{"id": "7", "id": "8"}]', None),  # a repeated name: the exact path's reading (the last one)
    ],
)
def test_canal_json_rows_the_columnar_path_leaves_to_the_exact_one(data: str, message: str | None) -> None:
    good = with_commit_ts(TIFLOW_CANAL_LINES[0], 5)
    line = '{"type": "INSERT", "isDdl": false, "data": ' + data + ', "_tidb": {"commitTs": 6}}'
    if message is None:
        assert decode_canal([good, line], canal_employee_schema())[1]["id"] == 8
        return
    with pytest.raises(InputError, match=message):
        decode_canal([good, line], canal_employee_schema())


def test_canal_json_text_that_is_not_utf8_is_named() -> None:
    """msgspec does not check UTF-8 inside a raw row, nor does Arrow's JSON reader: the columnar path checks
    it and leaves the file to the exact path, which names the line."""
    good = with_commit_ts(TIFLOW_CANAL_LINES[0], 5).encode()
    bad = with_commit_ts(TIFLOW_CANAL_LINES[0], 6).encode().replace(b"New York", b"New \xff")
    names = [c.name for c in canal_employee_schema().columns]
    with pytest.raises(InputError, match=r"f.json:2: not UTF-8"):
        parse_canal_json(good + b"\n" + bad + b"\n", "\n", names, ["id"], "f.json")


def test_an_empty_time_column_converts_and_a_bad_one_is_named() -> None:
    """A file whose rows all fall outside the window leaves TIME columns empty: Arrow's `all` of nothing
    is null, which once sent the check down the error path (a StopIteration traceback; issue 17's drill)."""
    import pyarrow as pa

    from backfill.codec import DecodeStats
    from backfill.sources.ticdc.text_values import BadValue, text_column

    cols = columns_from_sql([("a", "INT", {"is_pk": "true", "nullable": "false"}), ("t", "TIME", {})])
    schema = TableSchema.from_table_info(TableDefinition("t", "d", 1, 1, "", 0, cols, 2).table_info(9))
    time_col = schema.by_name["t"]
    empty = text_column(schema, time_col, pa.array([], pa.string()), TextDialect(), DecodeStats())
    assert len(empty) == 0
    assert text_column(schema, time_col, pa.array(["-01:02:03.5", None], pa.string()), TextDialect(),
                       DecodeStats()).to_pylist() == ["-01:02:03.5", None]  # fmt: skip
    with pytest.raises(BadValue, match="'25:61' is not a TIME value"):
        text_column(
            schema, time_col, pa.array(["10:00:00", "25:61"], pa.string()), TextDialect(), DecodeStats()
        )


@pytest.mark.parametrize(
    ("kind", "old", "refused"),
    [
        ("UPDATE", [{"v": "a"}, 5], r"\$\.old\[1\]"),  # a second old row that is no row
        ("INSERT", [7], r"\$\.old\[0\]"),  # an old row on an INSERT that is no row
        ("UPDATE", [{"v": "a"}, {"v": "z"}], None),
        ("INSERT", [{"id": "9"}], None),
    ],
)
def test_canal_json_old_rows_beyond_an_updates_first_agree_on_both_paths(kind, old, refused) -> None:
    """The columnar path reads an UPDATE's first old row only; a message with any other old row goes the
    exact way, so a file is refused (naming its line) or read alike whichever path its other lines take."""
    names = ["id", "v"]
    good = canal_row("INSERT", 10, {"id": "2", "v": "x"})
    line = json.dumps({"type": kind, "isDdl": False, "data": [{"id": "1", "v": "b"}], "old": old,
                       "_tidb": {"commitTs": 11}})  # fmt: skip
    plain, blank = f"{good}\n{line}\n", f"{good}\n\n{line}\n"  # a blank line: the exact path
    if refused:
        for text, number in ((plain, 2), (blank, 3)):
            with pytest.raises(InputError, match=rf"f.json:{number}: .*{refused}"):
                parse_canal_json(text, "\n", names, ["id"], "f.json")
    else:
        columnar = parse_canal_json(plain, "\n", names, ["id"], "f.json")
        exact = parse_canal_json(blank, "\n", names, ["id"], "f.json")

        def listed(v):
            return v.to_pylist() if hasattr(v, "to_pylist") else list(v)

        assert listed(columnar.ops) == listed(exact.ops) == ["PUT", "PUT"]
        assert (
            [listed(c) for c in columnar.values]
            == [listed(c) for c in exact.values]
            == [["2", "1"], ["x", "b"]]
        )


def test_canal_json_binary_text_is_each_characters_byte_on_arrays_and_slices() -> None:
    """canal-json writes a binary value one ISO-8859-1 character per byte; the numpy path gives what
    ``str.encode("latin-1")`` gives for every byte value, nulls, empty values and slices, and leaves a
    character above U+00FF to the per-value path, which names the value."""
    import random

    import pyarrow as pa

    from backfill.sources.ticdc.open_rows import _Bad
    from backfill.sources.ticdc.text_values import _binary, latin1_bytes

    rng = random.Random(5)
    values = [chr(b) for b in range(256)] + ["", None, "plain", "\xff\xc3\xc2\x80"]
    values += [
        None if rng.random() < 0.2 else "".join(chr(rng.randrange(256)) for _ in range(rng.randrange(30)))
        for _ in range(300)
    ]
    array = pa.array(values, pa.string())
    for part in (array, array.slice(7, 200), array.slice(250, 20), array.slice(0, 0)):
        expected = pa.array(
            [None if v is None else v.encode("latin-1") for v in part.to_pylist()], pa.binary()
        )
        fast = latin1_bytes(part)
        # _binary falls back to the per-value path on None, so a numpy path that declines text it can take
        # would pass unseen through _binary: it must take all of U+0000..U+00FF itself
        assert fast is not None, "the numpy path declined characters up to U+00FF"
        fast.validate(full=True)
        assert fast.equals(expected)
        assert _binary(part, "latin1").equals(expected)
    assert latin1_bytes(pa.array(["ok", "\u0100"], pa.string())) is None
    with pytest.raises(_Bad, match="'x\u4e2d' is not latin1-encoded binary") as bad:
        _binary(pa.array(["ok", None, "x\u4e2d"], pa.string()), "latin1")
    assert bad.value.row == 2
