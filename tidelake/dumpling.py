"""A Dumpling export's layout (pingcap/tidb `dumpling/export`), shared by the backfill (a job's initial
load, `backfill/initial/`) and reconcile (an export as the upstream, `reconcile/upstream/dumpling.py`).

Layout:
    metadata                      `Started dump at: ...`, then `SHOW MASTER STATUS:` (or
                                  `SHOW BINARY LOG STATUS:`) with `\\tLog: ...`, `\\tPos: ...`,
                                  `\\tGTID:...`; on TiDB `Log: tidb-binlog` and Pos is the snapshot TSO
    <db>-schema-create.sql        CREATE DATABASE
    <db>.<table>-schema.sql       CREATE TABLE
    <db>.<table>.<NNNNNNNNN>.csv  data (or `<db>.<table>.csv`; `.csv.gz`, `.csv.zst`, `.csv.snappy` too)
    <db>.<table>.<NNNNNNNNN>.sql  data of an export taken with `--filetype sql` (INSERT statements)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tidelake.errors import InputError

METADATA = "metadata"
_DATA_FILE = re.compile(r"^(?P<stem>.+?)(?:\.(?P<index>\d+))?\.(?P<type>csv|sql)(?:\.(?P<codec>[a-z0-9]+))?$")
_SCHEMA_FILE = re.compile(r"^(?P<db>[^.]+)\.(?P<table>.+)-schema\.sql$")


@dataclass(frozen=True)
class DumpMetadata:
    log: str | None
    pos: str | None

    @property
    def tso(self) -> int | None:
        """The snapshot TSO when the export came from TiDB (`Log: tidb-binlog`)."""
        if self.log == "tidb-binlog" and self.pos and self.pos.isdigit():
            return int(self.pos)
        return None


def parse_metadata(text: str) -> DumpMetadata:
    """The first master-status block of a Dumpling `metadata` file (not a replica's status)."""
    log = pos = None
    in_master = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS")):
            if log is not None:
                break  # a second block (after the connection pool was set up) repeats the first
            in_master = True
            continue
        if line.startswith("SHOW SLAVE STATUS") or line.startswith("SHOW REPLICA STATUS"):
            in_master = False
        if in_master and line.startswith("Log:"):
            log = line[4:].strip()
        elif in_master and line.startswith("Pos:"):
            pos = line[4:].strip()
    return DumpMetadata(log, pos)


def snapshot_tso(text: str, where: str) -> int:
    """The export's snapshot TSO; an InputError naming `where` when the file holds none (an export of
    MySQL, or not taken with a consistent snapshot)."""
    tso = parse_metadata(text).tso
    if tso is None:
        raise InputError(
            f"{where}: no snapshot TSO (a `SHOW MASTER STATUS` block with `Log: tidb-binlog` and `Pos: "
            "<TSO>`): export the upstream TiDB with Dumpling's default consistency (snapshot)"
        )
    return tso


def schema_files(names: Sequence[str]) -> list[tuple[str, str, str]]:
    """(db, table, file name) of every `<db>.<table>-schema.sql` among a folder's file names."""
    found = []
    for name in names:
        match = _SCHEMA_FILE.match(name)
        if match:
            found.append((match.group("db"), match.group("table"), name))
    return sorted(found)


def data_files(names: Sequence[str], db: str, table: str, file_types: Sequence[str] = ("csv",)) -> list[str]:
    """The data files of one table among a folder's file names, in index order: its CSV files, or those
    of the `file_types` given (`csv`, `sql`)."""
    stem = f"{db}.{table}"
    found = []
    for name in names:
        match = _DATA_FILE.match(name)
        if match and match.group("stem") == stem and match.group("type") in file_types:
            found.append((int(match.group("index") or 0), name))
    return [name for _, name in sorted(found)]


def compression_of(name: str) -> str | None:
    """The compression a data file's name says (`gz`, `zst`, `snappy`), None for a plain file."""
    match = _DATA_FILE.match(name.rsplit("/", 1)[-1])
    return match.group("codec") if match else None


def file_type_of(name: str) -> str | None:
    """What a data file's name says it holds: `csv`, `sql` (INSERT statements), None for neither."""
    match = _DATA_FILE.match(name.rsplit("/", 1)[-1])
    return match.group("type") if match else None
