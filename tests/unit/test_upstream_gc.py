"""A read at a ts that TiDB's GC has passed (ErrSnapshotTooOld, 8055) is told apart from other failures, and
each reader says what to do instead. No TiDB server runs here (MariaDB has no reads at a ts), so a
connection that answers as TiDB does stands in for it."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from backfill.sources import upstream_schema
from reconcile.upstream.sql import _open_snapshot
from reconcile.upstream.tidb import TiDB
from tidelake.config import UpstreamConfig
from tidelake.errors import UpstreamError
from tidelake.upstream import TIDB_SNAPSHOT_TOO_OLD, snapshot_too_old

pytestmark = pytest.mark.unit

TS = 450_000_000_000_000_000
TOO_OLD = pymysql.err.OperationalError(
    TIDB_SNAPSHOT_TOO_OLD, "snapshot is older than GC safe point 2026-11-20 10:00:00 +0000 UTC"
)
CONFIG = UpstreamConfig(kind="tidb", host="127.0.0.1", port=4000)


class _TiDBPastGc:
    """A connection to a TiDB whose GC safe point is past every ts asked for."""

    def __init__(self, refusal: Exception) -> None:
        self.refusal = refusal
        self.row: tuple[Any, ...] | None = None

    def cursor(self) -> _TiDBPastGc:
        return self

    def __enter__(self) -> _TiDBPastGc:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, params: tuple[Any, ...] | None = None) -> None:
        if sql.startswith("SET @@tidb_snapshot") and params and params[0]:
            raise self.refusal
        self.row = ("8.0.11-TiDB-v7.5.0",) if sql == "SELECT VERSION()" else None

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.row

    def close(self) -> None:
        return None


def test_only_tidbs_snapshot_too_old_gets_the_hint() -> None:
    hint = snapshot_too_old(TOO_OLD, TS, "do this")
    assert f"ts {TS} is older than TiDB's GC safe point" in hint
    assert "do this" in hint and "tidb_gc_life_time" in hint
    assert snapshot_too_old(pymysql.err.OperationalError(1193, "Unknown system variable"), TS, "x") == ""
    assert snapshot_too_old(OSError("reset"), TS, "x") == ""


def test_a_schema_past_the_gc_safe_point_points_at_a_snapshot_to_start_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(upstream_schema, "connect", lambda config: _TiDBPastGc(TOO_OLD))
    with pytest.raises(UpstreamError) as raised:
        upstream_schema.upstream_table_infos(CONFIG, {("shop", "orders"): TS})
    message = str(raised.value)
    assert f"SHOW CREATE TABLE shop.orders at tidb_snapshot {TS}" in message
    assert "snapshot is older than GC safe point" in message
    assert "[source.initial]" in message


def test_another_refusal_gets_no_gc_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    denied = pymysql.err.OperationalError(1142, "SELECT command denied to user 'ro'")
    monkeypatch.setattr(upstream_schema, "connect", lambda config: _TiDBPastGc(denied))
    with pytest.raises(UpstreamError) as raised:
        upstream_schema.upstream_table_infos(CONFIG, {("shop", "orders"): TS})
    assert "command denied" in str(raised.value)
    assert "GC safe point" not in str(raised.value)


def test_reconcile_at_a_ts_past_the_gc_safe_point_says_to_compare_at_a_newer_one() -> None:
    with pytest.raises(UpstreamError) as raised:
        _open_snapshot(_TiDBPastGc(TOO_OLD), TiDB(), TS, CONFIG)  # type: ignore[arg-type]
    message = str(raised.value)
    assert f"tidb cannot read at ts {TS}" in message
    assert "--at-ts" in message and "is the ts older" not in message


def test_a_jdbc_snapshot_past_the_gc_safe_point_asks_for_a_newer_one() -> None:
    from backfill.initial.jdbc import _bounds

    with pytest.raises(UpstreamError) as raised:
        _bounds(_TiDBPastGc(TOO_OLD), CONFIG, "shop", "orders", "id", TS)  # type: ignore[arg-type]
    message = str(raised.value)
    assert f"reading the key range of shop.orders at tidb_snapshot {TS}" in message
    assert "newer snapshot (upstream_tso)" in message
