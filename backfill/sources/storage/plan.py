"""Which files of a storage-sink folder a run reads, and the tables' schema versions (pure, no I/O).

Completeness: the root ``metadata`` checkpoint-ts S says every change with commit ts at or below S is in
a finished file; a change above S may still be missing, so it waits. Files are written whole (an object
store PUT, or a rename on a file system), so every data file that exists is read, whatever its index
says: tiflow writes ``CDC.index`` before the file it names (that file may not exist yet: its rows are
above S), ticdc after it (a file beyond its index holds rows above S, or repeats of rows a restart wrote
again, which collapse). The newest file of a folder — the one named by the index or beyond it — may
still grow on a file system that appends: its last line counts only when its terminator is there.

Versions: a table's schema files, oldest first, up to S. One with a ``Query`` starts a new segment (a DDL
barrier); one without (a restart or table move wrote it) continues the segment before it, unless its
columns differ. Data folders of version V hold rows of V's segment; a folder whose next version is at or
below the table's checkpoint holds nothing new (a DDL waits for every row before it; a restart at
checkpoint C rewrites every row above C into C's folder), so it is not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from backfill.sources.storage.layout import DataDir, DataFile, IndexFile, SchemaFile
from backfill.sources.ticdc.schema_file import TableDefinition


@dataclass
class TableListing:
    """Everything the sink wrote for one (schema, table) name."""

    schema: str
    table: str
    schema_files: list[SchemaFile] = field(default_factory=list)
    data: dict[DataDir, list[DataFile]] = field(default_factory=dict)
    indexes: dict[DataDir, IndexFile] = field(default_factory=dict)

    def versions_up_to(self, ts: int) -> list[SchemaFile]:
        return sorted((f for f in self.schema_files if f.version <= ts), key=lambda f: f.version)


@dataclass
class SinkListing:
    tables: dict[tuple[str, str], TableListing] = field(default_factory=dict)
    database_files: list[SchemaFile] = field(default_factory=list)

    def table(self, schema: str, table: str) -> TableListing:
        key = (schema, table)
        if key not in self.tables:
            self.tables[key] = TableListing(schema, table)
        return self.tables[key]


def group_listing(entries: Iterable[DataFile | IndexFile | SchemaFile]) -> SinkListing:
    listing = SinkListing()
    for entry in entries:
        if isinstance(entry, SchemaFile):
            if entry.table:
                listing.table(entry.schema, entry.table).schema_files.append(entry)
            else:
                listing.database_files.append(entry)
        elif isinstance(entry, IndexFile):
            listing.table(entry.folder.schema, entry.folder.table).indexes[entry.folder] = entry
        else:
            listing.table(entry.folder.schema, entry.folder.table).data.setdefault(entry.folder, []).append(
                entry
            )
    return listing


@dataclass(frozen=True)
class FileToRead:
    path: str
    ordinal: int  # position in the table's order: version, partition, date, writer, number
    newest: bool  # the folder's newest file: an unterminated last line is still being written
    size: int = 0  # bytes when listed (the newest file may have grown since)


def files_to_read(
    table: TableListing,
    versions: Sequence[int],
    indexed: Mapping[DataDir, int | None],
    floor: int,
    first_ordinal: int = 0,
) -> dict[int, list[FileToRead]]:
    """Per table version (of ``versions``, sorted), the data files to read, in the table's order."""
    out: dict[int, list[FileToRead]] = {}
    ordinal = first_ordinal
    for folder in sorted(table.data):
        if folder.version not in versions:
            continue
        position = versions.index(folder.version)
        if position + 1 < len(versions) and versions[position + 1] <= floor:
            continue
        files = sorted(table.data[folder], key=lambda f: f.number)
        top = indexed.get(folder)
        for file in files:
            ordinal += 1
            newest = top is None or file.number >= top
            out.setdefault(folder.version, []).append(
                FileToRead(file.path, ordinal, newest and file is files[-1], file.size)
            )
    return out


