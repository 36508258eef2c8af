"""Clustered string keys under `_ci` collations through kv-scan: the record key holds sort keys, so key
columns come from the row value, a DELETE's from its old value, and a respelled key ('abc' -> 'ABC', one
record key) leaves only the new spelling in Delta (the before/after key rule)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backfill.run import run_backfill
from backfill.sources.kvscan.format import EVENTS_DIR
from tests.expected import warehouse_differences
from tidbsim import SimulationConfig, load_index, simulate
from tidelake.config import load_config
from tidelake.errors import InputError

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COLLATIONS = ("utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_bin")


def _simulate(out: Path, seed: int) -> None:
    result = simulate(
        SimulationConfig(
            out=out, seed=seed, tables=0, rows=30, txns=100, scans=2, ddls_per_scan=1,
            ddl_kinds=("add_column", "drop_column", "modify_column", "truncate_table"),
            collation_tables=COLLATIONS,
        )
    )  # fmt: skip
    assert result.stats["pk_respellings"] > 5, result.stats


def _config(tmp_path: Path, out: Path):
    conf = tmp_path / "job.toml"
    conf.write_text(f'[job]\nname = "sim"\n[source]\npath = "{out / "scans"}"\n'
                    f'[target]\nwarehouse = "{tmp_path / "wh"}"\n')  # fmt: skip
    return load_config(conf)


@pytest.mark.drill  # long tier (`pytest --drill`); CI proves collation keys in sources_agree and the tests below
def test_capture_by_capture_and_all_at_once_reach_the_expected_state(spark, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    _simulate(out, seed=7)
    config = _config(tmp_path, out)
    for scan in load_index(out):
        result = run_backfill(spark, config, until_ts=scan["resolved_ts"])
        assert result.resolved_ts == scan["resolved_ts"], result.to_dict()
        assert warehouse_differences(spark, tmp_path / "wh", out, scan["scan_id"]) == []

    once = tmp_path / "once"
    once.mkdir()
    result = run_backfill(spark, _config(once, out))
    last = load_index(out)[-1]
    assert result.resolved_ts == last["resolved_ts"]
    assert warehouse_differences(spark, once / "wh", out, last["scan_id"]) == []


def test_a_delete_without_old_value_on_a_ci_key_is_an_error_naming_table_key_and_ts(
    spark, tmp_path: Path, decode_on: str
) -> None:
    """Strip the old values of the last capture: its DELETEs on sort-key tables cannot name their rows."""
    out = tmp_path / "sim"
    _simulate(out, seed=8)
    scans = load_index(out)
    config = _config(tmp_path, out)
    run_backfill(spark, config, until_ts=scans[0]["resolved_ts"])
    before = {p: p.read_bytes() for p in (tmp_path / "wh").rglob("*") if p.is_file()}

    for scan in scans[1:]:
        for path in (out / "scans" / scan["scan_id"] / EVENTS_DIR).glob("*.parquet"):
            table = pq.read_table(path)
            index = table.schema.get_field_index("old_value")
            pq.write_table(table.set_column(index, "old_value", pa.nulls(table.num_rows, pa.binary())), path)
    with pytest.raises(InputError) as err:
        run_backfill(spark, config)
    message = str(err.value)
    assert "shop.names_" in message and "DELETE of key 74" in message and "at commit_ts " in message, message
    assert "carries no old value" in message
    after = {p: p.read_bytes() for p in (tmp_path / "wh").rglob("*") if p.is_file()}
    assert after == before


def test_the_before_after_key_rule_deletes_the_before_image_key(spark) -> None:
    """A change whose row had another key at the window's start also deletes that key; one whose before
    key is its own, or unknown (NULL: no row before), passes as it is (changes.collapse)."""
    from backfill.changes.collapse import with_moved_key_deletes

    rows = [
        ("ABC", 2, 30, "PUT", "abc"),  # respelled: abc goes, ABC comes
        ("xyz", 5, 31, "PUT", "xyz"),  # an update that kept its key
        ("new", 1, 32, "PUT", None),  # an insert
        ("Q", None, 33, "DELETE", "q"),  # deleted after a respelling in the window
    ]
    frame = spark.createDataFrame(
        rows, "k STRING, v INT, _tidb_commit_ts BIGINT, _tidb_op STRING, _tidb_before_k STRING"
    )
    out = with_moved_key_deletes(frame, ["k"])
    assert out.columns == ["k", "v", "_tidb_commit_ts", "_tidb_op"]
    assert sorted(tuple(r) for r in out.collect()) == sorted(
        [(k, v, ts, op) for k, v, ts, op, _ in rows]
        + [("abc", None, 30, "DELETE"), ("q", None, 33, "DELETE")]
    )
    plain = frame.drop("_tidb_before_k")
    assert with_moved_key_deletes(plain, ["k"]).collect() == plain.collect()
