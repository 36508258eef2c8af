"""Each DDL in its own test: rows before the DDL land with the old schema, the DDL reshapes the Delta
table (idempotently, as a tagged commit), rows after it land with the new schema."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from backfill.cli import main
from backfill.run import run_backfill
from tests.captures import BIGINT, NOT_NULL, PRI_KEY, VARCHAR, Capture, column, ddl_job, users_table
from tidelake import delta
from tidelake.config import load_config

pytestmark = pytest.mark.spark

ADD_COLUMN, DROP_COLUMN, MODIFY_COLUMN, RENAME_COLUMN = 5, 6, 12, 37
CREATE_TABLE, DROP_TABLE, TRUNCATE_TABLE, RENAME_TABLE = 3, 4, 11, 14
ADD_PARTITION, DROP_PARTITION, TRUNCATE_PARTITION, REORGANIZE_PARTITION = 19, 20, 23, 64
EXCHANGE_PARTITION = 42


def setup(tmp_path: Path, tables, jobs, rows) -> tuple[object, Path]:
    cap = Capture(tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=400, tables=tables, jobs=jobs)
    for table, handle, values, commit in rows:
        cap.put(1, table, handle, values, commit - 1, commit)
    cap.init_and_resolve(390).write()
    conf = tmp_path / "job.toml"
    conf.write_text(f'[job]\nname = "ddl"\n[source]\npath = "{tmp_path / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    return load_config(conf), tmp_path / "wh"


def read(spark, path: Path) -> tuple[list[str], list[tuple]]:
    df = spark.read.format("delta").load(str(path))
    return df.columns, sorted(tuple(r) for r in df.collect())


def layout_of(spark, path: Path) -> tuple[list[str], str | None]:
    """The table's clustering columns and whether deletion vectors are on (the default layout's)."""
    (detail,) = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()
    return list(detail["clusteringColumns"]), detail["properties"].get("delta.enableDeletionVectors")


def run_twice(spark, config, path: Path):
    result = run_backfill(spark, config)
    version = delta.table_version(spark, str(path))
    again = run_backfill(spark, config)
    assert delta.table_version(spark, str(path)) == version, "a rerun must not commit again"
    assert again.note == "nothing new"
    return result


def test_add_column_existing_rows_read_the_origin_default(spark, tmp_path: Path) -> None:
    before = users_table()
    after = users_table(extra=[column(4, "city", VARCHAR, flen=32, origin_default="x")])
    config, wh = setup(
        tmp_path, [("app", before)], [ddl_job(1, ADD_COLUMN, "app", after, 150)],
        [(before, 1, {2: "ann", 3: 1}, 110), (after, 2, {2: "bob", 3: 2, 4: "paris"}, 160),
         # committed at the DDL's finished ts: still the old schema (commit_ts - 1 rule)
         (before, 3, {2: "cy", 3: 3}, 150)],
    )  # fmt: skip
    result = run_twice(spark, config, wh / "app" / "users")
    cols, rows = read(spark, wh / "app" / "users")
    assert cols == ["id", "name", "score", "city", "_tidb_commit_ts"]
    assert rows == [(1, "ann", 1, "x", 110), (2, "bob", 2, "paris", 160), (3, "cy", 3, "x", 150)]
    assert result.tables[0].ddl_steps == 1 and result.tables[0].resolved_ts == 390
    assert layout_of(spark, wh / "app" / "users") == (["id"], "true")  # the step keeps the clustering


def test_drop_column(spark, tmp_path: Path) -> None:
    before = users_table()
    after = copy.deepcopy(before)
    after["cols"] = after["cols"][:2]
    config, wh = setup(
        tmp_path, [("app", before)], [ddl_job(1, DROP_COLUMN, "app", after, 150)],
        [(before, 1, {2: "ann", 3: 1}, 110), (after, 2, {2: "bob"}, 160)],
    )  # fmt: skip
    run_twice(spark, config, wh / "app" / "users")
    assert read(spark, wh / "app" / "users") == (
        ["id", "name", "_tidb_commit_ts"],
        [(1, "ann", 110), (2, "bob", 160)],
    )


def test_rename_column_keeps_values(spark, tmp_path: Path) -> None:
    before = users_table()
    after = copy.deepcopy(before)
    after["cols"][1]["name"] = {"O": "full_name", "L": "full_name"}
    config, wh = setup(
        tmp_path, [("app", before)], [ddl_job(1, RENAME_COLUMN, "app", after, 150)],
        [(before, 1, {2: "ann", 3: 1}, 110), (after, 2, {2: "bob", 3: 2}, 160)],
    )  # fmt: skip
    run_twice(spark, config, wh / "app" / "users")
    cols, rows = read(spark, wh / "app" / "users")
    assert cols == ["id", "full_name", "score", "_tidb_commit_ts"]
    assert rows == [(1, "ann", 1, 110), (2, "bob", 2, 160)]


def test_modify_column_widens_the_type(spark, tmp_path: Path) -> None:
    before = users_table()
    after = copy.deepcopy(before)
    after["cols"][2] = column(5, "score", BIGINT, flen=20, offset=2)  # reorg: a new column id, same name
    config, wh = setup(
        tmp_path, [("app", before)], [ddl_job(1, MODIFY_COLUMN, "app", after, 150)],
        [(before, 1, {2: "ann", 3: 7}, 110), (after, 2, {2: "bob", 5: 2**40}, 160)],
    )  # fmt: skip
    run_twice(spark, config, wh / "app" / "users")
    df = spark.read.format("delta").load(str(wh / "app" / "users"))
    assert dict(df.dtypes)["score"] == "bigint"
    assert sorted(tuple(r) for r in df.collect()) == [(1, "ann", 7, 110), (2, "bob", 2**40, 160)]


def test_rename_table_moves_the_delta_table(spark, tmp_path: Path) -> None:
    before = users_table()
    after = users_table(name="members")
    config, wh = setup(
        tmp_path, [("app", before)], [ddl_job(1, RENAME_TABLE, "app", after, 150)],
        [(before, 1, {2: "ann", 3: 1}, 110), (after, 2, {2: "bob", 3: 2}, 160)],
    )  # fmt: skip
    run_twice(spark, config, wh / "app" / "members")
    assert not (wh / "app" / "users").exists()
    assert read(spark, wh / "app" / "members")[1] == [(1, "ann", 1, 110), (2, "bob", 2, 160)]
    assert layout_of(spark, wh / "app" / "members") == (["id"], "true")  # created with the job's layout
    operations = spark.sql(f"DESCRIBE HISTORY delta.`{wh / 'app' / 'members'}`").select("operation").collect()
    assert "SET TBLPROPERTIES" not in {row[0] for row in operations}


def test_truncate_table_empties_it_and_drops_rows_of_the_old_id(spark, tmp_path: Path) -> None:
    before = users_table(100)
    after = users_table(101)
    config, wh = setup(
        tmp_path, [("app", before)], [ddl_job(1, TRUNCATE_TABLE, "app", after, 150, table_id=100)],
        [(before, 1, {2: "ann", 3: 1}, 110), (after, 5, {2: "eve", 3: 5}, 160),
         (before, 9, {2: "late", 3: 9}, 170)],  # a row of the truncated id after the DDL: dropped, as TiCDC does
    )  # fmt: skip
    run_twice(spark, config, wh / "app" / "users")
    assert read(spark, wh / "app" / "users")[1] == [(5, "eve", 5, 160)]


def test_create_and_drop_table(spark, tmp_path: Path) -> None:
    users = users_table(100)
    orders = users_table(200, name="orders")
    config, wh = setup(
        tmp_path, [("app", users)],
        [ddl_job(1, CREATE_TABLE, "app", orders, 150), ddl_job(2, DROP_TABLE, "app", users, 200)],
        [(users, 1, {2: "ann", 3: 1}, 110), (orders, 7, {2: "o", 3: 70}, 160)],
    )  # fmt: skip
    result = run_twice(spark, config, wh / "app" / "orders")
    assert not (wh / "app" / "users").exists()
    assert read(spark, wh / "app" / "orders")[1] == [(7, "o", 70, 160)]
    assert delta.recorded_txn_version(spark, str(wh / "app" / "orders"), "tidelake:ddl") == 390
    assert {t.table for t in result.tables} == {"app.users", "app.orders"}


def partitioned(definitions: list[tuple[int, str, str]]) -> dict:
    table = users_table(300, name="events")
    table["partition"] = {
        "type": 1, "expr": "`id`", "enable": True, "num": len(definitions),
        "definitions": [{"id": pid, "name": {"O": n, "L": n}, "less_than": [lt]} for pid, n, lt in definitions],
    }  # fmt: skip
    return table


def pput(table: dict, pid: int):
    """A row writer for one partition: partition rows use the partition's physical id in the key."""
    row_table = copy.deepcopy(table)
    row_table["id"] = pid
    row_table.pop("partition", None)
    return row_table


