"""Canal-json as TiCDC writes it to storage (tiflow ``canal_json_txn_event_encoder.go``, ticdc
``canal_json_encoder.go``): one JSON object per line, ended by the terminator.

Row lines: ``type`` INSERT/UPDATE/DELETE, ``data`` (a one-row list; DELETE puts the deleted row there),
``old`` (the old values of an UPDATE: all columns, or only the changed ones), ``pkNames``, ``mysqlType``
and ``sqlType`` per column, and with ``enable-tidb-extension`` ``_tidb.commitTs`` — the only commit ts
(``es`` is milliseconds). Values are strings or null: numbers in decimal, binary strings one ISO-8859-1
character per byte, ENUM/SET as index/bitmask (names when the schema file gives the elements), BIT as
its integer. An UPDATE whose old values hold a different primary key becomes a DELETE of the old key and
a PUT of the new row (same ts, the DELETE first). DDL lines (``isDdl``) and watermarks carry no rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from operator import attrgetter
from typing import Any

import msgspec
from msgspec import UNSET

from backfill.sources.ticdc.change_rows import DELETE, PUT, ParsedRows, Where, at
from backfill.sources.ticdc.open_rows import gc_paused
from tidelake.errors import InputError

WATERMARK = "TIDB_WATERMARK"
_ROW_TYPES = {"INSERT": PUT, "UPDATE": PUT, "DELETE": DELETE}


class _Tidb(msgspec.Struct, gc=False):
    commitTs: int | None = None  # TiCDC's field names, as written


class _Message(msgspec.Struct, gc=False):
    type: str = ""
    isDdl: bool = False
    database: str = ""
    table: str = ""
    pkNames: list[str] | None = None
    data: list[dict[str, str | None]] | None = None
    old: list[dict[str, str | None]] | None = None
    mysqlType: dict[str, str] | None = None
    sqlType: dict[str, int] | None = None
    tidb: _Tidb | None = msgspec.field(default=None, name="_tidb")


_DECODE = msgspec.json.Decoder(_Message | None)


_ELEMENTS = re.compile(r"^\s*(?:enum|set)\s*\((.*)\)\s*$", re.IGNORECASE | re.DOTALL)


def enum_set_elements(data: bytes, terminator: str) -> dict[str, list[str]]:
    """ENUM/SET element names from the first row line's ``mysqlType``, which carries the full column type
    (``enum('a','b')``) when the changefeed writes ``content-compatible=true``; empty otherwise."""
    end = b"\n" if terminator in ("\n", "\r\n") else terminator.encode("utf-8")
    for raw in data.split(end, 8)[:8]:
        try:
            message = _DECODE.decode(raw.strip() or b"null")
        except (msgspec.ValidationError, msgspec.DecodeError):
            return {}
        if message is None or message.isDdl or not message.mysqlType:
            continue
        out = {}
        for name, text in message.mysqlType.items():
            found = _ELEMENTS.match(text)
            if found:
                out[name] = [e.replace("''", "'") for e in re.findall(r"'((?:[^']|'')*)'", found.group(1))]
        return out
    return {}


def split_lines(text: str, terminator: str) -> list[tuple[int, str]]:
    """(line number, text) of the non-empty lines; ``\\r\\n`` and ``\\n`` both end a line for either."""
    if terminator in ("\n", "\r\n"):
        parts = text.split("\n")
        pieces = [p[:-1] if p.endswith("\r") else p for p in parts]
    else:
        pieces = text.split(terminator)
    return [(i + 1, p) for i, p in enumerate(pieces) if p.strip()]


def parse_canal_json(
    data: bytes | str, terminator: str, column_names: Sequence[str], key_names: Sequence[str], where: Where
) -> ParsedRows:
    """The row changes of one canal-json file (or of Kafka message values, one per line) of a table with
    ``column_names`` and key ``key_names``.

    One typed msgspec parse of the whole file into structs made for the table's columns (no dict per row),
    then one list per column. A file with blank lines, another terminator or a line that does not parse
    goes line by line, which names the line of the problem."""
    with gc_paused():
        return _parse(data, terminator, column_names, key_names, where)


def _parse(
    data: bytes | str, terminator: str, column_names: Sequence[str], key_names: Sequence[str], where: Where
) -> ParsedRows:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    decoder, row_type = _decoders(tuple(column_names))
    messages = _whole_file(raw, terminator, decoder)
    lines: Sequence[int]
    if messages is None:
        numbered = split_lines(_text(raw, where), terminator)
        messages = [_decode_line(decoder, text, column_names, at(where, line)) for line, text in numbered]
        lines = [line for line, _ in numbered]
    else:
        lines = range(1, len(messages) + 1)
    return _rows(messages, lines, row_type, column_names, key_names, where)


@lru_cache(maxsize=256)
def _decoders(column_names: tuple[str, ...]) -> tuple[msgspec.json.Decoder, type]:
    """A decoder of one canal-json message whose rows are structs with one field per column (UNSET when
    absent; a name not in the schema does not parse), and that row struct type."""
    fields: list[tuple[str, Any, Any]] = [
        (f"c{i}", str | None | msgspec.UnsetType, msgspec.UNSET) for i in range(len(column_names))
    ]
    row_type = msgspec.defstruct(
        "CanalRow", fields, rename={f"c{i}": name for i, name in enumerate(column_names)},
        forbid_unknown_fields=True, gc=False,
    )  # fmt: skip
    rows: Any = list[row_type] | None  # type: ignore[valid-type]  # a struct type made at run time
    message_fields: list[tuple[str, Any, Any]] = [
        ("type", str, ""), ("isDdl", bool, False), ("data", rows, None), ("old", rows, None),
        ("tidb", _Tidb | None, None),
    ]  # fmt: skip
    message = msgspec.defstruct("CanalRowMessage", message_fields, rename={"tidb": "_tidb"}, gc=False)
    return msgspec.json.Decoder(message), row_type


def _whole_file(raw: bytes, terminator: str, decoder: msgspec.json.Decoder) -> list[Any] | None:
    """Every line's message, when the file is newline-terminated lines, none blank, that all parse."""
    if terminator not in ("\n", "\r\n"):
        return None
    try:
        messages = decoder.decode_lines(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    # decode_lines skips blank lines: as many messages as lines means there were none (line numbers hold)
    expected = raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw.strip() else 1)
    return messages if len(messages) == expected else None


