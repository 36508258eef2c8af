"""DDL text -> TiDB TableInfo (`codec.ddl_text`): the codec's view of what the text gives must be the one a
real TableInfo gives. The simulator writes both for every table and DDL: its CREATE TABLE text (TiDB's,
and the MariaDB copy's) beside the TableInfo, and each done DDL job's query beside the job's TableInfo."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from backfill.codec import ColumnKind, TableSchema
from backfill.codec.ddl_text import DdlTextError, apply_ddl, create_table_info
from tidbsim.config import SimulationConfig
from tidbsim.engine import simulate
from tidbsim.table_versions import TEMPLATES, build_table, collation_template

pytestmark = pytest.mark.unit


def view(info: Mapping[str, Any], schema: str | None = None) -> tuple[Any, ...]:
    """What the codec and the Delta table take from a TableInfo (not TiDB's display widths)."""
    s = TableSchema.from_table_info(info, schema_name=schema)
    columns = tuple(
        (
            c.name,
            c.tp,
            c.nullable,
            c.is_primary_key,
            c.kind,
            c.spark_type,
            c.elems,
            c.fsp,
            c.decimal_precision if c.kind in (ColumnKind.DECIMAL, ColumnKind.DECIMAL_STR) else None,
            c.flen if c.kind is ColumnKind.BIT else None,
            (c.charset, c.collate) if c.kind in (ColumnKind.TEXT, ColumnKind.ENUM, ColumnKind.SET) else None,
            c.origin_default,
        )
        for c in s.columns
    )
    return s.name, s.pk_kind, s.pk_columns, s.spark_ddl, columns


def create(sql: str, table_id: int = 7) -> TableSchema:
    _, _, info = create_table_info(sql, table_id=table_id)
    return TableSchema.from_table_info(info)


@pytest.mark.parametrize("mysql", [False, True], ids=["tidb", "mariadb"])
def test_simulator_create_table_text_gives_its_table_info(mysql: bool) -> None:
    for template in (*TEMPLATES, collation_template("utf8mb4_general_ci")):
        table = build_table(
            template, uid=1, name=template.name, ids=range(100, 110), partition_width=10, update_ts=0
        )
        schema, name, info = create_table_info(table.create_sql(mysql=mysql), table_id=table.table_id)
        assert (schema, name) == (table.db, table.name)
        assert view(info) == view(table.table_info()), template.key


def test_simulator_ddl_jobs_replayed_from_their_text(tmp_path: Path) -> None:
    """Every done job of a simulated history, applied to the TableInfo the text path built so far, gives
    the job's own TableInfo (column ids and offsets renumbered only as TiDB does)."""
    simulate(SimulationConfig(out=tmp_path, tables=4, rows=5, txns=10, scans=6, ddls_per_scan=3, seed=3))
    scans = sorted((tmp_path / "scans").iterdir())
    tables: dict[int, tuple[str, dict[str, Any]]] = {}
    for line in (scans[0] / "schema" / "tables.jsonl").read_text().splitlines():
        doc = json.loads(line)
        tables[doc["table_info"]["id"]] = (doc["schema_name"], doc["table_info"])
    jobs = [
        json.loads(line) for s in scans for line in (s / "schema" / "ddl_jobs.jsonl").read_text().splitlines()
    ]
    kinds = set()
    for job in sorted({j["id"]: j for j in jobs}.values(), key=lambda j: j["binlog"]["FinishedTS"]):
        final = job["binlog"]["TableInfo"]
        kinds.add(job["type"])
        if job["type"] == 3:
            db, name, info = create_table_info(job["query"], table_id=final["id"])
            assert (db, name) == (job["schema_name"], job["table_name"])
            tables[final["id"]] = (db or "", info)
            assert view(info) == view(final), job["query"]
            continue
        db, info = tables.pop(job["table_id"])
        effect = apply_ddl(info, job["query"], schema=db)
        if job["type"] == 4:
            assert effect.kind == "drop" and effect.table_info is None
            continue
        assert effect.table_info is not None
        if job["type"] in (19, 20, 23, 64):
            assert effect.kind == "partition", job["query"]
        elif job["type"] == 11:
            assert effect.kind == "truncate"
        elif job["type"] == 14:
            assert (effect.kind, effect.schema, effect.table) == (
                "rename",
                job["schema_name"],
                final["name"]["O"],
            )
        else:
            assert effect.kind == "alter", job["query"]
        after = dict(effect.table_info, id=final["id"])
        tables[final["id"]] = (effect.schema or db, after)
        assert view(after) == view(final), job["query"]
    assert {3, 4, 5, 6, 11, 12, 14, 19, 20}.issubset(kinds)  # the history covered these kinds


def test_tidb_syntax() -> None:
    """TiDB's own forms: executable comments, AUTO_RANDOM, SHARD_ROW_ID_BITS, partitioning, collations
    (statements shaped like tiflow's integration tests and TiDB's SHOW CREATE TABLE output)."""
    shown = create(
        "CREATE TABLE `t1` (\n  `id` bigint(20) NOT NULL /*T![auto_rand] AUTO_RANDOM(5) */,\n"
        "  `name` varchar(20) COLLATE utf8mb4_general_ci DEFAULT NULL,\n  `amt` decimal(20,4) unsigned DEFAULT '0.0000',\n"
        "  `e` enum('a','b''s','c') NOT NULL DEFAULT 'b''s',\n  `s` set('x','y') DEFAULT NULL,\n"
        "  `b` bit(12) DEFAULT b'101',\n  `t` time(3) DEFAULT NULL,\n  `ts` timestamp(6) NULL DEFAULT CURRENT_TIMESTAMP(6),\n"
        "  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */,\n  KEY `idx_name` (`name`)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin /*T![auto_rand_base] AUTO_RANDOM_BASE=39456621 */\n"
        "PARTITION BY RANGE (`id`)\n(PARTITION `p0` VALUES LESS THAN (100),\n PARTITION `p1` VALUES LESS THAN (MAXVALUE))"
    )
    assert (shown.pk_kind, shown.pk_columns) == ("int", ("id",))
    by = shown.by_name
    assert (by["name"].collate, by["name"].charset) == ("utf8mb4_general_ci", "utf8mb4")
    assert (by["amt"].spark_type, by["amt"].unsigned, by["amt"].origin_default) == (
        "DECIMAL(20,4)",
        True,
        "0.0000",
    )
    assert (by["e"].elems, by["e"].origin_default, by["e"].nullable) == (("a", "b's", "c"), "b's", False)
    assert by["s"].elems == ("x", "y") and by["s"].kind is ColumnKind.SET
    assert (by["b"].flen, by["b"].origin_default_bit) == (12, b"\x05")
    assert (by["t"].fsp, by["ts"].fsp, by["ts"].origin_default) == (3, 6, None)

    common = create(
        "CREATE TABLE t (a varchar(10), b int, c int, PRIMARY KEY (a(4), b) CLUSTERED) SHARD_ROW_ID_BITS=4"
    )
    assert (common.pk_kind, common.pk_columns) == ("common", ("a", "b"))
    assert [length for _, length in common.common_handle] == [4, -1]
    for sql in (
        "CREATE TABLE t (a int PRIMARY KEY NONCLUSTERED, b int) PRE_SPLIT_REGIONS=2",
        "CREATE TABLE t (a int, b int, PRIMARY KEY (a) /*T![clustered_index] NONCLUSTERED */)",
        "CREATE TABLE t (a int, b int) PARTITION BY HASH (a) PARTITIONS 4",
        "CREATE TABLE t (a int, b varchar(3)) PARTITION BY LIST COLUMNS (b) (PARTITION p0 VALUES IN ('a','b'))",
    ):
        rowid = create(sql)
        assert rowid.pk_kind == "rowid", sql
        assert [c.name for c in rowid.columns if c.is_primary_key] == (["a"] if "PRIMARY" in sql else [])
    assert (
        create("CREATE TABLE t (a int, b int, PRIMARY KEY (a, b))").pk_kind == "common"
    )  # TiDB's default: ON
    named = create("CREATE TABLE t (clustered int, b int, PRIMARY KEY (b) NONCLUSTERED)")
    assert ([c.name for c in named.columns], named.pk_kind) == (["clustered", "b"], "rowid")

    binary = create(
        "CREATE TABLE t (a varchar(4) CHARACTER SET binary, b char(2) binary, c text CHARSET latin1, d bool,"
        " e float(30), f tinyint(3) zerofill, g longtext CHECK (json_valid(`g`)), h int GENERATED ALWAYS AS (d + 1) VIRTUAL,"
        " i int AS (d + 1) STORED) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"
    )
    by = binary.by_name
    assert by["a"].kind is ColumnKind.BINARY and by["b"].kind is ColumnKind.TEXT
    assert (by["b"].collate, by["c"].charset, by["c"].collate) == ("utf8mb4_bin", "latin1", "latin1_bin")
    assert (by["d"].spark_type, by["e"].kind, by["f"].unsigned, by["g"].kind) == (
        "TINYINT",
        ColumnKind.FLOAT64,
        True,
        ColumnKind.JSON,
    )
    assert "h" not in by and by["i"].generated_stored  # a virtual column is never sent


def test_alter_table_with_several_specs() -> None:
    _, _, info = create_table_info(
        "CREATE TABLE s.t (id int PRIMARY KEY, a int, b varchar(5), c int, d int)", table_id=9
    )
    effect = apply_ddl(
        info,
        "ALTER TABLE s.t ADD COLUMN x decimal(6,2) NOT NULL DEFAULT 1.5 AFTER id, DROP COLUMN b, "
        "MODIFY COLUMN a bigint unsigned, CHANGE c c2 enum('p','q') DEFAULT 'q' FIRST, RENAME COLUMN d TO d2, "
        "ADD INDEX i (a), ALTER COLUMN x SET DEFAULT 2, ALGORITHM=INPLACE",
        schema="s",
    )
    assert effect.kind == "alter" and effect.table_info is not None
    after = TableSchema.from_table_info(effect.table_info)
    assert [(c.name, c.id, c.spark_type) for c in after.columns] == [
        ("c2", 4, "STRING"),
        ("id", 1, "INT"),
        ("x", 6, "DECIMAL(6,2)"),
        ("a", 2, "DECIMAL(20,0)"),
        ("d2", 5, "INT"),
    ]
    assert (after.by_name["x"].origin_default, after.by_name["c2"].elems) == ("1.5", ("p", "q"))
    assert (after.pk_kind, after.pk_columns) == ("int", ("id",))

    assert apply_ddl(info, "ALTER TABLE s.t ADD UNIQUE KEY u (a), COMMENT = 'x'", schema="s").kind == "none"
    assert apply_ddl(info, "CREATE INDEX i ON s.t (a)", schema="s").kind == "none"
    renamed = apply_ddl(info, "RENAME TABLE `s`.`x` TO `s`.`y`, s.t TO `o`.`t2`", schema="s")
    assert (renamed.kind, renamed.schema, renamed.table) == ("rename", "o", "t2")
    moved = apply_ddl(info, "ALTER TABLE t RENAME s2.t3", schema="s")
    assert (moved.kind, moved.schema, moved.table) == ("rename", "s2", "t3")
    assert apply_ddl(info, "TRUNCATE TABLE s.t", schema="s").kind == "truncate"
    assert apply_ddl(info, "DROP TABLE IF EXISTS `s`.`t`", schema="s").kind == "drop"
    dropped = apply_ddl(info, "ALTER TABLE s.t TRUNCATE PARTITION p1, p2", schema="s")
    assert (dropped.kind, dropped.verb) == ("partition", "TRUNCATE PARTITION")


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("ALTER TABLE s.t ADD COLUMN (x int, y int)", "cannot"),
        ("ALTER TABLE s.t SET TIFLASH REPLICA 1", "cannot"),
        ("ALTER TABLE s.t DROP COLUMN nope", "no column 'nope'"),
        ("ALTER TABLE s.t DROP COLUMN id", "primary key"),
        ("CREATE TABLE s.u LIKE s.t", "without a column list"),
        ("CREATE TABLE s.u (g geometry)", "not supported"),
        ("CREATE TABLE s.u (a int", "cannot read DDL"),
    ],
)
def test_unreadable_statements_are_named(sql: str, says: str) -> None:
    _, _, info = create_table_info("CREATE TABLE s.t (id int PRIMARY KEY, a int)", table_id=9)
    with pytest.raises(DdlTextError, match=says) as caught:
        if sql.startswith("CREATE"):
            create_table_info(sql, table_id=10)
        else:
            apply_ddl(info, sql, schema="s")
    assert sql in str(caught.value)


