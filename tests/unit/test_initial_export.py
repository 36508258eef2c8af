"""A Dumpling export read for a job's initial load (`backfill/initial/export.py`, `tidelake/dumpling.py`):
Dumpling's CSV options, the schema file through the DDL-text parser, the snapshot TSO, and the config."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill.codec import DecodeStats
from backfill.initial import export
from backfill.initial.export import parse_csv, parse_sql, table_schema, typed_rows
from backfill.sources.registry import source_kinds
from backfill.sources.ticdc.change_rows import ParsedRows
from tidelake.config import InitialLoadConfig, config_from_toml
from tidelake.dumpling import snapshot_tso
from tidelake.errors import ConfigError, InputError

pytestmark = pytest.mark.unit

SQL = "CREATE TABLE `t` (`id` int NOT NULL, `name` varchar(10), `raw` blob, PRIMARY KEY (`id`))"
SCHEMA = table_schema(SQL, "app", "t", "app.t-schema.sql")


def values(rows: ParsedRows) -> list[list[str | None]]:
    return [v if isinstance(v, list) else v.to_pylist() for v in rows.values]


@pytest.mark.parametrize("arrow", [True, False])
def test_csv_options_as_dumpling_writes_them(arrow: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow's reader (Dumpling's default options) and the line-by-line one read the same."""
    if not arrow:
        monkeypatch.setattr(export, "_arrow_csv", lambda *_: None)
    default = InitialLoadConfig(dumpling="/d")
    rows = parse_csv(
        b'"id","name","raw"\r\n1,"a\\"b\\\\c\\nd\\Z\\0",\\N\r\n2,\\N,"\\0\xff"\r\n3,"\\\\N\\r",""\r\n',
        SCHEMA, default, "f",
    )  # fmt: skip
    assert values(rows) == [["1", "2", "3"], ['a"b\\c\nd\x1a\x00', None, "\\N\r"], [None, "\x00\xff", ""]]
    assert pa.array(rows.lines).to_pylist() == [2, 3, 4]
    table = typed_rows(rows, SCHEMA, 77, "f", DecodeStats())
    assert table.column("raw").to_pylist() == [None, b"\x00\xff", b""]
    assert table.column("_tidb_commit_ts").to_pylist() == [77, 77, 77]
    other = InitialLoadConfig(
        dumpling="/d", csv_separator="|#", csv_null_value="NULL", header=False, csv_backslash_escape=False
    )
    rows = parse_csv(b'3|#"x""y|#z"|#NULL\n', SCHEMA, other, "f")
    assert values(rows) == [["3"], ['x"y|#z'], [None]]