def _text(raw: bytes, where: Where) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{at(where, line)}: not UTF-8 text (byte {exc.start})") from None


def _decode_line(
    decoder: msgspec.json.Decoder, text: str | bytes, column_names: Sequence[str], where: str
) -> Any:
    """One message; ``where`` (file:line, or topic/partition/offset) names it in an error."""
    try:
        return decoder.decode(text)
    except msgspec.ValidationError as exc:  # (a DecodeError too: this one first)
        reason = f"not a canal-json message: {exc}"
    except msgspec.DecodeError as exc:
        raise InputError(f"{where}: not JSON: {exc}") from None
    try:  # it is JSON: say what is wrong in the table's terms where we can
        loose = _DECODE.decode(text)
    except msgspec.ValidationError:
        loose = None
    for values in [*(loose.data or []), *(loose.old or [])] if loose is not None else []:
        unknown = [name for name in values if name not in column_names]
        if unknown:
            reason = f"column {unknown[0]!r} is not in the table's schema file"
    raise InputError(f"{where}: {reason}")


def _rows(
    messages: Sequence[Any],
    lines: Sequence[int],
    row_type: type,
    column_names: Sequence[str],
    key_names: Sequence[str],
    where: Where,
) -> ParsedRows:
    """The row changes of decoded messages, column-major; DDL and watermark messages carry none."""
    fields = [f"c{i}" for i in range(len(column_names))]
    key_fields = [fields[column_names.index(k)] for k in key_names if k in column_names]
    simple = _one_row_each(messages, lines, key_fields)
    if simple is not None:
        rows, ops, commit_ts, positions = simple
    else:
        rows, ops, commit_ts, positions = _each_row(messages, lines, row_type, fields, key_fields, where)
    columns = [list(map(attrgetter(f), rows)) for f in fields]
    for name, field in zip(column_names, fields, strict=True):
        # an absent value is filled like TiCDC fills it, which for a key would invent the row's identity
        if field in key_fields and UNSET in (column := columns[fields.index(field)]):
            line = positions[column.index(UNSET)]
            raise InputError(f"{at(where, line)}: a row change without the key column {name!r}")
    filled = None
    if any(UNSET in column for column in columns):  # absent values: NULL here, filled like TiCDC by to_arrow
        filled = [[v is UNSET for v in column] for column in columns]
        columns = [[None if v is UNSET else v for v in column] for column in columns]
    return ParsedRows(ops, commit_ts, positions, columns, filled)


