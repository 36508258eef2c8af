"""Bad input: exit 2, a message naming the place, and every table left as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from backfill.cli import main
from backfill.codec import record_key
from tests.captures import Capture, users_table
from tidelake import delta

pytestmark = pytest.mark.spark

USERS = users_table(100, "users")
OTHER = users_table(200, "other")


@pytest.fixture
def landed(spark, tmp_path: Path):
    """A warehouse where a first capture already landed; returns (config path, capture root, versions)."""
    root = tmp_path / "scans"
    s1 = Capture(root, "s1", checkpoint_ts=100, current_ts=200, tables=[("app", USERS), ("app", OTHER)])
    s1.put(1, USERS, 1, {2: "a", 3: 1}, 110, 111).put(1, OTHER, 1, {2: "b", 3: 2}, 110, 111)
    s1.init_and_resolve(190).write()
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "bad"\n[source]\npath = "{root}"\n[target]\nwarehouse = "{tmp_path / "wh"}"\n'
    )
    assert main(["run", "--config", str(conf)]) == 0
    return conf, root, versions(spark, tmp_path)


def versions(spark, tmp_path: Path) -> dict[str, int]:
    return {n: delta.table_version(spark, str(tmp_path / "wh" / "app" / n)) for n in ("users", "other")}


def next_capture(root: Path) -> Capture:
    cap = Capture(root, "s2", checkpoint_ts=180, current_ts=300, tables=[("app", USERS), ("app", OTHER)])
    return cap.put(1, OTHER, 2, {2: "ok", 3: 3}, 210, 211)


def fails(conf: Path, capsys, *needles: str) -> str:
    assert main(["run", "--config", str(conf)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    for needle in needles:
        assert needle in err, err
    return err


def test_corrupt_parquet_file_is_named(spark, tmp_path, landed, capsys) -> None:
    conf, root, before = landed
    folder = next_capture(root).init_and_resolve().write()
    (folder / "events" / "part-0.parquet").write_bytes(b"PAR1 this is not parquet")
    fails(conf, capsys, "part-0.parquet", "cannot read events")
    assert versions(spark, tmp_path) == before


def test_truncated_row_bytes_name_table_handle_and_offset(spark, tmp_path, landed, capsys, decode_on) -> None:
    conf, root, before = landed
    cap = next_capture(root)
    cap.put(1, USERS, 7, {2: "truncate me", 3: 5}, 220, 221)
    cap.events[-1]["value"] = cap.events[-1]["value"][:-4]
    cap.init_and_resolve().write()
    fails(conf, capsys, "table 100", "handle 7", "offset")
    assert versions(spark, tmp_path) == before, "no table may advance when one row is bad"


def test_unknown_table_id(spark, tmp_path, landed, capsys) -> None:
    conf, root, before = landed
    cap = next_capture(root)
    cap.event(
        1, "COMMITTED", start_ts=220, commit_ts=221, op_type="DELETE", key=record_key(999, 4), value=b""
    )
    cap.init_and_resolve().write()
    fails(conf, capsys, "table id 999", "s2", "region 1", record_key(999, 4).hex())
    assert versions(spark, tmp_path) == before


def test_missing_table_info(spark, tmp_path, landed, capsys) -> None:
    conf, root, before = landed
    folder = next_capture(root).init_and_resolve().write()
    (folder / "schema" / "tables.jsonl").unlink()
    fails(conf, capsys, "s2/schema/tables.jsonl", "missing")
    assert versions(spark, tmp_path) == before


def test_commit_without_prewrite_after_initialized(spark, tmp_path, landed, capsys) -> None:
    conf, root, before = landed
    cap = next_capture(root)
    cap.event(1, "INITIALIZED")
    cap.event(1, "COMMIT", start_ts=230, commit_ts=231, op_type="PUT", key=record_key(100, 9))
    cap.write()
    fails(
        conf, capsys, "scan s2", "region 1", record_key(100, 9).hex(), "commit_ts 231", "without a prewrite"
    )
    assert versions(spark, tmp_path) == before


def test_resolved_ts_that_goes_back(spark, tmp_path, landed, capsys) -> None:
    conf, root, before = landed
    cap = next_capture(root)
    cap.event(1, "INITIALIZED").event(1, "RESOLVED", resolved_ts=250).event(1, "RESOLVED", resolved_ts=240)
    cap.write()
    fails(conf, capsys, "region 1", "resolved ts goes back from 250 to 240")
    assert versions(spark, tmp_path) == before


def test_checkpoint_older_than_every_capture(spark, tmp_path, landed, capsys) -> None:
    conf, root, before = landed
    shutil.rmtree(root / "s1")
    later = Capture(root, "s3", checkpoint_ts=250, current_ts=300, tables=[("app", USERS), ("app", OTHER)])
    later.init_and_resolve().write()
    fails(
        conf, capsys, "checkpoint ts 190 is older than every available capture", "starts at checkpoint ts 250"
    )
    assert versions(spark, tmp_path) == before


def test_incomplete_capture_without_success_is_ignored(spark, tmp_path, landed, capsys) -> None:
    conf, root, before = landed
    next_capture(root).init_and_resolve().write(success=False)
    assert main(["run", "--config", str(conf)]) == 0
    assert versions(spark, tmp_path) == before


def test_a_row_checksum_mismatch_names_table_key_and_commit_ts(
    spark, tmp_path, landed, capsys, decode_on
) -> None:
    """TiDB v7.1+ row checksum: a value whose bytes do not match it is a data error; the target stays."""
    from backfill.codec import TableSchema, encode_row
    from backfill.codec.checksum import append_raw_checksum

    conf, root, before = landed
    cap = next_capture(root)
    key = record_key(100, 9)
    good = append_raw_checksum(key, encode_row(TableSchema.from_table_info(USERS), {1: 9, 2: "z", 3: 9}))
    cap.event(1, "COMMITTED", start_ts=220, commit_ts=221, op_type="PUT", key=key, value=good)
    key = record_key(100, 10)
    value = append_raw_checksum(key, encode_row(TableSchema.from_table_info(USERS), {1: 10, 2: "y", 3: 1}))
    value = value[:-6] + bytes([value[-6] ^ 0x02]) + value[-5:]  # one bit of the column data
    cap.event(1, "COMMITTED", start_ts=230, commit_ts=231, op_type="PUT", key=key, value=value)
    cap.init_and_resolve().write()
    fails(conf, capsys, "app.users", "checksum mismatch", f"key {key.hex()}", "commit_ts 231")
    assert versions(spark, tmp_path) == before