def test_partition_ids_map_to_one_table_and_drop_partition_removes_its_rows(spark, tmp_path: Path) -> None:
    before = partitioned([(301, "p0", "10"), (302, "p1", "MAXVALUE")])
    after = partitioned([(302, "p1", "MAXVALUE")])
    config, wh = setup(
        tmp_path, [("app", before)], [ddl_job(1, DROP_PARTITION, "app", after, 150)],
        [(pput(before, 301), 1, {2: "a", 3: 1}, 110), (pput(before, 302), 20, {2: "b", 3: 2}, 120),
         (pput(after, 302), 30, {2: "c", 3: 3}, 160)],
    )  # fmt: skip
    run_twice(spark, config, wh / "app" / "events")
    assert read(spark, wh / "app" / "events")[1] == [(20, "b", 2, 120), (30, "c", 3, 160)]


def test_truncate_and_add_partition(spark, tmp_path: Path) -> None:
    before = partitioned([(301, "p0", "10"), (302, "p1", "100")])
    truncated = partitioned([(301, "p0", "10"), (303, "p1", "100")])
    added = partitioned([(301, "p0", "10"), (303, "p1", "100"), (304, "p2", "MAXVALUE")])
    config, wh = setup(
        tmp_path, [("app", before)],
        [ddl_job(1, TRUNCATE_PARTITION, "app", truncated, 150), ddl_job(2, ADD_PARTITION, "app", added, 170)],
        [(pput(before, 301), 1, {2: "a", 3: 1}, 110), (pput(before, 302), 20, {2: "b", 3: 2}, 120),
         (pput(truncated, 303), 21, {2: "c", 3: 3}, 160), (pput(added, 304), 500, {2: "d", 3: 4}, 180)],
    )  # fmt: skip
    run_twice(spark, config, wh / "app" / "events")
    assert read(spark, wh / "app" / "events")[1] == [(1, "a", 1, 110), (21, "c", 3, 160), (500, "d", 4, 180)]


