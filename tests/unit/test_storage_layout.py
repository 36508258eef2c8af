"""The storage sink's folder layout (tiflow/ticdc path_key_test.go cases), index files and which files a
run reads."""

from __future__ import annotations

import pytest

from backfill.sources.storage.layout import (
    DataDir,
    DataFile,
    IndexFile,
    SchemaFile,
    classify,
    parse_index,
    parse_metadata,
)
from backfill.sources.storage.plan import (
    FileToRead,
    files_to_read,
    group_listing,
    lineages,
    pack_files,
    rename_source,
    segment_starts,
)
from backfill.sources.ticdc.schema_file import TableDefinition, columns_from_sql
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

DISPATCHER = "0a3e5a2c-1b2f-4c6d-8e9f-000000000001"


@pytest.mark.parametrize(
    ("relative", "separator", "expected"),
    [
        ("test_schema/meta/schema_1_0000000002.json", "day", SchemaFile("test_schema", "", 1, 2, "p")),
        ("test_schema/test_table/meta/schema_11_0000000022.json", "day",
         SchemaFile("test_schema", "test_table", 11, 22, "p")),
        ("schema1/table1/123456/2023-05-09/CDC00000000000000000010.csv", "day",
         DataFile(DataDir("schema1", "table1", 123456, 0, "2023-05-09"), 10, "p")),
        (f"schema1/table1/123456/2023-05-09/CDC_{DISPATCHER}_00000000000000000010.csv", "day",
         DataFile(DataDir("schema1", "table1", 123456, 0, "2023-05-09", DISPATCHER), 10, "p")),
        (f"schema1/table1/123456/55/2023-05-09/CDC_{DISPATCHER}_00000000000000000010.csv", "day",
         DataFile(DataDir("schema1", "table1", 123456, 55, "2023-05-09", DISPATCHER), 10, "p")),
        ("db/t/5/CDC000001.csv", "none", DataFile(DataDir("db", "t", 5), 1, "p")),
        ("db/t/5/2024/CDC1.csv", "year", DataFile(DataDir("db", "t", 5, 0, "2024"), 1, "p")),
        ("db/t/5/2024-02/CDC000001.csv", "month", DataFile(DataDir("db", "t", 5, 0, "2024-02"), 1, "p")),
        ("db/t/5/448/CDC000001.csv", "none", DataFile(DataDir("db", "t", 5, 448), 1, "p")),
        ("db/t/5/448/2024/CDC000001.csv", "year", DataFile(DataDir("db", "t", 5, 448, "2024"), 1, "p")),
        ("db/t/5/448/2024-02-03/meta/CDC.index", "day", IndexFile(DataDir("db", "t", 5, 448, "2024-02-03"), "p")),
        (f"db/t/5/meta/CDC_{DISPATCHER}.index", "none", IndexFile(DataDir("db", "t", 5, 0, "", DISPATCHER), "p")),
        ("schema1/table1/123456/meta/notCDC.index", "day", None),
        ("db/t/5/CDC000001.json", "day", None),  # another protocol's extension
        ("db/t/v5/CDC000001.csv", "day", None),
        ("metadata", "day", None),
    ],
)  # fmt: skip
def test_paths_classify_like_ticdc_path_keys(relative: str, separator: str, expected: object) -> None:
    assert classify(relative, "p", ".csv", separator) == expected


def test_index_and_metadata_contents() -> None:
    assert parse_index("CDC000012.csv\n", "i") == 12
    assert parse_index(f"CDC_{DISPATCHER}_00000000000000000007.json\n", "i") == 7
    with pytest.raises(InputError, match="i: index content"):
        parse_index("garbage", "i")
    assert parse_metadata('{"checkpoint-ts": 451234567890123456}', "m") == 451234567890123456
    with pytest.raises(InputError, match="m: not a storage sink metadata file"):
        parse_metadata('{"checkpoint": 1}', "m")


def test_every_existing_file_is_read_and_only_the_newest_may_be_cut_short() -> None:
    """tiflow's index may name a file not written yet (4 of the first folder); ticdc's files may run past
    their index (3 and 4 of the second): each existing file is read, versions ordered, old ones skipped."""
    first, second, old = DataDir("d", "t", 20), DataDir("d", "t", 20, 7, "2024-01-02"), DataDir("d", "t", 10)
    entries = [
        DataFile(first, n, f"a{n}") for n in (1, 2, 3)
    ] + [DataFile(second, n, f"b{n}") for n in (1, 2, 3, 4)] + [
        DataFile(old, 1, "o1"), IndexFile(first, "ai"), IndexFile(second, "bi"),
    ]  # fmt: skip
    listing = group_listing(entries).tables[("d", "t")]
    plan = files_to_read(listing, [10, 20], {first: 4, second: 2}, floor=20)
    assert [(f.path, f.ordinal, f.newest) for f in plan[20]] == [
        ("a1", 1, False), ("a2", 2, False), ("a3", 3, False),
        ("b1", 4, False), ("b2", 5, False), ("b3", 6, False), ("b4", 7, True),
    ]  # fmt: skip
    assert 10 not in plan  # version 10's folder ends at version 20 <= the floor: nothing new there
    assert files_to_read(listing, [10, 20], {first: 4, second: 2}, floor=15)[10][0].path == "o1"


