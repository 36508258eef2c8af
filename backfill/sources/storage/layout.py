"""The folder layout of TiCDC's storage sink, as pure path parsing (no I/O).

tiflow ``pkg/sink/cloudstorage/path.go``/``path_key.go`` and ticdc ``pkg/cloudstorage/path_key.go``::

    <prefix>/metadata                                         {"checkpoint-ts": <ts>}
    <schema>/meta/schema_<version>_<checksum>.json            database DDL (no columns)
    <schema>/<table>/meta/schema_<version>_<checksum>.json    one per table version
    <schema>/<table>/<version>[/<physical-id>][/<date>]/CDC<n>.<ext>
    <schema>/<table>/<version>[/<physical-id>][/<date>]/meta/CDC.index

``<n>`` is zero-padded to the file-index width (any width is read); ``<date>`` is ``YYYY``,
``YYYY-MM`` or ``YYYY-MM-DD`` by ``date-separator``; ``<physical-id>`` appears for partitions with
``enable-partition-separator``. ticdc with ``enable-table-across-nodes`` names files
``CDC_<dispatcher>_<n>.<ext>`` and their index ``meta/CDC_<dispatcher>.index`` (one writer each). An
index file holds the name of the last data file its writer finished (tiflow writes the index before the
file, ticdc after it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from backfill.sources.ticdc.schema_file import parse_schema_file_name
from tidelake.errors import InputError

METADATA = "metadata"
EXTENSIONS = {"csv": ".csv", "canal-json": ".json"}
_DATA = re.compile(r"^CDC(?:_(?P<dispatcher>.+)_)?(?P<n>\d+)(?P<ext>\.[A-Za-z0-9.-]+)$")
_INDEX = re.compile(r"^CDC(?:_(?P<dispatcher>.+))?\.index$")
_DATES = {
    "year": re.compile(r"^\d{4}$"),
    "month": re.compile(r"^\d{4}-\d{2}$"),
    "day": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
}
_ANY_DATE = re.compile(r"^\d{4}(?:-\d{2}){1,2}$")


@dataclass(frozen=True, order=True)
class DataDir:
    """One writer's folder of data files: table version, partition (0: none), date, dispatcher."""

    schema: str
    table: str
    version: int
    physical_id: int = 0
    date: str = ""
    dispatcher: str = ""


@dataclass(frozen=True)
class DataFile:
    folder: DataDir
    number: int
    path: str
    size: int = 0  # bytes, as listed


@dataclass(frozen=True)
class IndexFile:
    folder: DataDir
    path: str


@dataclass(frozen=True)
class SchemaFile:
    schema: str
    table: str  # "" for a database-level file
    version: int
    checksum: int
    path: str


def parse_metadata(text: str, where: str) -> int:
    """The checkpoint ts of the root ``metadata`` file."""
    try:
        doc = json.loads(text)
        ts = doc["checkpoint-ts"]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f'{where}: not a storage sink metadata file ({{"checkpoint-ts": ts}}): {exc!r}'
        ) from None
    if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < 1 << 64:  # Go's uint64
        raise InputError(f"{where}: checkpoint-ts {ts!r} is not an unsigned 64-bit integer")
    return ts


def parse_index(text: str, where: str) -> int:
    """The file number an index names (its content is the last data file's name)."""
    name = text.strip()
    found = _DATA.match(name)
    if not found:
        raise InputError(f"{where}: index content {name[:80]!r} is not a data file name")
    return int(found.group("n"))


def classify(
    relative: str, path: str, extension: str, date_separator: str, size: int = 0
) -> DataFile | IndexFile | SchemaFile | None:
    """What the file at ``relative`` (to the prefix, ``/``-separated) is; None for anything else."""
    parts = relative.split("/")
    name = parts[-1]
    if len(parts) in (3, 4) and parts[-2] == "meta":
        parsed = parse_schema_file_name(name)
        if parsed is not None:
            table = parts[1] if len(parts) == 4 else ""
            return SchemaFile(parts[0], table, parsed[0], parsed[1], path)
    if len(parts) < 4 or not parts[2].isdigit():
        return None
    schema, table, version = parts[0], parts[1], int(parts[2])
    index = _INDEX.match(name) if parts[-2] == "meta" else None
    if index is not None:
        middle, dispatcher = parts[3:-2], index.group("dispatcher") or ""
    else:
        found = _DATA.match(name)
        if found is None or found.group("ext") != extension:
            return None
        middle, dispatcher = parts[3:-1], found.group("dispatcher") or ""
    folder = _folder(schema, table, version, middle, dispatcher, date_separator, relative)
    if folder is None:
        return None
    if index is not None:
        return IndexFile(folder, path)
    return DataFile(folder, int(found.group("n")), path, size)  # type: ignore[union-attr]


def _folder(
    schema: str, table: str, version: int, middle: list[str], dispatcher: str, date_separator: str, where: str
) -> DataDir | None:
    physical_id, date = 0, ""
    if len(middle) == 2:
        if not middle[0].isdigit() or (not _ANY_DATE.match(middle[1]) and not middle[1].isdigit()):
            return None
        physical_id, date = int(middle[0]), middle[1]
    elif len(middle) == 1:
        part = middle[0]
        pattern = _DATES.get(date_separator)
        if (pattern is not None and pattern.match(part)) or ("-" in part and _ANY_DATE.match(part)):
            date = part
        elif part.isdigit():
            physical_id = int(part)
        else:
            return None
    elif middle:
        return None
    return DataDir(schema, table, version, physical_id, date, dispatcher)


__all__ = [
    "EXTENSIONS",
    "METADATA",
    "DataDir",
    "DataFile",
    "IndexFile",
    "SchemaFile",
    "classify",
    "parse_index",
    "parse_metadata",
]