def test_storage_schema_files_without_elements_take_them_from_the_ddl_text() -> None:
    """tiflow's schema files carry no ColumnElems: the CREATE TABLE query (or the upstream's TableInfo)
    gives them, and later DDL text keeps them current (a MODIFY COLUMN to new elements)."""
    from backfill.sources.storage.elements import lacks_elements, text_table_infos, with_text_elements
    from backfill.sources.ticdc.schema_file import TableDefinition, columns_from_sql

    def definition(version: int, query: str, kind: str) -> TableDefinition:
        columns = columns_from_sql([("id", "INT", {"is_pk": "true"}), ("e", kind, {})])
        return TableDefinition("t", "s", 0, version, query, 3, columns, len(columns))

    defs = [
        definition(10, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `e` ENUM('a','b'))", "ENUM"),
        definition(20, "", "ENUM"),
        definition(30, "ALTER TABLE `s`.`t` MODIFY COLUMN `e` SET('x','y','z')", "SET"),
    ]
    assert all(lacks_elements(d) for d in defs)
    texts = text_table_infos(defs, None, "sink/s/t/meta")
    elems = [
        TableSchema.from_table_info(with_text_elements(d.table_info(5), text)).by_name["e"].elems
        for d, text in zip(defs, texts, strict=True)
    ]
    assert elems == [("a", "b"), ("a", "b"), ("x", "y", "z")]
    _, _, upstream = create_table_info("CREATE TABLE t (id int PRIMARY KEY, e enum('p','q'))", table_id=5)
    later = text_table_infos(defs[1:2], upstream, "sink/s/t/meta")
    assert TableSchema.from_table_info(with_text_elements(defs[1].table_info(5), later[0])).by_name[
        "e"
    ].elems == (
        "p",
        "q",
    )
    assert (
        TableSchema.from_table_info(with_text_elements(defs[1].table_info(5), None)).by_name["e"].elems == ()
    )