def test_sql_values_as_dumpling_writes_them_give_the_csv_files_bytes() -> None:
    """Dumpling's `--filetype sql` (pkg/dumpformat/sqlfile): backslash escapes in strings, binary as
    x'hex', NULL, numbers bare; other tools' literals (_binary, X'', 0x, b'') and `''` too."""
    default = InitialLoadConfig(dumpling="/d")
    content = (
        b"/*!40101 SET NAMES binary*/;\n"
        b"INSERT INTO `t` VALUES\n"
        b"(1,'a\\\"b\\\\c\\nd\\'e\\Z',NULL),\n"
        b"(-2,NULL,x'00ff27'),\n"
        b"(3,'it''s',x'');\n"
        b"INSERT INTO `t` (`id`,`name`,`raw`) VALUES\n"
        b"(4e0, _utf8mb4'\xc3\xa9', _binary '\\0\xff'),(5,'',0x0A),(6,'x',b'100000001');\n"
    )
    rows = parse_sql(content, SCHEMA, default, "f")
    assert rows.values == [
        ["1", "-2", "3", "4e0", "5", "6"],
        ["a\"b\\c\nd'e\x1a", None, "it's", "\u00e9", "", "x"],
        [None, "\x00\xff'", "", "\x00\xff", "\n", "\x01\x01"],
    ]
    assert rows.lines == [3, 4, 5, 7, 7, 7]
    plain_csv = InitialLoadConfig(dumpling="/d", header=False)
    csv = parse_csv(b'1,"a\\"b\\\\c\\nd\'e\\Z",\\N\r\n-2,\\N,"\\0\xff\'"\r\n', SCHEMA, plain_csv, "f")
    assert [v[:2] for v in rows.values] == values(csv)
    plain = InitialLoadConfig(dumpling="/d", csv_backslash_escape=False)
    assert parse_sql(b"INSERT INTO `t` VALUES (1,'a\\b''c',NULL);", SCHEMA, plain, "f").values == [
        ["1"],
        ["a\\b'c"],
        [None],
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"INSERT INTO `t` VALUES\n(1,'a',NULL),\n(2,'b", "f:3: the statement is not finished"),
        (b"INSERT INTO `t` VALUES\n(1,'a',NULL),\n(2,'b',NULL)", "f:3: the statement is not finished"),
        (b"INSERT INTO `t` VALUES\n(1,'a',NULL),\n", "f:2: the statement is not finished"),
        (b"INSERT INTO `t` VALUES\n(1,'a');\n", "f:2: 2 fields, the table has 3 columns"),
        (b"INSERT INTO `t` VALUES\n(1,'a',NULL);\nDROP TABLE `t`;\n", "f:3: not an INSERT statement"),
        (b"INSERT INTO `t` VALUES\n(1,a,NULL);\n", "f:2: unexpected text in a VALUES tuple"),
        (b"INSERT INTO `t` (`id`) VALUES\n(1);\n", "f:1: the statement's columns"),
    ],
)
def test_a_cut_or_malformed_sql_file_names_file_and_line(content: bytes, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_sql(content, SCHEMA, InitialLoadConfig(dumpling="/d"), "f")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'1,"a",\\N\r\n2,"b', "f:2: a quoted field is not closed"),
        (b'1,"a",\\N\r\n2,"b",\\N', "f:2: the last line has no line end"),
        (b"1,\\N\r\n", "f:1: 2 fields, the table has 3 columns"),
    ],
)
def test_a_cut_or_malformed_file_names_file_and_line(content: bytes, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_csv(content, SCHEMA, InitialLoadConfig(dumpling="/d", header=False), "f")


def test_schema_file_and_metadata_errors_name_the_file() -> None:
    with pytest.raises(InputError, match="s.sql: the CREATE TABLE cannot be read"):
        table_schema("CREATE TABLE `t` (", "app", "t", "s.sql")
    with pytest.raises(InputError, match="creates app.u, its name says app.t"):
        table_schema(SQL.replace("`t`", "`u`"), "app", "t", "s.sql")
    metadata = (
        "Started dump at: x\nSHOW MASTER STATUS:\n\tLog: tidb-binlog\n\tPos: 451234567890123456\n\tGTID:\n"
    )
    assert snapshot_tso(metadata, "m") == 451234567890123456
    with pytest.raises(InputError, match="m: no snapshot TSO"):
        snapshot_tso(metadata.replace("tidb-binlog", "mysql-bin.000003"), "m")


def test_source_initial_is_for_the_ticdc_sources_only() -> None:
    base = {
        "source": {"kind": "ticdc-storage", "path": "/s", "initial": {"dumpling": "/d"}},
        "target": {"warehouse": "/w"},
    }
    config = config_from_toml(base, source_kinds=source_kinds())
    assert config.source.initial == InitialLoadConfig(dumpling="/d")
    with pytest.raises(ConfigError, match="does not start from a snapshot; the kinds that do: ticdc-kafka"):
        config_from_toml(
            {**base, "source": {**base["source"], "kind": "kv-scan"}}, source_kinds=source_kinds()
        )
    with pytest.raises(ConfigError, match="csv_separator"):
        config_from_toml(
            {**base, "source": {**base["source"], "initial": {"dumpling": "/d", "csv_separator": ""}}}
        )