def _one_row_each(
    messages: Sequence[Any], lines: Sequence[int], key_fields: Sequence[str]
) -> tuple[list[Any], list[str], list[int], list[int]] | None:
    """The common case in whole-list steps: every message one row change with its commit ts, no update that
    moves its key or lacks one; None for anything else (the message-by-message path handles and names it).
    Each step is a ``map`` over the list (no Python frame per message): this runs for every row."""
    ops = list(map(_ROW_TYPES.get, map(_TYPE, messages)))
    if None in ops or any(map(_IS_DDL, messages)):  # DDL and watermark messages carry no rows: drop them
        kept = [
            (line, m) for line, m in zip(lines, messages, strict=True) if not (m.isDdl or m.type == WATERMARK)
        ]
        lines = [line for line, _ in kept]
        messages = [m for _, m in kept]
        ops = list(map(_ROW_TYPES.get, map(_TYPE, messages)))
        if None in ops:
            return None
    try:
        commit_ts = list(map(_COMMIT_TS, messages))
        rows = [row for (row,) in map(_DATA, messages)]  # exactly one row each, else ValueError
    except (AttributeError, TypeError, ValueError):
        return None
    if None in commit_ts:
        return None
    for m in filter(_OLD, messages):
        if m.type == "UPDATE" and (not key_fields or _moves_key(key_fields, m.data[0], m.old[0])):
            return None
    return rows, ops, commit_ts, list(lines)  # type: ignore[return-value]


_TYPE, _IS_DDL, _DATA, _OLD = attrgetter("type"), attrgetter("isDdl"), attrgetter("data"), attrgetter("old")
_COMMIT_TS = attrgetter("tidb.commitTs")


def _each_row(
    messages: Sequence[Any],
    lines: Sequence[int],
    row_type: type,
    fields: Sequence[str],
    key_fields: Sequence[str],
    where: Where,
) -> tuple[list[Any], list[str], list[int], list[int]]:
    rows: list[Any] = []
    ops: list[str] = []
    commit_ts: list[int] = []
    positions: list[int] = []
    for line, message in zip(lines, messages, strict=True):
        kind = message.type
        if message.isDdl or kind == WATERMARK:
            continue
        op = _ROW_TYPES.get(kind)
        if op is None:
            raise InputError(f"{at(where, line)}: type {kind!r} is not INSERT, UPDATE or DELETE")
        tidb = message.tidb
        ts = tidb.commitTs if tidb is not None else None
        if ts is None:
            raise InputError(
                f"{at(where, line)}: no _tidb.commitTs; the changefeed must write canal-json with "
                "enable-tidb-extension=true"
            )
        data = message.data
        if not data:
            raise InputError(f"{at(where, line)}: a {kind} without 'data'")
        olds = message.old if kind == "UPDATE" else None
        for position, values in enumerate(data):
            old = olds[position] if olds and position < len(olds) else None
            if old is not None and not key_fields:  # a multiset: the old row goes, the new one comes
                rows.append(_overlay(row_type, fields, values, old))
            elif old is not None and _moves_key(key_fields, values, old):
                keys_only = {f: _set_or(getattr(old, f), getattr(values, f)) for f in key_fields}
                rows.append(row_type(**keys_only))
            else:
                rows.append(values)
                ops.append(op)
                commit_ts.append(ts)
                positions.append(line)
                continue
            ops += (DELETE, op)
            commit_ts += (ts, ts)
            positions += (line, line)
            rows.append(values)
    return rows, ops, commit_ts, positions


def _set_or(value: Any, other: Any) -> Any:
    return other if value is UNSET else value


def _overlay(row_type: type, fields: Sequence[str], values: Any, old: Any) -> Any:
    """The old row of an update: its old values over the new row's."""
    return row_type(*[_set_or(getattr(old, f), getattr(values, f)) for f in fields])


def _moves_key(key_fields: Sequence[str], values: Any, old: Any) -> bool:
    for f in key_fields:
        before = getattr(old, f)
        if before is not UNSET and before != getattr(values, f):
            return True
    return False


__all__ = ["WATERMARK", "parse_canal_json", "split_lines"]
