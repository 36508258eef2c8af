"""TiDB: every read at one ts (`tidb_snapshot`), and the hidden `_tidb_rowid` of non-clustered tables.

Snapshot: each connection sets `@@tidb_snapshot` to the same ts (by default the resolved ts the Delta
table records), so all parallel queries read one MVCC snapshot, exact even while the upstream is busy,
as long as the ts is above the GC safe point. No lock is taken.

Row ids: a table whose primary key is not clustered (or that has none) addresses rows by the hidden
`_tidb_rowid`, which SELECT can name although the catalog does not list it. A table without a primary
key gets it as its key (`TIDB_PK_TYPE` = NONCLUSTERED and no PRIMARY index), so it is compared and
repaired by the handle a kv-scan backfill stores; a table with a non-clustered primary key keeps its
primary key, which identifies rows on both sides.

Functions: `MD5`, `CONV`, `CRC32` and the window functions behave as in MySQL (MD5 over the utf8mb4
bytes, lower-case hex), so the MySQL family's checksum is TiDB's too; JSON is compared in TiDB's own
rendering, `CAST(j AS CHAR)`, which is the text the backfill stores.
"""

from __future__ import annotations

from typing import Any, ClassVar

from reconcile.schema import Column, Kind, TableSchema
from reconcile.upstream.mysql import MySQL, register
from reconcile.upstream.sqltext import Query
from tidelake.conventions import ROWID

ROWID_COLUMN = Column(ROWID, Kind.INT, "bigint", "bigint", nullable=False)


@register
class TiDB(MySQL):
    name: ClassVar[str] = "tidb"
    reads_at_ts: ClassVar[bool] = True

    @classmethod
    def claims(cls, version: str) -> bool:
        return "tidb" in version.lower()

    def snapshot_statements(self, ts: int | None) -> list[tuple[str, tuple[Any, ...]]]:
        """Read at `ts` (the latest state when None: an empty `tidb_snapshot`)."""
        return [("SET @@tidb_snapshot = %s", (str(ts) if ts is not None else "",))]

    def refine(self, query: Query, schema: TableSchema) -> TableSchema:
        if schema.primary_key:
            return schema
        rows = query(
            "SELECT TIDB_PK_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema.db, schema.table),
        )
        if not rows or str(rows[0][0]).upper() != "NONCLUSTERED":
            return schema
        return TableSchema(schema.db, schema.table, (ROWID_COLUMN, *schema.columns), (ROWID,))
