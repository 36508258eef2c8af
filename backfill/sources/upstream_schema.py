"""The schema of tables that predate a changefeed, from the upstream database (`[upstream]`).

`SHOW CREATE TABLE`, parsed like the DDL text of the topic (`codec.ddl_text`). On TiDB it is read at
`tidb_snapshot` = the ts the schema must hold at, so it is the schema in force then; MySQL and MariaDB have
no reads at a ts: their current schema is taken, right only while the table's columns have not changed
since that ts (a DDL that no longer fits it stops the run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pymysql

from backfill.codec.ddl_text import DdlTextError, create_table_info
from backfill.sources.ticdc.open_schema import fake_table_id
from tidelake.errors import InputError, UpstreamError
from tidelake.sqlident import quote_ident
from tidelake.upstream import connect, scrub, server_version, snapshot_too_old

if TYPE_CHECKING:
    from tidelake.config import UpstreamConfig


# What to do when the schema at a table's first change is past TiDB's GC: the topic cannot say it, a snapshot can.
_SCHEMA_GONE = (
    "give the job a snapshot to start from ([source.initial]: a Dumpling export or upstream_tso), whose schema "
    "it then takes"
)


def upstream_table_infos(
    config: UpstreamConfig, wanted: Mapping[tuple[str, str], int]
) -> dict[tuple[str, str], dict[str, Any]]:
    """TableInfo of each (schema, table) of `wanted`, as of its ts on TiDB (the current one elsewhere)."""
    if not wanted:
        return {}
    if config.kind == "files":
        raise InputError(
            "[upstream] kind = 'files' holds rows, not schemas: give a server (tidb, mysql, mariadb) for the "
            "schema of tables that predate the changefeed, or put the files under [reconcile.upstream]"
        )
    where = f"{config.kind} upstream {config.host}:{config.port}"
    conn = connect(config)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        tidb = "tidb" in server_version(conn).lower()
        for (db, name), ts in sorted(wanted.items()):
            at = f" at tidb_snapshot {ts}" if tidb else ""
            try:
                with conn.cursor() as cur:
                    if tidb:
                        cur.execute("SET @@tidb_snapshot = %s", (str(ts),))
                    cur.execute(f"SHOW CREATE TABLE {quote_ident(db)}.{quote_ident(name)}")
                    row = cur.fetchone()
            except pymysql.err.MySQLError as exc:
                reason = scrub(str(exc.args[-1] if exc.args else exc), config)
                hint = snapshot_too_old(exc, ts, _SCHEMA_GONE)
                raise UpstreamError(f"{where}: SHOW CREATE TABLE {db}.{name}{at}: {reason}{hint}") from None
            if row is None or len(row) < 2:
                raise UpstreamError(f"{where}: SHOW CREATE TABLE {db}.{name}{at} returned nothing")
            text = row[1].decode() if isinstance(row[1], bytes) else str(row[1])
            try:
                _, _, info = create_table_info(text, table_id=fake_table_id(db, name), default_schema=db)
            except DdlTextError as exc:
                raise InputError(f"{where}: table {db}.{name}{at}: {exc}") from None
            out[(db, name)] = info
    finally:
        conn.close()
    return out


__all__ = ["upstream_table_infos"]