def test_a_run_whose_versions_start_after_the_create_table_still_has_its_elements() -> None:
    """A later run reads the versions from the barrier before its checkpoint on (`since`): the elements come
    from the CREATE TABLE further back, not from the upstream; a table without one asks the upstream at the
    run's first version."""
    from backfill.sources.storage.elements import text_table_infos_from, with_text_elements
    from backfill.sources.ticdc.schema_file import TableDefinition, columns_from_sql

    def definition(version: int, query: str, table: str = "t") -> TableDefinition:
        columns = columns_from_sql([("id", "INT", {"is_pk": "true"}), ("e", "ENUM", {})])
        return TableDefinition(table, "s", 0, version, query, 3, columns, len(columns))

    defs = [
        definition(10, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `e` ENUM('a','b'))"),
        definition(20, "RENAME TABLE `s`.`t` TO `s`.`u`", "u"),
        definition(30, "ALTER TABLE `s`.`u` ADD INDEX `i` (`e`)", "u"),
        definition(40, "", "u"),
    ]
    asked: list[int] = []

    def upstream_at(d: TableDefinition) -> dict:
        asked.append(d.table_version)
        return create_table_info("CREATE TABLE u (id int PRIMARY KEY, e enum('p','q'))", table_id=5)[2]

    def elems(texts: list, since: int) -> list[tuple[str, ...]]:
        return [
            TableSchema.from_table_info(with_text_elements(d.table_info(5), text)).by_name["e"].elems
            for d, text in zip(defs[since:], texts, strict=True)
        ]

    for since in range(len(defs)):
        assert elems(text_table_infos_from(defs, since, upstream_at, "sink/s/u/meta"), since) == [
            ("a", "b")
        ] * (len(defs) - since)
    assert asked == []
    created_before = defs[1:]  # no CREATE TABLE: the upstream, at the run's first version
    texts = text_table_infos_from(created_before, 1, upstream_at, "sink/s/u/meta")
    assert elems(texts, 2) == [("p", "q")] * 2 and asked == [30]
    assert text_table_infos_from(created_before, 1, None, "sink/s/u/meta") == [None, None]


