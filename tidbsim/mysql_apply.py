"""Replay the simulated upstream into a real MariaDB/MySQL, and read tables back in the Delta domain.

The applier replays the op log (logical rows as a consumer decodes them, DDLs as SQL) in commit-ts order
up to a resolved ts, so the server ends up holding exactly the expected state of that ts. Tables without
a clustered primary key get an INVISIBLE ``_tidb_rowid`` primary key: TiDB's hidden handle made explicit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from tidbsim.coltypes import time_text
from tidelake.sqlident import quote_ident as _q


@dataclass(frozen=True)
class MysqlTarget:
    host: str
    port: int
    user: str
    password: str
    database: str | None = None

    def __repr__(self) -> str:  # never show the password
        return f"MysqlTarget({self.user}@{self.host}:{self.port})"

    def connect(self, **kwargs: Any) -> Any:
        import pymysql

        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=self.database,
            charset="utf8mb4",
            autocommit=False,
            init_command="SET time_zone = '+00:00'",
            **kwargs,
        )


def parse_mysql_url(url: str) -> MysqlTarget:
    """``mysql://user:pass@host:port/[db]`` (``mariadb://`` too) -> connection settings."""
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb") or not parts.hostname:
        raise ValueError("expected a mysql://user[:password]@host[:port]/ URL")
    db = parts.path.lstrip("/") or None
    return MysqlTarget(
        parts.hostname,
        parts.port or 3306,
        unquote(parts.username or "root"),
        unquote(parts.password or ""),
        db,
    )


def _param(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    return v


def apply_ops(
    target: MysqlTarget,
    databases: Sequence[str],
    ops: Iterable[tuple[Any, ...]],
    until_ts: int,
    *,
    batch: int = 500,
) -> int:
    """Recreate ``databases`` and replay ``ops`` with ts <= ``until_ts``; returns the records applied."""
    conn = target.connect()
    n = 0
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'")
            for db in databases:
                cur.execute(f"DROP DATABASE IF EXISTS {_q(db)}")
                cur.execute(f"CREATE DATABASE {_q(db)} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
            pending: list[tuple[Any, ...]] = []
            pending_sql = ""
            for rec in ops:
                ts, kind, db, table, payload = rec
                if ts > until_ts:
                    break
                n += 1
                if kind == "ddl":
                    _flush(cur, pending_sql, pending)
                    pending, pending_sql = [], ""
                    conn.commit()
                    # DDL in autocommit mode: MariaDB 10.11's EXCHANGE PARTITION waits on its own session's
                    # (empty) transaction until the lock wait timeout otherwise.
                    conn.autocommit(True)
                    for sql in payload:
                        cur.execute(sql)
                    conn.autocommit(False)
                    continue
                cols = tuple(payload)
                if kind == "put":
                    sql = (
                        f"REPLACE INTO {_q(db)}.{_q(table)} ({', '.join(map(_q, cols))}) "
                        f"VALUES ({', '.join(['%s'] * len(cols))})"
                    )
                else:
                    sql = f"DELETE FROM {_q(db)}.{_q(table)} WHERE " + " AND ".join(
                        f"{_q(c)} = %s" for c in cols
                    )
                if sql != pending_sql or len(pending) >= batch:
                    _flush(cur, pending_sql, pending)
                    pending, pending_sql = [], sql
                pending.append(tuple(_param(payload[c]) for c in cols))
            _flush(cur, pending_sql, pending)
        conn.commit()
    finally:
        conn.close()
    return n


def _flush(cur: Any, sql: str, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        cur.executemany(sql, rows)


# ---------------------------------------------------------------- reading back

TIME_TYPE = 11  # MySQL protocol field type of TIME


def _convert(value: Any, field: pa.Field, type_code: int, scale: int) -> Any:
    if value is None:
        return None
    t = field.type
    if isinstance(value, dt.timedelta) or type_code == TIME_TYPE:
        ns = (value.days * 86400 + value.seconds) * 1_000_000_000 + value.microseconds * 1000
        return time_text(ns, min(max(scale, 0), 6) if scale < 31 else 0)
    if isinstance(value, str) and pa.types.is_temporal(t):
        return None  # a zero date that pymysql could not parse: NULL, as the consumer makes it
    if pa.types.is_decimal(t):
        return Decimal(value)
    if pa.types.is_string(t) and isinstance(value, Decimal):
        return format(value, "f")
    if pa.types.is_timestamp(t) and t.tz is not None and isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC)
    if pa.types.is_binary(t) and isinstance(value, str):
        return value.encode("utf-8")
    return value


def fetch_table(
    target: MysqlTarget, db: str, table: str, schema: pa.Schema, order_by: Sequence[str]
) -> pa.Table:
    """The server's rows of ``db.table`` as an Arrow table of ``schema`` (columns the server lacks, such
    as ``_tidb_commit_ts``, must be dropped from ``schema`` by the caller), ordered by ``order_by``."""
    conn = target.connect()
    try:
        with conn.cursor() as cur:
            # FLOAT through the text protocol is printed with 6 digits: ask for the exact value instead.
            cols = ", ".join(
                f"CAST({_q(f.name)} AS DOUBLE)" if pa.types.is_float32(f.type) else _q(f.name) for f in schema
            )
            order = ", ".join(_q(c) for c in order_by)
            cur.execute(f"SELECT {cols} FROM {_q(db)}.{_q(table)} ORDER BY {order}")
            desc = cur.description
            rows = [
                {f.name: _convert(v, f, d[1], d[5] or 0) for v, f, d in zip(r, schema, desc, strict=True)}
                for r in cur.fetchall()
            ]
    finally:
        conn.close()
    return pa.Table.from_pylist(rows, schema=schema)


def list_tables(target: MysqlTarget, databases: Sequence[str]) -> Iterator[tuple[str, str]]:
    conn = target.connect()
    try:
        with conn.cursor() as cur:
            for db in databases:
                cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (db,))
                for (name,) in cur.fetchall():
                    yield db, name
    finally:
        conn.close()
