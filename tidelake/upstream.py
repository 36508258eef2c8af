"""A connection to the upstream database (TiDB, MySQL, MariaDB) through pymysql, for every command that
reads it: reconcile compares rows, backfill reads `SHOW CREATE TABLE` (at a ts on TiDB).

Every connection runs with `time_zone = '+00:00'` and utf8mb4; TLS comes from `ssl_*` in the config (an
`ssl.SSLContext`, verified unless `ssl_verify = false`). Error messages name host, port and user, never the
password. Every byte read from the socket is counted (`bytes_received`).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pymysql
from pymysql.constants import CR, ER

from tidelake.errors import UpstreamError, UpstreamUnavailable

if TYPE_CHECKING:
    from tidelake.config import UpstreamConfig

T = TypeVar("T")

# pymysql's client-side codes of a connection that could not be made or broke (refused, reset, timed out)
_NETWORK_CODES = frozenset(
    {CR.CR_CONNECTION_ERROR, CR.CR_CONN_HOST_ERROR, CR.CR_SERVER_GONE_ERROR, CR.CR_SERVER_LOST,
     CR.CR_SERVER_LOST_EXTENDED}
)  # fmt: skip


# TiDB's ErrSnapshotTooOld: a read at a ts whose versions its GC has removed ("snapshot is older than GC safe
# point"). No retry brings them back, so callers say what to do instead.
TIDB_SNAPSHOT_TOO_OLD = 8055


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


def server_name(config: UpstreamConfig) -> str:
    return f"{config.kind} upstream {config.host}:{config.port}"


def failure(exc: BaseException, config: UpstreamConfig, doing: str) -> UpstreamError:
    """`exc` (from pymysql or the socket) as the error to raise, naming the server, never the password:
    UpstreamUnavailable when the network failed (worth another try), else UpstreamError."""
    args = getattr(exc, "args", ())
    code = args[0] if args and isinstance(args[0], int) else None
    reason = scrub(str(args[-1] if args and args[-1] else exc) or type(exc).__name__, config)
    if (
        isinstance(exc, OSError | pymysql.err.InterfaceError)
        or (isinstance(exc, pymysql.err.OperationalError) and code in _NETWORK_CODES)
    ):  # fmt: skip
        return UpstreamUnavailable(f"{server_name(config)}: connection lost while {doing}: {reason}")
    return UpstreamError(f"{server_name(config)}: {doing} failed: {reason}")


def snapshot_too_old(exc: BaseException, ts: int | None, remedy: str) -> str:
    """The hint to add to a failed read at `ts` when TiDB refused it as older than its GC safe point (`remedy`
    says what to do in the caller's terms); "" for every other failure."""
    args = getattr(exc, "args", ())
    if not (args and args[0] == TIDB_SNAPSHOT_TOO_OLD):
        return ""
    return (
        f" (ts {ts} is older than TiDB's GC safe point: the row versions it needs are gone; {remedy}, and raise "
        "tidb_gc_life_time so that a job paused that long keeps them)"
    )


def connect(config: UpstreamConfig, *, database: str | None = None) -> CountingConnection:
    """Open one connection, mapping every failure to an UpstreamError without the password in it
    (UpstreamUnavailable when the server could not be reached). Reads and writes time out after
    `read_timeout`: a stalled server never holds a run forever."""
    where = f"{server_name(config)} as user {config.user!r}"
    try:
        conn = CountingConnection(
            host=config.host,
            port=config.port,
            user=config.user,
            password=config.password.reveal(),
            database=database,
            charset="utf8mb4",
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            write_timeout=config.read_timeout,
            ssl=ssl_context(config),
            autocommit=True,
            binary_prefix=True,
            init_command="SET time_zone = '+00:00'",
        )
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else None
        if code == ER.ACCESS_DENIED_ERROR:
            raise UpstreamError(f"{where}: access denied (wrong user or password)") from None
        if code == CR.CR_UNKNOWN_HOST:
            raise UpstreamError(f"{where}: cannot connect (is the server running and reachable?)") from None
        if code in _NETWORK_CODES:
            reason = scrub(str(exc.args[-1] if exc.args else exc), config)
            raise UpstreamUnavailable(
                f"{where}: cannot connect (is the server running and reachable?): {reason}"
            ) from None
        raise UpstreamError(f"{where}: {scrub(str(exc.args[-1] if exc.args else exc), config)}") from None
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


def with_retries(
    attempt: Callable[[], T], config: UpstreamConfig, retrying: Callable[[str], object]
) -> tuple[T, list[str]]:
    """`attempt()`, called again after a network failure (UpstreamUnavailable: a refused, reset, lost or
    timed-out connection) at most `retries` times, `retry_wait` seconds first and doubling; `retrying` is
    told each time ("<failure>; retry n of m in s s"). Returns the result and the failures it rode out;
    past the retries, an UpstreamError naming the server and the attempts."""
    failures: list[str] = []
    while True:
        try:
            return attempt(), failures
        except UpstreamUnavailable as exc:
            failures.append(str(exc))
            if len(failures) > config.retries:
                raise UpstreamError(f"{exc} (gave up after {len(failures)} attempts)") from None
            wait = config.retry_wait * 2 ** (len(failures) - 1)
            retrying(f"{exc}; retry {len(failures)} of {config.retries} in {wait:g} s")
            time.sleep(wait)