def test_statements_shaped_like_tiflow_integration_tests() -> None:
    """Forms TiCDC's own integration tests send: every type in one table under `DEFAULT CHARSET = utf8`,
    a BIT primary key, and a RENAME TABLE that swaps names in a chain (each pair read on its own)."""
    multi = create(
        "CREATE TABLE many_types\n(\n    id INT AUTO_INCREMENT,\n    c_bool BOOLEAN,\n    c_dec DECIMAL(38, 19),\n"
        "    c_bit BIT(64),\n    c_ts TIMESTAMP NULL,\n    c_char CHAR,\n    c_enum ENUM ('e1', 'e2'),\n"
        "    c_set SET ('a', 'b', 'c'),\n    c_json JSON,\n    PRIMARY KEY (id)\n) ENGINE = InnoDB\n"
        "  DEFAULT CHARSET = utf8\n  COLLATE = utf8_bin;"
    )
    by = multi.by_name
    assert (multi.pk_kind, by["c_dec"].spark_type, by["c_bit"].flen) == ("int", "DECIMAL(38,19)", 64)
    assert (by["c_enum"].elems, by["c_set"].elems) == (("e1", "e2"), ("a", "b", "c"))
    assert (by["c_char"].charset, by["c_char"].collate, by["c_char"].flen) == ("utf8", "utf8_bin", 1)
    assert create("CREATE TABLE bits (a BIT(1) PRIMARY KEY, b BIT(64))").pk_kind == "common"
    _, _, t3 = create_table_info("create table chain_c (id int primary key, val int)", table_id=3)
    swap = "rename table chain_a to chain_d, chain_b to chain_a, chain_c to chain_b"
    moved = apply_ddl(t3, swap, schema="s")
    assert (moved.kind, moved.schema, moved.table) == ("rename", "s", "chain_b")
