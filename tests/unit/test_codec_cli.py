"""``backfill decode`` support: decode_command prints a row (rich table or JSON) or the reason (exit 2)."""

from __future__ import annotations

import json

import pytest

from backfill.codec.cli import decode_command
from backfill.codec.tableinfo import column_info, table_info

pytestmark = pytest.mark.unit

INFO = table_info(
    45,
    "t",
    [
        column_info(1, "id", "bigint", primary_key=True),
        column_info(2, "name", "varchar(20)"),
        column_info(3, "age", "int"),
        column_info(4, "score", "decimal(5,2)"),
        column_info(5, "created", "datetime"),
        column_info(6, "note", "varchar(10)", default="x", origin_default="x"),
    ],
    pk="int",
)
KEY = "74800000000000002d5f728000000000000001"
VALUE = "8000040001000203040506050006000b001300416c6963651e0502800c22000000053144b219"  # reference §3.7


@pytest.fixture
def info_file(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(INFO))
    return str(path)


def test_decode_json(info_file, capsys):
    assert decode_command(info_file, KEY, VALUE, as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["table_id"] == 45 and doc["handle"] == 1 and doc["row_format"] == 2
    assert doc["row"] == {
        "id": 1,
        "name": "Alice",
        "age": 30,
        "score": "12.34",
        "created": "2024-01-02T03:04:05",
        "note": None,
    }


def test_decode_table(info_file, capsys):
    assert decode_command(info_file, KEY, VALUE, as_json=False) == 0
    out = capsys.readouterr().out
    assert "Alice" in out and "12.34" in out and "NULL" in out and "DECIMAL(5,2)" in out


def test_decode_from_tables_jsonl(tmp_path, capsys):
    path = tmp_path / "tables.jsonl"
    other = table_info(46, "u", [column_info(1, "x", "int")])
    path.write_text("\n".join(json.dumps({"schema_name": "db", "table_info": i}) for i in (other, INFO)))
    assert decode_command(str(path), KEY, VALUE, as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "db"


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        (KEY, VALUE[:-4], "past the end"),
        (KEY, "zz", "hex"),
        ("74800000000000002d5f69800000000000000103800000000000000a", VALUE, "index key"),
        ("7480000000000000635f728000000000000001", VALUE, "table 99"),
    ],
)
def test_decode_bad_input(info_file, capsys, key, value, needle):
    assert decode_command(info_file, key, value, as_json=True) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and needle in captured.err


def test_decode_bad_file(tmp_path, capsys):
    assert decode_command(str(tmp_path / "missing.json"), KEY, VALUE, as_json=False) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert decode_command(str(bad), KEY, VALUE, as_json=False) == 2
    bad.write_text(json.dumps({"id": 45}))  # not a TableInfo: no cols
    assert decode_command(str(bad), KEY, VALUE, as_json=True) == 2
    bad.write_text("[1, 2]")
    assert decode_command(str(bad), KEY, VALUE, as_json=True) == 2
    err = capsys.readouterr().err
    assert err.count("decode:") == 4 and "cols" in err
