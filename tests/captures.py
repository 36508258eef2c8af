"""Hand-built captures for backfill tests: TableInfo JSON, DDL jobs and events in the kv-scan input layout
(docs/architecture.md "The kv-scan input").

The simulator makes realistic workloads; these builders make the exact, small streams a single test
needs (one matcher case, one DDL, one kind of bad input), with real TiDB bytes from the codec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backfill.codec import TableSchema, encode_row, record_key
from backfill.sources.kvscan import format as kvscan

BIGINT, VARCHAR, INT, DECIMAL, DATETIME = 8, 15, 3, 246, 12
NOT_NULL, PRI_KEY = 1, 2


def cistr(name: str) -> dict[str, str]:
    return {"O": name, "L": name.lower()}


def column(cid: int, name: str, tp: int, *, flag: int = 0, flen: int = -1, decimal: int = -1,
           offset: int = 0, origin_default: Any = None, charset: str = "utf8mb4") -> dict[str, Any]:  # fmt: skip
    binary = tp in (BIGINT, INT, DECIMAL, DATETIME)
    return {
        "id": cid, "name": cistr(name), "offset": offset, "origin_default": origin_default, "default": origin_default,
        "type": {"Tp": tp, "Flag": flag, "Flen": flen, "Decimal": decimal,
                 "Charset": "binary" if binary else charset, "Collate": "binary" if binary else "utf8mb4_bin"},
        "state": 5, "version": 2,
    }  # fmt: skip


def users_table(
    table_id: int = 100, name: str = "users", extra: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """`id BIGINT PRIMARY KEY, name VARCHAR(64), score INT` (+ extra columns)."""
    cols = [
        column(1, "id", BIGINT, flag=NOT_NULL | PRI_KEY, flen=20),
        column(2, "name", VARCHAR, flen=64),
        column(3, "score", INT, flen=11),
        *(extra or []),
    ]
    for offset, col in enumerate(cols):
        col["offset"] = offset
    return {"id": table_id, "name": cistr(name), "cols": cols, "pk_is_handle": True, "state": 5,
            "max_col_id": max(c["id"] for c in cols), "index_info": []}  # fmt: skip


def ddl_job(job_id: int, job_type: int, db: str, table_info: dict[str, Any], finished_ts: int,
            table_id: int | None = None) -> dict[str, Any]:  # fmt: skip
    """A done DDL job as TiDB writes it; `table_id` is the table the job ran on (the old id for TRUNCATE)."""
    return {
        "id": job_id, "type": job_type, "schema_name": db, "table_name": table_info["name"]["O"],
        "table_id": table_info["id"] if table_id is None else table_id, "state": 6, "query": f"-- job {job_id}",
        "binlog": {"SchemaVersion": job_id, "TableInfo": table_info, "FinishedTS": finished_ts},
    }  # fmt: skip


@dataclass
class Capture:
    """One capture folder; `write()` lays it out with `_SUCCESS` last."""

    root: Path
    scan_id: str
    checkpoint_ts: int
    current_ts: int
    regions: list[tuple[int, bytes, bytes]] = field(default_factory=lambda: [(1, b"", b"")])
    tables: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def event(self, region: int, type_: str, **values: Any) -> Capture:
        seq = sum(1 for e in self.events if e["region_id"] == region)
        row = {"region_id": region, "seq": seq, "type": type_, "generation": 0} | values
        self.events.append(row)
        return self

    def put(self, region: int, table: dict[str, Any], handle: int, values: dict[int, Any], start: int, commit: int,
            *, type_: str = "COMMITTED") -> Capture:  # fmt: skip
        schema = TableSchema.from_table_info(table)
        return self.event(region, type_, start_ts=start, commit_ts=commit, op_type="PUT",
                          key=record_key(table["id"], handle), value=encode_row(schema, values))  # fmt: skip

    def delete(self, region: int, table_id: int, handle: int, start: int, commit: int) -> Capture:
        return self.event(region, "COMMITTED", start_ts=start, commit_ts=commit, op_type="DELETE",
                          key=record_key(table_id, handle), value=b"")  # fmt: skip

    def init_and_resolve(self, ts: int | None = None) -> Capture:
        for region, _, _ in self.regions:
            self.event(region, "INITIALIZED")
            self.event(region, "RESOLVED", resolved_ts=self.current_ts if ts is None else ts)
        return self

    def write(self, success: bool = True) -> Path:
        folder = self.root / self.scan_id
        regions = [kvscan.Region(r, start, end) for r, start, end in self.regions]
        kvscan.write_manifest(folder, self.checkpoint_ts, self.current_ts, regions)
        kvscan.write_events(folder, self.events)
        kvscan.write_tables(folder, self.tables)
        kvscan.write_ddl_jobs(folder, self.jobs)
        if success:
            kvscan.mark_success(folder)
        return folder
