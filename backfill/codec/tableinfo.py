"""Build TiDB ``TableInfo`` / ``ColumnInfo`` JSON dicts from SQL-ish type names (tests, simulator, demos).

The dicts have the shape TiDB writes (reference §4.1), so :meth:`TableSchema.from_table_info` reads them
like real ones. Only what the codec looks at is filled in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from backfill.codec import schema as S

_TYPES = {
    "tinyint": (S.TP_TINY, 4),
    "smallint": (S.TP_SHORT, 6),
    "mediumint": (S.TP_INT24, 9),
    "int": (S.TP_LONG, 11),
    "integer": (S.TP_LONG, 11),
    "bigint": (S.TP_LONGLONG, 20),
    "float": (S.TP_FLOAT, 12),
    "double": (S.TP_DOUBLE, 22),
    "decimal": (S.TP_NEWDECIMAL, 10),
    "char": (S.TP_STRING, 1),
    "varchar": (S.TP_VARCHAR, None),
    "binary": (S.TP_STRING, 1),
    "varbinary": (S.TP_VARCHAR, None),
    "tinytext": (S.TP_TINYBLOB, 255),
    "text": (S.TP_BLOB, 65535),
    "mediumtext": (S.TP_MEDIUMBLOB, 16777215),
    "longtext": (S.TP_LONGBLOB, 4294967295),
    "tinyblob": (S.TP_TINYBLOB, 255),
    "blob": (S.TP_BLOB, 65535),
    "mediumblob": (S.TP_MEDIUMBLOB, 16777215),
    "longblob": (S.TP_LONGBLOB, 4294967295),
    "enum": (S.TP_ENUM, None),
    "set": (S.TP_SET, None),
    "json": (S.TP_JSON, 4294967295),
    "bit": (S.TP_BIT, 1),
    "date": (S.TP_DATE, 10),
    "datetime": (S.TP_DATETIME, 19),
    "timestamp": (S.TP_TIMESTAMP, 19),
    "time": (S.TP_DURATION, 10),
    "year": (S.TP_YEAR, 4),
}
_BINARY_NAMES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_TYPE_RE = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*(unsigned)?\s*$", re.IGNORECASE)


def field_type(sql_type: str, *, collate: str = "utf8mb4_bin") -> dict[str, Any]:
    """``"decimal(12,2)"``, ``"int unsigned"``, ``"enum('a','b')"`` ... -> FieldType JSON."""
    m = _TYPE_RE.match(sql_type)
    if not m or m.group(1).lower() not in _TYPES:
        raise ValueError(f"unknown SQL type {sql_type!r}")
    name, args, unsigned = m.group(1).lower(), m.group(2), m.group(3)
    tp, flen = _TYPES[name]
    dec = (
        0
        if tp
        in (
            S.TP_TINY,
            S.TP_SHORT,
            S.TP_INT24,
            S.TP_LONG,
            S.TP_LONGLONG,
            S.TP_NEWDECIMAL,
            S.TP_DATE,
            S.TP_YEAR,
        )
        else -1
    )
    elems: list[str] | None = None
    if name in ("enum", "set"):
        elems = [e.replace("''", "'") for e in re.findall(r"'((?:[^']|'')*)'", args or "")]
        flen = max((len(e) for e in elems), default=1) if name == "enum" else len(",".join(elems))
    elif args:
        parts = [int(p) for p in args.split(",")]
        if name in ("datetime", "timestamp", "time"):
            dec = parts[0]
        elif name in ("float", "double", "decimal"):
            flen, dec = parts[0], (parts[1] if len(parts) > 1 else 0)
        else:
            flen = parts[0]
    if tp in (S.TP_DATETIME, S.TP_TIMESTAMP, S.TP_DURATION) and dec < 0:
        dec = 0
    if tp in (S.TP_DATETIME, S.TP_TIMESTAMP) and dec > 0:
        flen = 20 + dec
    if tp == S.TP_DURATION and dec > 0:
        flen = 11 + dec
    if flen is None:
        raise ValueError(f"{sql_type!r} needs a length")
    textual = tp in S.STRING_TPS or tp in (S.TP_ENUM, S.TP_SET)
    binary = name in _BINARY_NAMES or not textual
    charset, coll = ("binary", "binary") if binary else ("utf8mb4", collate)
    flag = (S.FLAG_UNSIGNED if unsigned else 0) | (128 if binary and tp != S.TP_JSON else 0)
    return {
        "Tp": tp,
        "Flag": flag,
        "Flen": flen,
        "Decimal": dec,
        "Charset": charset,
        "Collate": coll,
        "Elems": elems,
        "ElemsIsBinaryLit": None,
        "Array": False,
    }


def column_info(
    col_id: int,
    name: str,
    sql_type: str,
    *,
    offset: int = 0,
    not_null: bool = False,
    primary_key: bool = False,
    default: Any = None,
    origin_default: Any = None,
    origin_default_bit: str | None = None,
    state: int = S.STATE_PUBLIC,
    version: int = 2,
    hidden: bool = False,
    generated_expr: str = "",
    generated_stored: bool = False,
    collate: str = "utf8mb4_bin",
) -> dict[str, Any]:
    """ColumnInfo JSON; ``primary_key`` also sets NOT NULL, as MySQL does."""
    ft = field_type(sql_type, collate=collate)
    if not_null or primary_key:
        ft["Flag"] |= S.FLAG_NOT_NULL
    if primary_key:
        ft["Flag"] |= S.FLAG_PRI_KEY
    return {
        "id": col_id,
        "name": {"O": name, "L": name.lower()},
        "offset": offset,
        "origin_default": origin_default,
        "origin_default_bit": origin_default_bit,
        "default": default,
        "default_bit": None,
        "default_is_expr": False,
        "generated_expr_string": generated_expr,
        "generated_stored": generated_stored,
        "dependences": None,
        "type": ft,
        "state": state,
        "comment": "",
        "hidden": hidden,
        "change_state_info": None,
        "version": version,
    }


def table_info(
    table_id: int,
    name: str,
    columns: Sequence[dict[str, Any]],
    *,
    pk: str | Sequence[str] | None = None,
    partitions: Sequence[tuple[int, str]] | None = None,
) -> dict[str, Any]:
    """TableInfo JSON. ``pk``: ``"int"`` (the PRI_KEY column is the handle), a list of column names
    (clustered common handle), or None (``_tidb_rowid``). Column offsets are set from list order."""
    cols = [dict(c, offset=i) for i, c in enumerate(columns)]
    info: dict[str, Any] = {
        "id": table_id,
        "name": {"O": name, "L": name.lower()},
        "charset": "utf8mb4",
        "collate": "utf8mb4_bin",
        "cols": cols,
        "index_info": [],
        "state": S.STATE_PUBLIC,
        "pk_is_handle": pk == "int",
        "is_common_handle": False,
        "common_handle_version": 0,
        "max_col_id": max((c["id"] for c in cols), default=0),
        "max_idx_id": 0,
        "update_timestamp": 0,
        "version": 5,
        "partition": None,
    }
    if pk is not None and pk != "int":
        names = [pk] if isinstance(pk, str) else list(pk)
        by_name = {c["name"]["O"]: c for c in cols}
        for n in names:
            by_name[n]["type"]["Flag"] |= S.FLAG_NOT_NULL | S.FLAG_PRI_KEY
        info["is_common_handle"] = True
        info["common_handle_version"] = 1
        info["max_idx_id"] = 1
        info["index_info"] = [
            {
                "id": 1,
                "idx_name": {"O": "PRIMARY", "L": "primary"},
                "tbl_name": {"O": "", "L": ""},
                "idx_cols": [
                    {"name": {"O": n, "L": n.lower()}, "offset": by_name[n]["offset"], "length": -1}
                    for n in names
                ],
                "state": S.STATE_PUBLIC,
                "is_unique": True,
                "is_primary": True,
                "is_invisible": False,
                "is_global": False,
                "index_type": 1,
            }
        ]
    if partitions:
        info["partition"] = {
            "type": 1,
            "expr": "",
            "columns": None,
            "enable": True,
            "definitions": [
                {"id": pid, "name": {"O": pname, "L": pname.lower()}, "less_than": None, "in_values": None}
                for pid, pname in partitions
            ],
            "num": len(partitions),
        }
    return info
