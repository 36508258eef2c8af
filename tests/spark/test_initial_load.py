"""`[source.initial]`: a TiCDC storage-sink job whose tables start from a Dumpling export (written by
`tidbsim.dumpling`) at its TSO; the sink's changes at or below the TSO are skipped, later ones applied.
Bad input (a cut CSV line, a schema the parser rejects, a metadata file without a TSO) exits 2 naming the
file, with nothing committed."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import pyarrow as pa
import pytest

from backfill.cli import main
from backfill.clock import StageClock
from backfill.initial import load
from backfill.run import run_backfill
from tests.storage_sink import SinkFolder, csv_line
from tidbsim.dumpling import ExportedTable, write_export
from tidelake import delta
from tidelake.config import load_config
from tidelake.errors import InputError

pytestmark = pytest.mark.spark

TSO = 150
USERS_SQL = (
    "CREATE TABLE `users` (\n  `id` int NOT NULL,\n  `name` varchar(32) DEFAULT NULL,\n  `score` int DEFAULT NULL,\n"
    "  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
    "COLLATE=utf8mb4_bin"
)
KINDS_SQL = (
    "CREATE TABLE `kinds` (\n  `k` bigint unsigned NOT NULL,\n  `amount` decimal(10,2) DEFAULT NULL,\n"
    "  `at` datetime(3) DEFAULT NULL,\n  `stamp` timestamp NULL DEFAULT NULL,\n  `day` date DEFAULT NULL,\n"
    "  `raw` varbinary(8) DEFAULT NULL,\n  PRIMARY KEY (`k`) /*T![clustered_index] NONCLUSTERED */\n)"
)


def export(
    tmp_path: Path, *, header: bool = True, compression: str | None = None, file_type: str = "csv",
    users: pa.Table | None = None,
) -> Path:  # fmt: skip
    if users is None:
        users = pa.table({"id": [1, 2, 3], "name": ['a,"q"', None, "x\ny\\"], "score": [10, 20, 30]})
    kinds = pa.table(
        {
            "k": pa.array([decimal.Decimal(2**64 - 1)], pa.decimal128(20, 0)),
            "amount": pa.array([decimal.Decimal("-12.50")], pa.decimal128(10, 2)),
            "at": [dt.datetime(2026, 1, 2, 3, 4, 5, 678000)],
            "stamp": [dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)],
            "day": [dt.date(2026, 1, 2)],
            "raw": [b'\x00\xff"\\\n']},
    )  # fmt: skip
    tables = [
        ExportedTable("app", "users", USERS_SQL, users),
        ExportedTable("app", "kinds", KINDS_SQL, kinds),
        ExportedTable("app", "untracked", USERS_SQL.replace("`users`", "`untracked`"), users),
    ]
    return write_export(
        tmp_path / "dump", TSO, tables, header=header, compression=compression, rows_per_file=2,
        file_type=file_type,
    )  # fmt: skip


def job(tmp_path: Path, dump: Path, extra: str = "") -> Path:
    path = tmp_path / "job.toml"
    path.write_text(
        f'[job]\nname = "snap"\n[source]\nkind = "ticdc-storage"\npath = "{tmp_path / "sink"}"\n'
        f'[source.storage]\nprotocol = "csv"\n[source.initial]\ndumpling = "{dump}"\n{extra}'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\ntables = ["app.users", "app.kinds"]\n'
    )
    return path


def sink(tmp_path: Path, start: int = 100) -> None:
    folder = SinkFolder(tmp_path / "sink")
    folder.schema("users", start)
    folder.data("users", start, 1, (csv_line("I", "users", 110, 1, "before the snapshot", 1) if start < 110 else "")
                + csv_line("U", "users", 160, 2, "b2", 21) + csv_line("I", "users", 170, 4, "d", 40))  # fmt: skip
    folder.checkpoint(200)


@pytest.mark.parametrize(("file_type", "compression"), [("csv", "gz"), ("sql", "snappy")])
def test_tables_start_from_the_export_and_continue_from_its_tso(
    spark, tmp_path, capsys, file_type, compression
) -> None:
    """CSV or INSERT statements (`--filetype sql`), typed alike."""
    sink(tmp_path)
    conf = job(tmp_path, export(tmp_path, compression=compression, file_type=file_type))
    result = run_backfill(spark, load_config(conf))
    assert result.resolved_ts == 200
    users = str(tmp_path / "wh" / "app" / "users")
    got = sorted(tuple(r) for r in spark.read.format("delta").load(users).collect())
    assert got == [(1, 'a,"q"', 10, TSO), (2, "b2", 21, 160), (3, "x\ny\\", 30, TSO), (4, "d", 40, 170)]
    assert delta.recorded_txn_version(spark, users, "tidelake:snap") == 200
    first = json.loads(delta.commit_user_metadata(spark, users, 1) or "{}")
    assert first["step"] == "snapshot" and first["snapshot"]["tso"] == TSO
    kinds = spark.read.format("delta").load(str(tmp_path / "wh" / "app" / "kinds")).collect()
    assert [tuple(r) for r in kinds] == [
        (
            None,
            decimal.Decimal(2**64 - 1),
            decimal.Decimal("-12.50"),
            dt.datetime(2026, 1, 2, 3, 4, 5, 678000),
            dt.datetime(2026, 1, 2, 3, 4, 5),
            dt.date(2026, 1, 2),
            bytearray(b'\x00\xff"\\\n'),
            TSO,
        )
    ]  # fmt: skip  (a NONCLUSTERED key: `_tidb_rowid` first, NULL as the TiCDC sources leave it)
    assert not (tmp_path / "wh" / "app" / "untracked").exists()
    assert main(["status", "--config", str(conf), "--json"]) == 0
    started = {t["table"]: t["started_from"] for t in json.loads(capsys.readouterr().out)["tables"]}
    assert started["users"] == {"kind": "dumpling", "path": f"file:{tmp_path / 'dump'}", "tso": TSO}


@pytest.mark.parametrize(
    ("damage", "needles"),
    [
        ("cut", ("app.users.000001.csv:2", "no line end")),
        ("schema", ("app.users-schema.sql", "CREATE TABLE cannot be read")),
        ("metadata", ("metadata", "no snapshot TSO")),
        ("cut-sql", ("app.users.000000001.sql:3", "the statement is not finished")),
    ],
)
def test_bad_export_exits_2_naming_the_file_and_commits_nothing(
    spark, tmp_path, capsys, damage, needles
) -> None:
    sink(tmp_path)
    dump = export(tmp_path, header=False, file_type="sql" if damage == "cut-sql" else "csv")
    if damage == "cut-sql":
        data = dump / "app.users.000000001.sql"
        data.write_bytes(data.read_bytes()[:-5])
    elif damage == "cut":
        data = dump / "app.users.000000001.csv"
        data.write_bytes(data.read_bytes()[:-3])
        needles = ("app.users.000000001.csv:1", "no line end")
    elif damage == "schema":
        (dump / "app.users-schema.sql").write_text("CREATE TABLE `users` (`id` int NOT NULL,")
    else:
        (dump / "metadata").write_text("Started dump at: 2026-01-01 00:00:00\n")
    assert main(["run", "--config", str(job(tmp_path, dump, "header = false\n"))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    for needle in needles:
        assert needle in err, err
    assert not list(tmp_path.glob("wh/*/*/_delta_log"))


@pytest.mark.parametrize("case", ["gap", "missing"])
def test_a_changefeed_started_above_the_tso_or_a_table_missing_from_the_export_stops(
    spark, tmp_path, capsys, case
) -> None:
    """The sink's first table version (no query: the changefeed's start-ts) is above the export's TSO; a
    tracked table the sink had from its start is not in the export."""
    sink(tmp_path, start=155 if case == "gap" else 100)
    dump = export(tmp_path)
    if case == "missing":
        for name in dump.glob("app.kinds*"):
            name.unlink()
        SinkFolder(tmp_path / "sink").schema("kinds", 100, db="app")
    assert main(["run", "--config", str(job(tmp_path, dump))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    if case == "gap":
        assert "app.users: the storage sink begins at table version 155" in err, err
        assert "above the table's checkpoint 150" in err, err
    else:
        assert "app.kinds: a tracked table that predates the changefeed" in err, err
        assert "exists at the snapshot's TSO 150" in err, err


# users of 40 rows in 20 files: the largest table, written straight from its decode into its commit; kinds
# (1 row) goes through the cache
MANY_USERS = pa.table({"id": list(range(1, 41)), "name": [f"u{i}" for i in range(1, 41)], "score": [7] * 40})


def written_directly(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables `_commit_written` wrote (the real function runs)."""
    names: list[str] = []
    real = load._commit_written

    def spy(spark, config, table, *args):
        names.append(table.schema.name)
        return real(spark, config, table, *args)

    monkeypatch.setattr(load, "_commit_written", spy)
    return names


