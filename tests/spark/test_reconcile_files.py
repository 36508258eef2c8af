"""reconcile against upstreams in files: the simulator's expected state, Parquet, and a Dumpling export."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reconcile.cli import main
from tidelake import delta

pytestmark = pytest.mark.spark

APP = "tidelake:files"
SCHEMA = "id BIGINT, name STRING, price DECIMAL(10,2), seen TIMESTAMP, doc STRING, raw BINARY, _tidb_commit_ts BIGINT"
ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("price", pa.decimal128(10, 2)),
        ("seen", pa.timestamp("us", tz="UTC")),
        ("doc", pa.string()),
        ("raw", pa.binary()),
        ("_tidb_commit_ts", pa.int64()),
    ]
)
T0 = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)


def rows(n: int, *, bump: int | None = None) -> list[tuple]:
    out = []
    for i in range(1, n + 1):
        name = None if i % 7 == 0 else ("" if i % 5 == 0 else f'név {i}, "q"\\')
        price = Decimal(i * 3).scaleb(-2) + (Decimal("0.01") if i == bump else 0)
        doc = None if i % 9 == 0 else json.dumps({"i": i, "tags": ["a", "b"]}, separators=(", ", ": "))
        out.append((i, name, price, T0 + dt.timedelta(seconds=i), doc, bytes([i % 256, 0, 10]), 5))
    return out


def write_delta(spark, path: Path, data: list[tuple], resolved_ts: int) -> None:
    """A commit as the backfill makes one (a fresh app id each time: rewriting a ts must not be skipped)."""
    df = spark.createDataFrame(data, SCHEMA)
    app = f"{APP}:{uuid.uuid4().hex}"
    with delta.delta_transaction(spark, app, resolved_ts, {"resolved_ts": resolved_ts, "checkpoint_ts": 1}):
        df.write.format("delta").mode("overwrite").save(str(path))


def write_expected(root: Path, scans: list[tuple[str, int, list[tuple]]], key: list[str]) -> None:
    index = []
    for scan_id, resolved, data in scans:
        target = root / scan_id / "shop" / "items.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        schema = ARROW.with_metadata({b"tidelake.primary_key": json.dumps(key).encode()})
        pq.write_table(
            pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in data], schema), target
        )
        index.append(
            {"scan_id": scan_id, "checkpoint_ts": 0, "current_ts": resolved, "resolved_ts": resolved}
        )
    (root / "index.json").write_text(
        json.dumps({"format": "tidelake.expected", "version": 1, "scans": index})
    )


def config(tmp_path: Path, warehouse: Path, upstream: Path, fmt: str, **extra: object) -> Path:
    lines = [
        '[job]\nname = "files"',
        f'[source]\npath = "unused"\n[target]\nwarehouse = "{warehouse}"',
        "[reconcile]\nchunk_size = 10\nsample_size = 5",
        *[f"{k} = {json.dumps(v)}" for k, v in extra.items()],
        f'[reconcile.upstream]\nkind = "files"\nformat = "{fmt}"\npath = "{upstream}"',
    ]
    path = tmp_path / "reconcile.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(capsys, cfg: Path, *flags: str) -> tuple[int, dict]:
    code = main(["run", "--config", str(cfg), "--json", *flags])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_expected_state_is_compared_at_the_scan_of_the_delta_resolved_ts(spark, tmp_path, capsys) -> None:
    expected, warehouse = tmp_path / "expected", tmp_path / "wh"
    write_expected(expected, [("scan-1", 100, rows(30)), ("scan-2", 200, rows(40))], ["id"])
    write_delta(spark, warehouse / "shop" / "items", rows(30), 100)
    write_delta(spark, warehouse / "shop" / "items", rows(40, bump=33), 200)
    cfg = config(tmp_path, warehouse, expected, "expected")

    code, doc = run(capsys, cfg)
    table = doc["tables"][0]
    assert code == 1 and table["upstream_ts"] == 200 and table["delta_resolved_ts"] == 200
    assert (table["missing"], table["extra"], table["changed"]) == (0, 0, 1)
    assert table["samples"]["changed"][0] == {
        "key": {"id": 33}, "columns": ["price"], "upstream": {"price": "0.99"}, "delta": {"price": "1.00"},
    }  # fmt: skip

    code, doc = run(capsys, cfg, "--at-ts", "100")  # Delta version 0 against scan-1
    assert code == 0 and doc["tables"][0]["delta_version"] == 0 and doc["tables"][0]["upstream_rows"] == 30

    code, doc = run(capsys, cfg, "--at-ts", "150")
    assert code == 2 and "no Delta version has resolved ts 150" in doc["tables"][0]["error"]


@pytest.mark.parametrize("interpreted", [True, False], ids=["small-interpreted", "compiled"])
def test_expected_state_repair_and_recheck(spark, tmp_path, capsys, monkeypatch, interpreted) -> None:
    """Also: a small table is compared (and repaired) without code generation, a bigger one with it
    (`tidelake.spark.execution_conf`), to the same result, and the session keeps its own setting."""
    import reconcile.engine as engine
    import tidelake.spark

    if not interpreted:
        monkeypatch.setattr(tidelake.spark, "SMALL_TABLE_BYTES", -1)
    seen: list[str] = []
    by_buckets = engine._by_buckets

    def recording(session, *args, **kwargs):
        seen.append(session.conf.get("spark.sql.codegen.wholeStage"))
        return by_buckets(session, *args, **kwargs)

    monkeypatch.setattr(engine, "_by_buckets", recording)
    expected, warehouse = tmp_path / "expected", tmp_path / "wh"
    write_expected(expected, [("scan-1", 100, rows(25))], ["id"])
    broken = [r for r in rows(25, bump=3) if r[0] != 4] + [(99, "x", Decimal("1.00"), T0, None, b"", 5)]
    write_delta(spark, warehouse / "shop" / "items", broken, 100)
    cfg = config(tmp_path, warehouse, expected, "expected")
    code, doc = run(capsys, cfg, "--repair")
    table = doc["tables"][0]
    assert code == 0 and (table["missing"], table["extra"], table["changed"]) == (1, 1, 1)
    assert table["repair"]["remaining"] == {"missing": 0, "extra": 0, "changed": 0}
    assert run(capsys, cfg)[0] == 0
    assert seen == ["false" if interpreted else "true"] * 2
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"


def test_expected_tables_keyed_by_the_hidden_row_id_compare_as_multisets(spark, tmp_path, capsys) -> None:
    expected, warehouse = tmp_path / "expected", tmp_path / "wh"
    data = [(r[0] % 3, *r[1:]) for r in rows(12)]  # ids repeat: only _tidb_rowid told rows apart
    write_expected(expected, [("scan-1", 100, data)], ["_tidb_rowid"])
    write_delta(spark, warehouse / "shop" / "items", data[:-1], 100)
    code, doc = run(capsys, config(tmp_path, warehouse, expected, "expected"))
    table = doc["tables"][0]
    assert code == 1 and table["strategy"] == "bucket"
    assert (table["missing"], table["extra"], table["changed"]) == (1, 0, 0)


def test_parquet_upstream(spark, tmp_path, capsys) -> None:
    upstream, warehouse = tmp_path / "pq", tmp_path / "wh"
    target = upstream / "shop" / "items.parquet"
    target.parent.mkdir(parents=True)
    schema = ARROW.with_metadata({b"tidelake.primary_key": b'["id"]'})
    pq.write_table(
        pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in rows(20)], schema), target
    )
    write_delta(spark, warehouse / "shop" / "items", rows(20), 100)
    code, doc = run(capsys, config(tmp_path, warehouse, upstream, "parquet"))
    assert code == 0 and doc["tables"][0]["upstream_rows"] == 20


DUMP_SCHEMA = """/*!40101 SET NAMES binary*/;
CREATE TABLE `items` (
  `id` bigint(20) NOT NULL,
  `name` varchar(64) DEFAULT NULL,
  `price` decimal(10,2) DEFAULT NULL,
  `seen` timestamp(6) NULL DEFAULT NULL,
  `doc` json DEFAULT NULL,
  `raw` varbinary(8) DEFAULT NULL,
  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
"""


def dumpling_field(value: object) -> str:
    """One field as Dumpling writes it (backslash escapes, strings enclosed, NULL as a bare \\N)."""
    if value is None:
        return "\\N"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        value = value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    escaped = "".join(
        {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\0": "\\0"}.get(c, c) for c in str(value)
    )
    return f'"{escaped}"'


def write_dump(root: Path, data: list[tuple], tso: int) -> None:
    root.mkdir(parents=True)
    (root / "metadata").write_text(
        "Started dump at: 2024-05-06 07:08:09\nSHOW MASTER STATUS:\n\tLog: tidb-binlog\n"
        f"\tPos: {tso}\n\tGTID:\n\nFinished dump at: 2024-05-06 07:08:10\n"
    )
    (root / "shop-schema-create.sql").write_text("CREATE DATABASE `shop`;\n")
    (root / "shop.items-schema.sql").write_text(DUMP_SCHEMA)
    header = '"id","name","price","seen","doc","raw"'
    for index, part in enumerate((data[: len(data) // 2], data[len(data) // 2 :])):
        lines = [header] + [",".join(dumpling_field(v) for v in r[:6]) for r in part]
        (root / f"shop.items.{index:09d}.csv").write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))


def test_dumpling_export_at_its_snapshot_ts(spark, tmp_path, capsys) -> None:
    dump, warehouse = tmp_path / "dump", tmp_path / "wh"
    data = rows(30)
    data[2] = (3, 'multi\nline\r "quoted" \\N back\\slash', *data[2][2:])
    data[5] = (6, "\\N", *data[5][2:])  # the text \N, not a NULL
    write_dump(dump, data, 200)
    write_delta(spark, warehouse / "shop" / "items", data, 100)
    write_delta(spark, warehouse / "shop" / "items", data, 200)
    cfg = config(tmp_path, warehouse, dump, "dumpling")
    code, doc = run(capsys, cfg)
    table = doc["tables"][0]
    assert code == 0, table
    assert table["upstream_ts"] == 200 and table["delta_version"] == 1 and table["upstream_rows"] == 30

    changed = list(data)
    changed[7] = (8, "other", *data[7][2:])
    write_delta(spark, warehouse / "shop" / "items", changed, 200)
    code, doc = run(capsys, cfg)
    assert code == 1 and doc["tables"][0]["samples"]["changed"][0]["key"] == {"id": 8}


def test_each_table_reads_the_scan_of_its_own_ts_in_any_order(spark, tmp_path) -> None:
    """The upstream keeps no "current scan": what one table is compared at never leaks into another's
    reads, whatever the order of the calls (tables may be compared side by side)."""
    from reconcile.encoding import FloatDigits
    from reconcile.upstream.files import FilesUpstream
    from tidelake.config import load_config

    expected = tmp_path / "expected"
    write_expected(expected, [("scan-1", 100, rows(30)), ("scan-2", 200, rows(40))], ["id"])
    settings = load_config(config(tmp_path, tmp_path / "wh", expected, "expected"))
    upstream = FilesUpstream(spark, settings.reconcile.upstream)
    late = upstream.schema("shop", "items", upstream.upstream_ts(None, 200))
    early = upstream.schema("shop", "items", upstream.upstream_ts(None, 100))
    digits = FloatDigits.for_tolerance(0)
    with upstream.open_table(late, late.columns, digits, 200) as reader:
        assert reader.df.count() == 40
    with upstream.open_table(early, early.columns, digits, 100) as reader:
        assert reader.df.count() == 30


def test_both_sides_bucket_checksums_in_one_job_equal_each_side_alone(spark) -> None:
    from reconcile.encoding import FloatDigits, JsonMode
    from reconcile.schema import Comparison, TableSchema, column_from_spark
    from reconcile.sparkside import SparkSide, bucket_checksums_of_both

    up_df = spark.createDataFrame(rows(60), SCHEMA).drop("_tidb_commit_ts")
    down_df = spark.createDataFrame([r for r in rows(60, bump=7) if r[0] != 11], SCHEMA).drop(
        "_tidb_commit_ts"
    )
    columns = tuple(
        column_from_spark(f.name, f.dataType.simpleString(), f.nullable) for f in up_df.schema.fields
    )
    comparison = Comparison(TableSchema("shop", "items", columns, ("id",)), columns)
    digits = FloatDigits.for_tolerance(0)
    up, down = (SparkSide(df, comparison, JsonMode.NORMALIZED, digits) for df in (up_df, down_df))
    key = comparison.key

    together = bucket_checksums_of_both(up, down, 1, key)

    alone = (up.bucket_checksums(1, key), down.bucket_checksums(1, key))
    assert together == alone
    assert sum(n for n, _ in together[0].values()) == 60 and sum(n for n, _ in together[1].values()) == 59
    assert together[0] != together[1]


def test_tables_side_by_side_report_what_one_at_a_time_reports(spark, tmp_path, capsys) -> None:
    """Four tables, two with their own differences, compared and repaired three at a time: every table's
    result is its own (no session setting or frame crosses over) and in the upstream's table order."""
    expected, warehouse = tmp_path / "expected", tmp_path / "wh"
    schema = ARROW.with_metadata({b"tidelake.primary_key": b'["id"]'})
    for t in range(4):
        target = expected / "scan-1" / "shop" / f"t{t}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        data = rows(20 + t)
        pq.write_table(
            pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in data], schema), target
        )
        damaged = [r for r in rows(20 + t, bump=t + 1) if r[0] != t + 5] if t % 2 else data
        write_delta(spark, warehouse / "shop" / f"t{t}", damaged, 100)
    (expected / "index.json").write_text(
        json.dumps(
            {
                "format": "tidelake.expected",
                "version": 1,
                "scans": [{"scan_id": "scan-1", "resolved_ts": 100}],
            }
        )
    )

    def compared(at_once: int, *flags: str) -> list[dict]:
        code, doc = run(
            capsys, config(tmp_path, warehouse, expected, "expected", tables_at_once=at_once), *flags
        )
        assert code == (0 if "--repair" in flags else 1)
        return [{k: v for k, v in t.items() if "seconds" not in k} for t in doc["tables"]]

    alone = compared(1)
    assert [t["table"] for t in alone] == [f"shop.t{t}" for t in range(4)]
    assert [(t["missing"], t["changed"]) for t in alone] == [(0, 0), (1, 1), (0, 0), (1, 1)]
    assert [t["samples"]["changed"][0]["key"] for t in alone[1::2]] == [{"id": 2}, {"id": 4}]
    assert compared(3) == alone
    repaired = compared(3, "--repair")
    assert [t["repair"]["remaining"] for t in repaired[1::2]] == [
        {"missing": 0, "extra": 0, "changed": 0}
    ] * 2
    assert run(capsys, config(tmp_path, warehouse, expected, "expected", tables_at_once=3))[0] == 0
