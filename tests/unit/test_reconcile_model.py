"""Pure parts of reconcile: type mapping, schema checks, results and exit codes, options, Dumpling files."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from reconcile.downstream import VersionTs, choose_version, resolved_history
from reconcile.errors import SchemaMismatch, TableNotFound
from reconcile.options import RunOptions, ignored_columns
from reconcile.result import DiffCounts, ReconcileResult, RepairOutcome, RowSample, TableResult, exit_code
from reconcile.schema import Kind, TableSchema, column_from_type, compare_schemas
from reconcile.upstream.dumpling import header_line, parse_create_table
from reconcile.upstream.sql import match_tables
from tidelake.config import ReconcileConfig
from tidelake.dumpling import data_files, parse_metadata
from tidelake.errors import InputError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("sql_type", "kind", "delta"),
    [
        ("tinyint(4)", Kind.INT, "tinyint"),
        ("tinyint unsigned", Kind.INT, "smallint"),
        ("smallint(6)", Kind.INT, "smallint"),
        ("smallint unsigned", Kind.INT, "int"),
        ("mediumint(9)", Kind.INT, "int"),
        ("mediumint unsigned", Kind.INT, "bigint"),
        ("int(11)", Kind.INT, "int"),
        ("int(10) unsigned", Kind.INT, "bigint"),
        ("bigint(20)", Kind.INT, "bigint"),
        ("bigint(20) unsigned", Kind.INT, "decimal(20,0)"),
        ("float", Kind.FLOAT, "float"),
        ("float(30)", Kind.DOUBLE, "double"),
        ("double", Kind.DOUBLE, "double"),
        ("decimal(12,4)", Kind.DECIMAL, "decimal(12,4)"),
        ("decimal(65,30)", Kind.DECIMAL, "string"),
        ("varchar(20)", Kind.TEXT, "string"),
        ("char(3)", Kind.TEXT, "string"),
        ("longtext", Kind.TEXT, "string"),
        ("enum('a','b,c')", Kind.TEXT, "string"),
        ("set('x','y')", Kind.TEXT, "string"),
        ("json", Kind.JSON, "string"),
        ("binary(4)", Kind.BINARY, "binary"),
        ("varbinary(9)", Kind.BINARY, "binary"),
        ("blob", Kind.BINARY, "binary"),
        ("varchar(4) CHARACTER SET binary", Kind.BINARY, "binary"),
        ("bit(12)", Kind.BIT, "binary"),
        ("date", Kind.DATE, "date"),
        ("datetime(6)", Kind.DATETIME, "timestamp_ntz"),
        ("timestamp(3)", Kind.TIMESTAMP, "timestamp"),
        ("time(4)", Kind.TIME, "string"),
        ("year(4)", Kind.YEAR, "smallint"),
    ],
)
def test_upstream_types_map_to_the_design_delta_types(sql_type: str, kind: Kind, delta: str) -> None:
    col = column_from_type("c", sql_type)
    assert (col.kind, col.delta_type) == (kind, delta)


def test_mariadb_json_is_a_longtext_with_a_json_valid_check() -> None:
    assert column_from_type("j", "longtext", json_text=True).kind is Kind.JSON
    assert column_from_type("b", "bit(12)").byte_width == 2


def _schema() -> TableSchema:
    cols = (
        column_from_type("id", "bigint"),
        column_from_type("v", "int unsigned"),
        column_from_type("s", "text"),
    )
    return TableSchema("db", "t", cols, ("id",))


def test_schemas_agree_and_delta_only_columns_are_ignored() -> None:
    comparison = compare_schemas(
        _schema(), {"id": "bigint", "v": "bigint", "S": "string", "_tidb_commit_ts": "bigint"}
    )
    assert [c.name for c in comparison.value_columns] == ["v", "s"]
    assert comparison.range_keyed


def test_a_schema_mismatch_names_every_disagreement() -> None:
    with pytest.raises(SchemaMismatch) as info:
        compare_schemas(_schema(), {"id": "bigint", "v": "int", "extra": "string"})
    message = str(info.value)
    assert "'v' is int unsigned upstream, which maps to Delta BIGINT, but the Delta column is INT" in message
    assert "'s' (text) is missing" in message
    assert "'extra' does not exist upstream" in message


def test_ignored_columns_are_left_out_on_both_sides() -> None:
    comparison = compare_schemas(_schema(), {"id": "bigint", "v": "int"}, ignored=["v", "s"])
    assert [c.name for c in comparison.columns] == ["id"]
    assert ignored_columns(["x", "db.t*.v", "other.t.w"], "db", "tab") == ("x", "v")


def test_options_lay_flags_over_the_config() -> None:
    options = RunOptions.from_config(ReconcileConfig(chunk_size=10), max_diff=5, tables=["a.b"], at_ts=None)
    assert (options.chunk_size, options.max_diff, options.tables, options.at_ts) == (10, 5, ("a.b",), None)
    with pytest.raises(ValueError, match="parallelism"):
        RunOptions.from_config(ReconcileConfig(), parallelism=0)
    assert RunOptions.from_config(ReconcileConfig(tables_at_once=2), tables_at_once=None).tables_at_once == 2
    for wrong in (0, 33):
        with pytest.raises(ValueError, match="tables_at_once must be 1..32"):
            RunOptions.from_config(ReconcileConfig(), tables_at_once=wrong)


def test_table_patterns_match_or_fail_loudly() -> None:
    names = [("shop", "orders"), ("shop", "items"), ("ops", "events")]
    assert match_tables(names, ["shop.*"], "upstream") == [("shop", "orders"), ("shop", "items")]
    assert match_tables(names, ["*.events", "ops.*"], "upstream") == [("ops", "events")]
    with pytest.raises(TableNotFound, match=r"^no upstream table matches 'shop\.missing'$"):
        match_tables(names, ["shop.missing"], "upstream")


def _table(status: str, missing: int = 0, changed: int = 0, **kw) -> TableResult:
    samples = (RowSample("changed", {"id": 1}, ("v",), {"v": 1}, {"v": 2}),) if changed else ()
    return TableResult("db.t", status, diff=DiffCounts(missing, 0, changed, {"v": changed}, samples), **kw)


def test_exit_codes() -> None:
    assert exit_code([_table("equal")], 0) == 0
    assert exit_code([_table("different", missing=1)], 0) == 1
    assert exit_code([_table("different", missing=3)], 3) == 0  # at the threshold is fine
    assert exit_code([_table("different", missing=2, changed=2)], 3) == 1
    assert exit_code([_table("equal"), TableResult.failed("db.u", "boom")], 10) == 2
    repaired = _table(
        "different", missing=1, repair=RepairOutcome(0, 1, 5, DiffCounts())
    )  # the re-check after a repair decides
    assert exit_code([repaired], 0) == 0


def test_result_to_dict_carries_counts_and_samples_per_kind() -> None:
    result = ReconcileResult(
        "mariadb", (_table("different", changed=1), TableResult.failed("db.u", "x")), 0, 1.0, 42
    )
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["exit_code"] == 2 and doc["upstream_bytes"] == 42
    table = doc["tables"][0]
    assert table["changed"] == 1 and table["changed_by_column"] == {"v": 1}
    assert table["samples"]["changed"] == [
        {"key": {"id": 1}, "columns": ["v"], "upstream": {"v": 1}, "delta": {"v": 2}}
    ]
    assert doc["tables"][1] == {"table": "db.u", "status": "error", "error": "x"}


def test_result_renders_for_people() -> None:
    out = io.StringIO()
    result = ReconcileResult("mariadb", (_table("different", changed=1),), 0, 1.0, 42)
    result.render(Console(file=out, width=120))
    text = out.getvalue()
    assert "db.t" in text and "different" in text and "v (1)" in text


def test_delta_versions_carry_the_last_recorded_resolved_ts() -> None:
    history = resolved_history([(2, None), (0, {"resolved_ts": 10}), (1, {"resolved_ts": 20}), (3, {"x": 1})])
    assert history == [VersionTs(0, 10), VersionTs(1, 20), VersionTs(2, 20), VersionTs(3, 20)]
    assert choose_version(history, None) == VersionTs(3, 20)
    assert choose_version(history, 20) == VersionTs(3, 20)
    assert choose_version(history, 10) == VersionTs(0, 10)
    assert choose_version(history, 15, exact=False) == VersionTs(0, 10)
    with pytest.raises(InputError, match="no Delta version has resolved ts 15"):
        choose_version(history, 15)


def test_dumpling_metadata_gives_the_tidb_snapshot_ts() -> None:
    text = (
        "Started dump at: 2024-01-02 03:04:05\n"
        "SHOW MASTER STATUS:\n\tLog: tidb-binlog\n\tPos: 448069946804273154\n\tGTID:\n\n"
        "SHOW MASTER STATUS: /* AFTER CONNECTION POOL ESTABLISHED */\n\tLog: tidb-binlog\n\tPos: 1\n\tGTID:\n\n"
        "Finished dump at: 2024-01-02 03:04:06\n"
    )
    assert parse_metadata(text).tso == 448069946804273154
    mysql = "SHOW MASTER STATUS:\n\tLog: mysql-bin.000003\n\tPos: 7502\n\tGTID:abc:1-29\n"
    assert parse_metadata(mysql).tso is None


def test_dumpling_create_table_and_files() -> None:
    sql = (
        "/*!40101 SET NAMES binary*/;\nCREATE TABLE `t``x` (\n"
        "  `id` bigint(20) unsigned NOT NULL,\n  `price` decimal(10,2) DEFAULT NULL,\n"
        "  `tags` set('a','b,c') DEFAULT NULL,\n  `doc` longtext DEFAULT NULL CHECK (json_valid(`doc`)),\n"
        "  `raw` varbinary(8) DEFAULT NULL,\n"
        "  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */,\n  KEY `p` (`price`)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;\n"
    )
    schema = parse_create_table(sql, "db", "db.t-schema.sql")
    assert schema.table == "t`x" and schema.primary_key == ("id",)
    assert [(c.name, c.kind, c.delta_type) for c in schema.columns] == [
        ("id", Kind.INT, "decimal(20,0)"),
        ("price", Kind.DECIMAL, "decimal(10,2)"),
        ("tags", Kind.TEXT, "string"),
        ("doc", Kind.JSON, "string"),
        ("raw", Kind.BINARY, "binary"),
    ]
    names = ["db.t.000000001.csv", "db.t.000000000.csv", "db.t-schema.sql", "db.tt.csv", "db.t.csv.gz"]
    assert data_files(names, "db", "t") == ["db.t.000000000.csv", "db.t.csv.gz", "db.t.000000001.csv"]
    assert header_line(schema.columns[:2]) == '"id","price"'


def test_tls_settings_become_an_ssl_context_and_errors_hide_the_password(tmp_path) -> None:
    import ssl

    from reconcile.errors import UpstreamError
    from reconcile.upstream.sql import _ssl_context
    from tidelake.config import UpstreamConfig
    from tidelake.configload import Secret

    assert _ssl_context(UpstreamConfig(kind="mysql")) is None
    relaxed = _ssl_context(UpstreamConfig(kind="mysql", ssl=True, ssl_verify=False))
    assert relaxed is not None and relaxed.verify_mode == ssl.CERT_NONE and not relaxed.check_hostname
    strict = _ssl_context(UpstreamConfig(kind="tidb", ssl=True))
    assert strict is not None and strict.verify_mode == ssl.CERT_REQUIRED
    missing = UpstreamConfig(kind="mysql", ssl_ca=str(tmp_path / "nope.pem"), password=Secret("hunter2-pw"))
    with pytest.raises(UpstreamError, match="TLS set-up failed") as info:
        _ssl_context(missing)
    assert "hunter2-pw" not in str(info.value) and "hunter2-pw" not in repr(missing)