def snapshot_commits(spark, tmp_path: Path, table: str) -> tuple[dict, dict]:
    """The userMetadata of versions 0 (the create) and 1 (the snapshot) of `app.<table>`."""
    path = str(tmp_path / "wh" / "app" / table)
    first, second = (json.loads(delta.commit_user_metadata(spark, path, v) or "{}") for v in (0, 1))
    return first, second


def test_the_largest_table_goes_straight_into_its_commit_which_records_its_rows(
    spark, tmp_path, monkeypatch
) -> None:
    """Version 0 creates each table, version 1 is its snapshot commit with the rows it holds (for the
    largest, counted from the files its write wrote), as the cached tables' are."""
    written = written_directly(monkeypatch)
    dump = export(tmp_path, users=MANY_USERS)
    loaded = load.load_initial(spark, load_config(job(tmp_path, dump)), StageClock())
    assert written == ["users"]
    assert loaded is not None and dict(loaded.loaded) == {"app.users": 40, "app.kinds": 1}
    for table, rows in (("users", 40), ("kinds", 1)):
        path = str(tmp_path / "wh" / "app" / table)
        assert spark.read.format("delta").load(path).count() == rows
        assert delta.table_version(spark, path) == 1
        create, snapshot = snapshot_commits(spark, tmp_path, table)
        assert create["step"] == "create", create
        assert (snapshot["step"], snapshot["rows"]["upserted"]) == ("snapshot", rows), snapshot
        assert load.started_from(spark, path) == {"kind": "dumpling", "path": f"file:{dump}", "tso": TSO}