def pack_files(
    files: Sequence[FileToRead], *, max_bytes: int, open_cost: int, min_tasks: int
) -> list[list[FileToRead]]:
    """The files in groups, one task each, as Spark packs a file source: every file costs its size plus
    ``open_cost``; a group holds up to ``min(max_bytes, max(open_cost, total / min_tasks))``, filled
    largest file first, a file never split. Many small files share a task; big ones get a task each."""
    total = sum(f.size + open_cost for f in files)
    limit = min(max_bytes, max(open_cost, total // max(1, min_tasks)))
    groups: list[list[FileToRead]] = []
    current: list[FileToRead] = []
    size = 0
    for f in sorted(files, key=lambda f: (-f.size, f.ordinal)):
        if current and size + f.size > limit:
            groups.append(current)
            current, size = [], 0
        current.append(f)
        size += f.size + open_cost
    if current:
        groups.append(current)
    return groups


def segment_starts(definitions: Sequence[TableDefinition]) -> list[int]:
    """Indexes of the versions that start a segment: the first, and each with a query or new columns."""
    starts = []
    for i, definition in enumerate(definitions):
        if i == 0 or definition.query.strip() or definition.checksum() != definitions[i - 1].checksum():
            starts.append(i)
    return starts


# A rename's query as TiCDC writes it per table: RENAME TABLE `a`.`b` TO `c`.`d` (a multi-table rename is
# split into one DDL per table) or ALTER TABLE ... RENAME [TO|AS] ...
_NAME = r"((?:`(?:[^`]|``)+`|[^\s.,;`]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[^\s.,;`]+))?)"
_RENAME = re.compile(r"RENAME\s+TABLES?\s+(.*)", re.IGNORECASE | re.DOTALL)
_PAIR = re.compile(rf"{_NAME}\s+TO\s+{_NAME}", re.IGNORECASE)
_ALTER_RENAME = re.compile(rf"ALTER\s+TABLE\s+{_NAME}\s+RENAME\s+(?:TO\s+|AS\s+)?{_NAME}", re.IGNORECASE)
RENAME_ACTIONS = frozenset({14, 47})


def _split_name(text: str, default_schema: str) -> tuple[str, str]:
    parts = re.findall(r"`((?:[^`]|``)+)`|([^\s.`]+)", text)
    names = [(quoted or bare).replace("``", "`") for quoted, bare in parts]
    return (names[0], names[1]) if len(names) == 2 else (default_schema, names[-1])


def rename_source(definition: TableDefinition) -> tuple[str, str] | None:
    """The (schema, table) a RENAME TABLE version of ``definition``'s table came from, if it is one."""
    if definition.type not in RENAME_ACTIONS:
        return None
    target = (definition.schema, definition.table)
    renames = _RENAME.search(definition.query)
    found = (
        list(_PAIR.finditer(renames.group(1))) if renames else list(_ALTER_RENAME.finditer(definition.query))
    )
    pairs = [tuple(_split_name(f.group(i), definition.schema) for i in (1, 2)) for f in found]
    for old, new in pairs:
        if new == target:
            return old
    if len(pairs) == 1:
        return pairs[0][0]
    return None


Piece = tuple[TableListing, list[SchemaFile]]


def lineages(
    listing: SinkListing, definitions: Mapping[str, TableDefinition], resolved: int
) -> list[list[Piece]]:
    """The logical tables of the sink: each a chain of (name, its versions) pieces joined by renames, oldest
    first. A name renamed away at version v gives its versions below v to the chain of the new name."""
    tables = listing.tables

    def renamed_in(key: tuple[str, str]) -> list[tuple[int, tuple[str, str]]]:
        found = []
        for file in tables[key].versions_up_to(resolved):
            source = rename_source(definitions[file.path])
            if source is not None and source != key and source in tables:
                found.append((file.version, source))
        return found

    claimed: dict[tuple[str, str], int] = {}
    for key in tables:
        for version, source in renamed_in(key):
            claimed[source] = max(claimed.get(source, 0), version)

    def pieces(key: tuple[str, str], lo: int, hi: int | None) -> list[Piece]:
        files = [
            f
            for f in tables[key].versions_up_to(resolved)
            if f.version >= lo and (hi is None or f.version < hi)
        ]
        if not files:
            return []
        for version, source in reversed(renamed_in(key)):
            if lo < version and (hi is None or version < hi):
                return [
                    *pieces(source, 0, version),
                    (tables[key], [f for f in files if f.version >= version]),
                ]
        return [(tables[key], files)]

    out = []
    for key in sorted(tables):
        chain = pieces(key, claimed.get(key, 0), None)
        if chain:
            out.append(chain)
    return out


__all__ = [
    "FileToRead", "Piece", "SinkListing", "TableListing", "files_to_read", "group_listing", "lineages",
    "pack_files", "rename_source", "segment_starts",
]  # fmt: skip
