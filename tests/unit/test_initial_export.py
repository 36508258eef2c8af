"""A Dumpling export read for a job's initial load (`backfill/initial/export.py`, `tidelake/dumpling.py`):
Dumpling's CSV options, the schema file through the DDL-text parser, the snapshot TSO, and the config."""

from __future__ import annotations

import pytest

from backfill.codec import DecodeStats
from backfill.initial.export import parse_csv, table_schema, typed_rows
from backfill.sources.registry import source_kinds
from tidelake.config import InitialLoadConfig, config_from_toml
from tidelake.dumpling import snapshot_tso
from tidelake.errors import ConfigError, InputError

pytestmark = pytest.mark.unit

SQL = "CREATE TABLE `t` (`id` int NOT NULL, `name` varchar(10), `raw` blob, PRIMARY KEY (`id`))"
SCHEMA = table_schema(SQL, "app", "t", "app.t-schema.sql")


def test_csv_options_as_dumpling_writes_them() -> None:
    default = InitialLoadConfig(dumpling="/d")
    rows = parse_csv(
        b'"id","name","raw"\r\n1,"a\\"b\\\\c\\nd",\\N\r\n2,\\N,"\\0\xff"\r\n', SCHEMA, default, "f"
    )
    assert rows.values == [["1", "2"], ['a"b\\c\nd', None], [None, "\x00\xff"]]
    table = typed_rows(rows, SCHEMA, 77, "f", DecodeStats())
    assert table.column("raw").to_pylist() == [None, b"\x00\xff"]
    assert table.column("_tidb_commit_ts").to_pylist() == [77, 77]
    other = InitialLoadConfig(
        dumpling="/d", csv_separator="|#", csv_null_value="NULL", header=False, csv_backslash_escape=False
    )
    rows = parse_csv(b'3|#"x""y|#z"|#NULL\n', SCHEMA, other, "f")
    assert rows.values == [["3"], ['x"y|#z'], [None]]


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