def test_bad_input_in_the_largest_table_leaves_no_table_and_the_rerun_loads_each_once(
    spark, tmp_path, capsys, monkeypatch
) -> None:
    """The largest table's write fails on a cut line after its table was created: the table is removed
    again and no other table is created; the rerun, with the file whole, loads both tables once."""
    sink(tmp_path)
    written = written_directly(monkeypatch)
    dump = export(tmp_path, users=MANY_USERS)
    data = dump / "app.users.000000019.csv"
    whole = data.read_bytes()
    data.write_bytes(whole[:-3])
    conf = str(job(tmp_path, dump))
    assert main(["run", "--config", conf]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "app.users.000000019.csv:" in err and "no line end" in err, err
    assert written == ["users"]
    assert not (tmp_path / "wh" / "app" / "users").exists()
    assert not list(tmp_path.glob("wh/*/*/_delta_log"))

    data.write_bytes(whole)
    assert main(["run", "--config", conf]) == 0
    users = spark.read.format("delta").load(str(tmp_path / "wh" / "app" / "users"))
    assert sorted(r.id for r in users.collect()) == list(range(1, 41))
    assert users.filter("id = 2").first().name == "b2"  # the sink's update after the TSO
    assert snapshot_commits(spark, tmp_path, "users")[1]["rows"]["upserted"] == 40
    assert spark.read.format("delta").load(str(tmp_path / "wh" / "app" / "kinds")).count() == 1


def test_a_table_a_killed_run_left_at_its_creation_is_loaded_once_and_never_removed(spark, tmp_path) -> None:
    """A run killed while it wrote the largest table leaves it at version 0, with data files no commit
    lists: bad input in the next run leaves that table as it found it (this run did not create it), and
    the run after loads it once (the files left are not its rows)."""
    dump = export(tmp_path, users=MANY_USERS)
    conf = load_config(job(tmp_path, dump))
    book = load.CheckpointBook(spark, conf.target.warehouse, conf.job.app_id)
    (users,) = load._tables_to_load(spark, str(dump), ("app.users",), book)
    assert load._create(spark, conf, users)
    left = spark.createDataFrame(
        [(99, "left", 1, TSO)], "id INT, name STRING, score INT, _tidb_commit_ts BIGINT"
    )
    left.write.mode("append").parquet(users.path)
    data = dump / "app.users.000000019.csv"
    whole = data.read_bytes()
    data.write_bytes(whole[:-3])
    with pytest.raises(InputError, match="app.users.000000019.csv"):
        load.load_initial(spark, conf, StageClock())
    assert delta.table_version(spark, users.path) == 0
    assert not (tmp_path / "wh" / "app" / "kinds").exists()

    data.write_bytes(whole)
    loaded = load.load_initial(spark, conf, StageClock())
    assert loaded is not None and dict(loaded.loaded) == {"app.users": 40, "app.kinds": 1}
    got = spark.read.format("delta").load(users.path).collect()
    assert sorted(r.id for r in got) == list(range(1, 41))
    assert delta.table_version(spark, users.path) == 1
