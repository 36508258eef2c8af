"""A best-effort TableInfo from an open-protocol row event, for topics without a schema source.

The open protocol carries, per column, only a MySQL type code and TiCDC's flag bits (binary, handle key,
generated, primary, unique, multiple, nullable, unsigned). :func:`schema_from_columns` builds a TiDB
``TableInfo`` dict from that so the Kafka source can still type rows. What cannot be known and is lost:

- DECIMAL precision and scale: the column becomes DECIMAL(65, s) (s from the value's digits when it has
  one), a Delta STRING holding TiDB's own text, so no digit is lost but the type is not DECIMAL(p,s);
- ENUM and SET element names: the values stay numbers (ENUM index, SET bitmask) written as text;
  :func:`with_elems` adds the names once a schema source or the DDL gives them;
- BIT width: BIT(64), 8 bytes, big-endian (the value is right, wider than the column);
- TIME fsp: the text is kept as TiDB printed it (with the column's fsp digits), the metadata says 6;
- character lengths and collations (utf8mb4_bin is assumed), defaults, comments, indexes beyond the key.

The key: the handle-key columns (flag 0x02, or ``"h": true`` in pre-v4.0.5 messages). A single integer
handle whose value equals the event's row id (``rid``, tiflow only) is an int primary key (pk_is_handle);
a row id that differs means the table has no clustered key (rows keyed by ``_tidb_rowid``); otherwise the
handle columns form a clustered primary key. Column order is the message's (tiflow: by name).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from backfill.codec.schema import FLAG_NOT_NULL, FLAG_PRI_KEY, FLAG_UNSIGNED
from backfill.sources.ticdc.open_rows import (
    BLOB_CODES,
    FLAG_BINARY,
    FLAG_HANDLE,
    FLAG_NULLABLE,
    STRING_CODES,
)
from backfill.sources.ticdc.open_rows import (
    FLAG_UNSIGNED as OPEN_UNSIGNED,
)
from tidelake.errors import InputError

_INT_CODES = frozenset({1, 2, 3, 8, 9})
DECIMAL_UNKNOWN_PRECISION = 65
BIT_UNKNOWN_WIDTH = 64


def fake_table_id(schema: str, table: str) -> int:
    """A stable positive id for a table known only by name (like tiflow's FakeTableIDAllocator)."""
    return (zlib.crc32(f"{schema}.{table}".encode()) & 0x7FFFFFFF) + 1


def _cistr(name: str) -> dict[str, str]:
    return {"O": name, "L": name.lower()}


def _is_handle(obj: Mapping[str, Any]) -> bool:
    f = obj.get("f")
    return bool(f & FLAG_HANDLE) if isinstance(f, int) else bool(obj.get("h"))


def schema_from_columns(
    schema: str,
    table: str,
    columns: Mapping[str, Mapping[str, Any]],
    *,
    row_id: int | None = None,
    table_id: int | None = None,
) -> dict[str, Any]:
    """TableInfo JSON (for ``TableSchema.from_table_info``) from one event's ``u``/``d`` column objects."""
    cols: list[dict[str, Any]] = []
    handles: list[tuple[str, int, Any]] = []
    for offset, (name, obj) in enumerate(columns.items()):
        if not isinstance(obj, Mapping) or not isinstance(obj.get("t"), int):
            raise InputError(f"{schema}.{table}: column {name!r} is not an open-protocol column object")
        tp = int(obj["t"])
        f = obj.get("f")
        flags = f if isinstance(f, int) else 0
        flag = 0
        if flags & OPEN_UNSIGNED:
            flag |= FLAG_UNSIGNED
        nullable = bool(flags & FLAG_NULLABLE) if isinstance(f, int) else not _is_handle(obj)
        if not nullable:
            flag |= FLAG_NOT_NULL
        binary = bool(flags & FLAG_BINARY)
        charset, collate = ("binary", "binary") if binary else ("utf8mb4", "utf8mb4_bin")
        if tp not in STRING_CODES | BLOB_CODES | {247, 248, 245}:
            charset, collate = "binary", "binary"
        flen, dec = -1, -1
        if tp == 246:
            flen, dec = DECIMAL_UNKNOWN_PRECISION, _scale_of(obj.get("v"))
        elif tp == 16:
            flen = BIT_UNKNOWN_WIDTH
        elif tp in (7, 11, 12):
            dec = 6
        if _is_handle(obj):
            handles.append((name, tp, obj.get("v")))
        cols.append(
            {
                "id": offset + 1,
                "name": _cistr(name),
                "offset": offset,
                "origin_default": None,
                "default": None,
                "type": {
                    "Tp": tp,
                    "Flag": flag,
                    "Flen": flen,
                    "Decimal": dec,
                    "Charset": charset,
                    "Collate": collate,
                    "Elems": None,
                },
                "state": 5,
                "hidden": False,
                "version": 2,
            }
        )
    by_name = {c["name"]["O"]: c for c in cols}
    info: dict[str, Any] = {
        "id": table_id if table_id is not None else fake_table_id(schema, table),
        "name": _cistr(table),
        "charset": "utf8mb4",
        "collate": "utf8mb4_bin",
        "cols": cols,
        "index_info": [],
        "pk_is_handle": False,
        "is_common_handle": False,
        "partition": None,
    }
    int_handle = len(handles) == 1 and handles[0][1] in _INT_CODES
    if row_id is not None and not (int_handle and handles[0][2] == row_id):
        return info  # no clustered key: rows are keyed by _tidb_rowid
    if not handles:
        raise InputError(
            f"{schema}.{table}: the event has no handle-key column and no row id; without a schema source "
            "its rows cannot be keyed"
        )
    for name, _tp, _v in handles:
        by_name[name]["type"]["Flag"] |= FLAG_PRI_KEY | FLAG_NOT_NULL
    if int_handle:
        info["pk_is_handle"] = True
    else:
        info["is_common_handle"] = True
        info["index_info"] = [
            {
                "id": 1,
                "idx_name": _cistr("PRIMARY"),
                "idx_cols": [
                    {"name": _cistr(n), "offset": by_name[n]["offset"], "length": -1} for n, _, _ in handles
                ],
                "is_unique": True,
                "is_primary": True,
                "state": 5,
            }
        ]
    return info


def _scale_of(value: Any) -> int:
    if not isinstance(value, str):
        return 0
    try:
        d = Decimal(value)
    except InvalidOperation:
        return 0
    exp = d.as_tuple().exponent
    return -exp if isinstance(exp, int) and exp < 0 else 0


def with_elems(table_info: Mapping[str, Any], elems: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """A copy of ``table_info`` whose ENUM/SET columns named in ``elems`` get their element names, so
    ``rows_to_arrow`` maps the numbers the open protocol carries to names (index i -> elems[i-1])."""
    out = dict(table_info)
    cols = []
    for c in table_info["cols"]:
        name = c["name"]["O"] if isinstance(c["name"], Mapping) else c["name"]
        if name in elems and c["type"]["Tp"] in (247, 248):
            c = {**c, "type": {**c["type"], "Elems": list(elems[name])}}
        cols.append(c)
    out["cols"] = cols
    return out


__all__ = ["fake_table_id", "schema_from_columns", "with_elems"]
