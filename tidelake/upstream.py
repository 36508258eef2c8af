"""A connection to the upstream database (TiDB, MySQL, MariaDB) through pymysql, for every command that
reads it: reconcile compares rows, backfill reads `SHOW CREATE TABLE` (at a ts on TiDB).

Every connection runs with `time_zone = '+00:00'` and utf8mb4; TLS comes from `ssl_*` in the config (an
`ssl.SSLContext`, verified unless `ssl_verify = false`). Error messages name host, port and user, never the
password. Every byte read from the socket is counted (`bytes_received`).
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

import pymysql
from pymysql.constants import CR, ER

from tidelake.errors import UpstreamError

if TYPE_CHECKING:
    from tidelake.config import UpstreamConfig


class CountingConnection(pymysql.connections.Connection):
    """A pymysql connection that counts the bytes it reads from the server."""

    bytes_received = 0

    def _read_bytes(self, num_bytes: int) -> bytes:
        # A private pymysql method that types-PyMySQL does not declare.
        data: bytes = super()._read_bytes(num_bytes)  # type: ignore[misc]
        self.bytes_received += len(data)
        return data


def ssl_context(config: UpstreamConfig) -> ssl.SSLContext | None:
    wants = config.ssl or config.ssl_ca or config.ssl_cert or config.ssl_key
    if not wants:
        return None
    try:
        context = ssl.create_default_context(cafile=config.ssl_ca)
        if config.ssl_cert:
            context.load_cert_chain(config.ssl_cert, config.ssl_key)
    except (OSError, ssl.SSLError) as exc:
        raise UpstreamError(f"upstream TLS set-up failed: {exc}") from None
    if not config.ssl_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def connect(config: UpstreamConfig, *, database: str | None = None) -> CountingConnection:
    """Open one connection, mapping every failure to an UpstreamError without the password in it."""
    where = f"{config.kind} upstream {config.host}:{config.port} as user {config.user!r}"
    try:
        conn = CountingConnection(
            host=config.host,
            port=config.port,
            user=config.user,
            password=config.password.reveal(),
            database=database,
            charset="utf8mb4",
            connect_timeout=config.connect_timeout,
            read_timeout=None,
            ssl=ssl_context(config),
            autocommit=True,
            binary_prefix=True,
            init_command="SET time_zone = '+00:00'",
        )
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else None
        if code == ER.ACCESS_DENIED_ERROR:
            reason = "access denied (wrong user or password)"
        elif code in (CR.CR_CONN_HOST_ERROR, CR.CR_CONNECTION_ERROR, CR.CR_UNKNOWN_HOST):
            reason = "cannot connect (is the server running and reachable?)"
        else:
            reason = scrub(str(exc.args[-1] if exc.args else exc), config)
        raise UpstreamError(f"{where}: {reason}") from None
    except (pymysql.err.MySQLError, OSError, ssl.SSLError) as exc:
        raise UpstreamError(f"{where}: {scrub(str(exc), config)}") from None
    return conn


def scrub(message: str, config: UpstreamConfig) -> str:
    secret = config.password.reveal()
    return message.replace(secret, "***") if secret else message


def server_version(conn: pymysql.connections.Connection) -> str:
    """The server's `SELECT VERSION()` (TiDB's holds "TiDB")."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        row = cur.fetchone()
    if row is None:
        raise UpstreamError("SELECT VERSION() returned no row")
    return str(row[0])