def test_files_are_packed_into_tasks_like_a_spark_file_source() -> None:
    """Spark's rule for a file source: up to min(max, max(open cost, total / parallelism)) bytes a task,
    largest first, a file never split; every file in exactly one group."""
    mb = 1 << 20
    big = [FileToRead(f"big{n}", n, False, 200 * mb) for n in range(3)]
    small = [FileToRead(f"small{n}", 10 + n, n == 39, 100_000) for n in range(40)]
    groups = pack_files(big + small, max_bytes=128 * mb, open_cost=4 * mb, min_tasks=2)
    paths = [f.path for group in groups for f in group]
    assert sorted(paths) == sorted(f.path for f in big + small)  # each once
    assert [[f.path for f in g] for g in groups[:3]] == [["big0"], ["big1"], ["big2"]]  # a task each
    # a small file costs 4.1 MB with the open cost: a group takes one while its bytes stay under 128 MB
    assert [len(g) for g in groups[3:]] == [32, 8]
    # little data on many cores: the bytes spread over min_tasks groups, not one
    tiny = [FileToRead(f"t{n}", n, False, 1000) for n in range(8)]
    assert len(pack_files(tiny, max_bytes=128 * mb, open_cost=1000, min_tasks=4)) == 4
    assert pack_files([], max_bytes=128 * mb, open_cost=4 * mb, min_tasks=2) == []


def test_versions_with_a_query_start_segments() -> None:
    cols = columns_from_sql([("id", "INT", {"is_pk": "true"})])
    wider = columns_from_sql([("id", "INT", {"is_pk": "true"}), ("x", "INT", {})])
    defs = [
        TableDefinition("t", "d", 1, 10, "CREATE TABLE t (id INT PRIMARY KEY)", 3, cols, 1),
        TableDefinition("t", "d", 1, 20, "", 0, cols, 1),  # a restart: same columns, no query
        TableDefinition("t", "d", 1, 30, "ALTER TABLE t ADD INDEX i (id)", 7, cols, 1),
        TableDefinition("t", "d", 1, 40, "", 0, wider, 2),  # no query but new columns: a barrier too
    ]
    assert segment_starts(defs) == [0, 2, 3]


def test_renames_join_names_into_one_table() -> None:
    cols = columns_from_sql([("id", "INT", {"is_pk": "true"})])

    def version(table: str, ts: int, query: str = "", action: int = 0) -> tuple[SchemaFile, TableDefinition]:
        return SchemaFile("d", table, ts, 0, f"{table}@{ts}"), TableDefinition(
            table, "d", 1, ts, query, action, cols, 1
        )

    files = [
        version("a", 10),
        version("b", 20, "RENAME TABLE `d`.`a` TO `d`.`b`", 14),
        version("c", 30, "ALTER TABLE b RENAME TO c", 14),
        version("a", 40, "CREATE TABLE a (id INT PRIMARY KEY)", 3),  # a new table under the old name
        version("x", 50),
    ]
    listing = group_listing(f for f, _ in files)
    definitions = {f.path: d for f, d in files}
    chains = [
        [(t.table, [f.version for f in fs]) for t, fs in chain]
        for chain in lineages(listing, definitions, 45)
    ]
    assert chains == [[("a", [40])], [("a", [10]), ("b", [20]), ("c", [30])]]
    assert rename_source(definitions["b@20"]) == ("d", "a")
    assert rename_source(TableDefinition("n", "d", 1, 1, "RENAME TABLE o1 TO n1, `o`.`x` TO `d`.`n`", 47, (), 0)) == (
        "o", "x",
    )  # fmt: skip
    assert rename_source(definitions["a@40"]) is None


def test_local_files_are_read_by_path_and_a_vanished_one_is_named(tmp_path) -> None:
    from backfill.sources.storage.source import local_file, read_local
    from tidelake.sparkerrors import from_task

    assert local_file("file:/data/sink/a b/CDC1.csv") == "/data/sink/a b/CDC1.csv"
    assert local_file("file:///data/CDC1.csv") == local_file("/data/CDC1.csv") == "/data/CDC1.csv"
    assert local_file("s3a://bucket/sink/CDC1.csv") is None  # only the JVM reads those
    data = tmp_path / "CDC000001.csv"
    data.write_bytes(b'"I","t","d",1,2\r\n')
    assert read_local(f"file:{data}") == data.read_bytes()
    data.unlink()
    with pytest.raises(RuntimeError) as failed:
        read_local(f"file:{data}")
    error = from_task(failed.value)
    assert error is not None and str(data) in str(error) and "cannot read" in str(error)