def test_reorganize_partition_keeps_the_rows_and_ignores_its_copy(spark, tmp_path: Path) -> None:
    """The reorg copies rows into the new ids before the job is done (at 140): those events are not the
    table's yet, so a copied row keeps its commit ts and a row deleted after the copy (double write on the
    old and the new id at 145) stays deleted; the old ids retire at 150, the new ones take the writes."""
    before = partitioned([(301, "p0", "10"), (302, "p1", "100")])
    after = partitioned([(303, "p2", "50"), (304, "p3", "100")])
    job = ddl_job(1, REORGANIZE_PARTITION, "app", after, 150) | {"raw_args": [[301, 302]]}
    cap = Capture(
        tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=400, tables=[("app", before)], jobs=[job]
    )
    cap.put(1, pput(before, 301), 1, {2: "a", 3: 1}, 109, 110).put(
        1, pput(before, 302), 20, {2: "b", 3: 2}, 119, 120
    )
    cap.put(1, pput(after, 303), 1, {2: "a", 3: 1}, 139, 140).put(
        1, pput(after, 303), 20, {2: "b", 3: 2}, 139, 140
    )
    cap.delete(1, 301, 1, 144, 145).delete(1, 303, 1, 144, 145)
    cap.put(1, pput(after, 304), 60, {2: "e", 3: 5}, 169, 170).put(
        1, pput(before, 302), 30, {2: "x", 3: 9}, 174, 175
    )
    cap.init_and_resolve(390).write()
    conf = tmp_path / "job.toml"
    conf.write_text(f'[job]\nname = "ddl"\n[source]\npath = "{tmp_path / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    run_twice(spark, load_config(conf), tmp_path / "wh" / "app" / "events")
    assert read(spark, tmp_path / "wh" / "app" / "events")[1] == [(20, "b", 2, 120), (60, "e", 5, 170)]


def exchange_captures(tmp_path: Path) -> tuple[Path, Capture]:
    """Partition p0 (id 301, id < 10) of app.events and table app.spare (id 400) swap at ts 150, shaped as
    TiDB writes the job: the normal table's id, raw_args [partition id, partitioned table's db id, its id,
    partition name, with validation], the partitioned table's info after it (p0 now has id 400). The first
    capture ends before the job; the second one writes on both new owners' ids after it."""
    before, spare = partitioned([(301, "p0", "10"), (302, "p1", "MAXVALUE")]), users_table(400, "spare")
    after = partitioned([(400, "p0", "10"), (302, "p1", "MAXVALUE")])
    first = Capture(
        tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=140, tables=[("app", before), ("app", spare)]
    )
    first.put(1, pput(before, 301), 1, {2: "a", 3: 1}, 109, 110).put(
        1, pput(before, 302), 30, {2: "c", 3: 3}, 111, 112
    )
    first.put(1, spare, 5, {2: "s", 3: 5}, 119, 120)
    first.init_and_resolve(140).write()
    job = ddl_job(1, EXCHANGE_PARTITION, "app", after, 150, table_id=400) | {
        "raw_args": [301, 2, 300, "p0", True], "schema_state": 0,
        "query": "ALTER TABLE `app`.`events` EXCHANGE PARTITION `p0` WITH TABLE `app`.`spare`",
    }  # fmt: skip
    second = Capture(
        tmp_path / "scans", "s2", checkpoint_ts=140, current_ts=400,
        tables=[("app", before), ("app", spare)], jobs=[job],
    )  # fmt: skip
    second.put(1, pput(after, 302), 20, {2: "b", 3: 2}, 159, 160)
    second.put(1, pput(after, 400), 6, {2: "e", 3: 6}, 161, 162)  # p0's new id: the partitioned table
    second.put(1, pput(spare, 301), 2, {2: "n", 3: 2}, 163, 164)  # p0's old id: now the normal table's
    conf = tmp_path / "job.toml"
    conf.write_text(f'[job]\nname = "ddl"\n[source]\npath = "{tmp_path / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    return conf, second


def test_exchange_partition_swaps_the_rows_of_both_tables(spark, tmp_path: Path) -> None:
    """A first run stops before the job; the second applies it to both tables at ts 150 (one tagged
    commit each) and the writes after it on the ids each table took over; a rerun commits nothing."""
    conf, second = exchange_captures(tmp_path)
    assert main(["run", "--config", str(conf)]) == 0
    events, spare = tmp_path / "wh" / "app" / "events", tmp_path / "wh" / "app" / "spare"
    assert read(spark, events)[1] == [(1, "a", 1, 110), (30, "c", 3, 112)]
    second.init_and_resolve(390).write()
    assert main(["run", "--config", str(conf)]) == 0
    assert read(spark, events)[1] == [
        (5, "s", 5, 120),
        (6, "e", 6, 162),
        (20, "b", 2, 160),
        (30, "c", 3, 112),
    ]
    assert read(spark, spare)[1] == [(1, "a", 1, 110), (2, "n", 2, 164)]
    for path in (events, spare):
        info = delta.read_commit_info(spark, str(path), delta.table_version(spark, str(path)) - 1)
        assert info is not None and '"ddl_job_id":1' in info["userMetadata"]
    versions = [delta.table_version(spark, str(p)) for p in (events, spare)]
    assert main(["run", "--config", str(conf)]) == 0
    assert [delta.table_version(spark, str(p)) for p in (events, spare)] == versions


def test_exchange_partition_with_an_untracked_table_stops_before_any_commit(
    spark, tmp_path: Path, capsys
) -> None:
    """Only the partitioned table tracked: its rows after the job cannot be known, exit 2 naming the job
    and both tables (the query), the table unchanged."""
    conf, second = exchange_captures(tmp_path)
    conf.write_text(conf.read_text() + 'tables = ["app.events"]\n')  # [target] is the last section
    assert main(["run", "--config", str(conf)]) == 0
    path = tmp_path / "wh" / "app" / "events"
    version = delta.table_version(spark, str(path))
    second.init_and_resolve(390).write()
    capsys.readouterr()
    assert main(["run", "--config", str(conf)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "DDL job 1 (EXCHANGE PARTITION, finished at ts 150" in err and "`app`.`spare`" in err, err
    assert delta.table_version(spark, str(path)) == version


def test_common_handle_table_deletes_by_key(spark, tmp_path: Path) -> None:
    table = {
        "id": 400, "name": {"O": "kv", "L": "kv"}, "is_common_handle": True, "state": 5,
        "cols": [column(1, "k", VARCHAR, flag=NOT_NULL | PRI_KEY, flen=16, offset=0, charset="binary"),
                 column(2, "n", BIGINT, flen=20, offset=1)],
        "index_info": [{"id": 1, "idx_name": {"O": "PRIMARY", "L": "primary"}, "is_primary": True, "is_unique": True,
                        "state": 5, "idx_cols": [{"name": {"O": "k", "L": "k"}, "offset": 0, "length": -1}]}],
    }  # fmt: skip
    from backfill.codec import TableSchema, encode_row, record_key

    schema = TableSchema.from_table_info(table)
    k = schema.by_name["k"]
    cap = Capture(tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=400, tables=[("app", table)])
    for i, (name, commit) in enumerate([(b"a", 110), (b"b", 120)]):
        cap.event(1, "COMMITTED", start_ts=commit - 1, commit_ts=commit, op_type="PUT",
                  key=record_key(400, [(k, name)]), value=encode_row(schema, {1: name, 2: i}))  # fmt: skip
    cap.event(
        1,
        "COMMITTED",
        start_ts=129,
        commit_ts=130,
        op_type="DELETE",
        key=record_key(400, [(k, b"a")]),
        value=b"",
    )
    cap.init_and_resolve(390).write()
    conf = tmp_path / "job.toml"
    conf.write_text(f'[source]\npath = "{tmp_path / "scans"}"\n[target]\nwarehouse = "{tmp_path / "wh"}"\n')
    run_backfill(spark, load_config(conf))
    assert read(spark, tmp_path / "wh" / "app" / "kv")[1] == [(b"b", 1, 120)]
