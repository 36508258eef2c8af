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
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from msgspec import UNSET

from backfill.sources.ticdc.arrow_bytes import decoded_each
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


class _RawMessage(msgspec.Struct, gc=False, rename={"tidb": "_tidb"}):
    """A message whose rows stay raw JSON, to be typed by Arrow all at once (:func:`_columnar`)."""

    type: str = ""
    isDdl: bool = False
    data: list[msgspec.Raw] | None = None
    old: list[msgspec.Raw] | None = None
    tidb: _Tidb | None = None


_RAW_MESSAGES = msgspec.json.Decoder(_RawMessage)
_NOT_PARSED = (msgspec.DecodeError, UnicodeDecodeError)  # DecodeError covers ValidationError


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

    Three ways, the first that applies: a plain file's rows typed by Arrow column by column
    (:func:`_columnar`); one typed msgspec parse of the whole file into structs made for the table's
    columns, then one list per column; line by line (a file with blank lines, another terminator or a line
    that does not parse), which names the line of the problem."""
    with gc_paused():
        return _parse(data, terminator, column_names, key_names, where)


def parse_canal_values(
    values: pa.Array, column_names: Sequence[str], key_names: Sequence[str], where: Where
) -> ParsedRows:
    """`parse_canal_json` of Kafka message values (line N: the Nth value), each parsed in place (a parse
    per value costs half of one over all values joined into lines: bench/NOTES.md), so a value may hold
    line breaks."""
    with gc_paused():
        try:
            messages = decoded_each(values, _RAW_MESSAGES.decode) if not values.null_count else None
        except _NOT_PARSED:
            messages = None
        columnar = _columnar(messages, tuple(column_names), key_names) if messages is not None else None
        if columnar is not None:
            return columnar
        decoder, row_type = _decoders(tuple(column_names))
        try:
            exact = decoded_each(values, decoder.decode)
        except _NOT_PARSED:  # name the first value that does not parse
            exact = [
                _decode_line(decoder, _value_text(raw, at(where, i)), column_names, at(where, i))
                for i, raw in enumerate(values.to_pylist(), 1)
            ]
        return _rows(exact, range(1, len(exact) + 1), row_type, column_names, key_names, where)


def _value_text(raw: bytes | None, where: str) -> str:
    try:
        return (raw or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 text (byte {exc.start})") from None


def _parse(
    data: bytes | str, terminator: str, column_names: Sequence[str], key_names: Sequence[str], where: Where
) -> ParsedRows:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    messages = _whole_file(raw, terminator, _RAW_MESSAGES)
    columnar = _columnar(messages, tuple(column_names), key_names) if messages is not None else None
    if columnar is not None:
        return columnar
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


def _fields(column_names: Sequence[str]) -> list[str]:
    """The row struct's field names, one per column (`c0`, `c1`, …): column names need not be identifiers."""
    return [f"c{i}" for i in range(len(column_names))]


@lru_cache(maxsize=256)
def _decoders(column_names: tuple[str, ...]) -> tuple[msgspec.json.Decoder, type]:
    """A decoder of one canal-json message whose rows are structs with one field per column (UNSET when
    absent; a name not in the schema does not parse), and that row struct type."""
    fields: list[tuple[str, Any, Any]] = [
        (field, str | None | msgspec.UnsetType, msgspec.UNSET) for field in _fields(column_names)
    ]
    row_type = msgspec.defstruct(
        "CanalRow", fields, rename=dict(zip(_fields(column_names), column_names, strict=True)),
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
    except _NOT_PARSED:
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
    fields = _fields(column_names)
    key_fields = [fields[column_names.index(k)] for k in key_names if k in column_names]
    simple = _one_row_each(messages, lines)
    if simple is not None and not _an_update_moves_key(simple[0], key_fields):
        _, rows, ops, commit_ts, positions = simple
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
    messages: Sequence[Any], lines: Sequence[int]
) -> tuple[list[Any], list[Any], list[str], list[int], list[int]] | None:
    """The common case in whole-list steps: every message (DDL and watermarks left out) one row change with
    its commit ts; (those messages, their rows, ops, commit ts, lines), or None for anything else (the
    message-by-message path handles and names it). Each step is a ``map`` over the list (no Python frame per
    message): this runs for every row. Whether an update moves its key is the caller's check."""
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
    # the columnar path reads an UPDATE's first old row only: any other old row is the exact path's to check
    if any(m.type != "UPDATE" or len(m.old) > 1 for m in filter(_OLD, messages)):
        return None
    return list(messages), rows, ops, commit_ts, list(lines)  # type: ignore[return-value]


def _an_update_moves_key(messages: Sequence[Any], key_fields: Sequence[str]) -> bool:
    """Whether an UPDATE's old values give another key (or the table has none: a multiset's update)."""
    for m in filter(_OLD, messages):
        if m.type == "UPDATE" and (not key_fields or _moves_key(key_fields, m.data[0], m.old[0])):
            return True
    return False


_TYPE, _IS_DDL, _DATA, _OLD = attrgetter("type"), attrgetter("isDdl"), attrgetter("data"), attrgetter("old")
_COMMIT_TS = attrgetter("tidb.commitTs")


class _NotPlain(Exception):
    """The file is not one the columnar path takes; the exact path decides (and names any problem)."""


def _columnar(
    messages: list[Any], column_names: tuple[str, ...], key_names: Sequence[str]
) -> ParsedRows | None:
    """The common case without a Python object per value: `messages` (every line's, msgspec's
    ``_RawMessage``) leave each row as raw JSON, then Arrow's JSON reader types all rows of the file at
    once (1.4x faster than one struct and one string per value). None whenever the file is not plain (a
    row that does not fit the schema, an update that moves its key, a key left out): the exact path then
    decides, and names the line of a problem. A table without a key has its updates' old rows deleted here too.

    Arrow reads an absent column as NULL. Where that matters (a PUT with a NULL value is filled like TiCDC
    fills an absent column; a key must be present) and the row's text does not say ``"name":null``, the
    row is decoded once more exactly (:func:`_absent`)."""
    simple = _one_row_each(messages, range(1, len(messages) + 1))
    if simple is None:
        return None
    kept, rows, ops, commit_ts, lines = simple
    keys = [k for k in key_names if k in column_names]
    updates = [i for i, m in enumerate(kept) if m.old and m.type == "UPDATE"]
    try:
        blob = _joined(rows)
        values = _arrow_rows(blob, len(rows), column_names)
        olds = _exact_rows(column_names, [kept[i].old[0] for i in updates])
        if keys:
            _refuse_moved_keys(updates, olds, values, column_names, keys)
        filled = _absent(rows, blob, ops, values, column_names, keys)
    except _NotPlain:
        return None
    parsed = ParsedRows(ops, commit_ts, lines, [values.column(i) for i in range(len(column_names))], filled)
    return _old_rows_deleted(parsed, updates, olds, column_names) if updates and not keys else parsed


def _joined(rows: list[Any]) -> bytes:
    """Raw JSON row objects one a line (a raw JSON value holds no newline); :class:`_NotPlain` unless each
    is an object (a bare `null` row line crashes pyarrow 20's reader)."""
    blob = b"\n".join(rows)
    if rows and (not blob.startswith(b"{") or blob.count(b"\n{") != len(rows) - 1):
        raise _NotPlain
    return blob


def _arrow_rows(blob: bytes, count: int, column_names: tuple[str, ...]) -> pa.Table:
    """``count`` raw JSON row objects (:func:`_joined`) typed as one string column per schema column (NULL
    where null or absent); a row that does not fit (not text, a column not in the schema, a column given
    twice, not UTF-8) is :class:`_NotPlain`."""
    if not count:
        return pa.table({name: pa.array([], pa.string()) for name in column_names})
    schema = pa.schema([(name, pa.string()) for name in column_names])
    try:
        table = pa_json.read_json(
            pa.BufferReader(blob),
            read_options=pa_json.ReadOptions(use_threads=False),  # 1 MB blocks: faster than one big one
            parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
        )
        table.validate(full=True)  # the reader does not check UTF-8 (neither does msgspec in a raw value)
    except (pa.ArrowException, ValueError):
        raise _NotPlain from None
    if table.num_rows != count:
        raise _NotPlain
    return table


def _refuse_moved_keys(
    updates: list[int], olds: list[Any], values: pa.Table, column_names: tuple[str, ...], keys: Sequence[str]
) -> None:
    """:func:`_an_update_moves_key` for raw rows, raising :class:`_NotPlain`: ``olds`` are the old values
    of the ``updates`` decoded exactly (an absent key column is not a changed one), the new keys are taken
    from the typed rows."""
    index = pa.array(updates, pa.int64())
    fields = _fields(column_names)
    for key in keys:
        field = fields[column_names.index(key)]
        after = values.column(key).take(index).to_pylist()
        if any(b is not UNSET and b != a for b, a in zip(map(attrgetter(field), olds), after, strict=True)):
            raise _NotPlain


def _old_rows_deleted(
    rows: ParsedRows, updates: list[int], olds: list[Any], column_names: tuple[str, ...]
) -> ParsedRows:
    """A table without a key is a multiset, so an update takes its old row away and adds the new one: a
    DELETE of the old values over the new row's (``old`` may hold only the changed columns) right before
    the update's PUT, at its commit ts and line, as :func:`_each_row` does for the exact path."""
    rows = rows.as_arrays()
    index = pa.array(updates, pa.int64())
    order = _each_before_its_update(len(rows), updates)

    def placed(column: pa.Array, added: pa.Array) -> pa.Array:
        return pa.concat_arrays([column, added]).take(order)

    old_values = [
        _over(list(map(attrgetter(field), olds)), column.take(index))
        for field, column in zip(_fields(column_names), rows.values, strict=True)
    ]
    return ParsedRows(
        placed(rows.ops, pa.array([DELETE] * len(updates), pa.string())),
        placed(rows.commit_ts, rows.commit_ts.take(index)),
        placed(rows.lines, rows.lines.take(index)),
        [placed(new, old) for new, old in zip(rows.values, old_values, strict=True)],
        None if rows.filled is None else [placed(f, pa.array([False] * len(updates))) for f in rows.filled],
    )


def _over(old: list[Any], new: pa.Array) -> pa.Array:
    """Old values (UNSET where ``old`` left the column out) over the new ones."""
    absent = pa.array([v is UNSET for v in old], pa.bool_())
    return pc.if_else(absent, new, pa.array([None if v is UNSET else v for v in old], pa.string()))


def _each_before_its_update(count: int, updates: list[int]) -> pa.Array:
    """Indices into ``count`` rows followed by one added row per update, which put each added row right
    before the row of its update."""
    places = np.concatenate([np.arange(count) * 2 + 1, np.asarray(updates, np.int64) * 2])
    return pa.array(np.argsort(places, kind="stable"))


def _absent(
    rows: list[Any],
    blob: bytes,
    ops: list[str],
    values: pa.Table,
    column_names: tuple[str, ...],
    keys: Sequence[str],
) -> list[list[bool]] | None:
    """Per column, which rows left it out (None: none did), found where NULL is ambiguous: a PUT with a
    NULL (an absent value is filled), any row with a NULL key (an absent key is an error: _NotPlain). A
    NULL its row writes as ``"name":null`` is no question (:func:`_null_text`); the rows with another one
    are decoded once more exactly."""
    if not any(values.column(i).null_count for i in range(len(column_names))):
        return None
    puts = pc.equal(pa.array(ops, pa.string()), PUT)
    texts = pc.split_pattern(pa.array([blob], pa.large_binary()), b"\n").flatten()  # rows' JSON, one each
    if len(texts) != len(rows):
        raise _NotPlain
    unwritten = [np.zeros(0, np.uint64)]  # indices_nonzero gives uint64
    for name, column in zip(column_names, values.columns, strict=True):
        if column.null_count:
            nulls = pc.indices_nonzero(column.is_null() if name in keys else pc.and_(column.is_null(), puts))
            written = _null_text(name, column_names)
            if written is not None:
                nulls = nulls.filter(pc.invert(pc.match_substring(texts.take(nulls), written)))
            unwritten.append(nulls.to_numpy())
    where = np.unique(np.concatenate(unwritten)).tolist()
    if not where:
        return None
    fields = _fields(column_names)
    key_fields = {fields[column_names.index(k)] for k in keys}
    filled = [[False] * len(rows) for _ in fields]
    found = False
    for row, exact in zip(where, _exact_rows(column_names, [rows[i] for i in where]), strict=True):
        for i, field in enumerate(fields):
            if getattr(exact, field) is UNSET:
                if field in key_fields:
                    raise _NotPlain
                filled[i][row] = found = True
    return filled if found else None


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_$]+")


def _null_text(name: str, column_names: Sequence[str]) -> str | None:
    """The text that proves a column present and null in a row Arrow has read (an object of known, distinct
    columns with text or null values): ``"name":null``, as TiCDC writes it. Only for a plain name, in a
    table with no quote in a column name: a ``"`` before the name is then either a key's opening quote, or
    a string's closing one (a name character cannot follow), or an escaped one inside a string (which the
    quote after the name would end, making it a key whose name holds a quote). None where that does not
    hold; other spacing is not matched, so such a row is decoded exactly."""
    if not _PLAIN_NAME.fullmatch(name) or any('"' in other for other in column_names):
        return None
    return f'"{name}":null'


def _exact_rows(column_names: tuple[str, ...], rows: list[Any]) -> list[Any]:
    """Raw row objects decoded exactly (absent columns UNSET)."""
    if not rows:
        return []
    try:
        exact = _row_decoder(column_names).decode_lines(b"\n".join(rows))
    except _NOT_PARSED:
        raise _NotPlain from None
    if len(exact) != len(rows):
        raise _NotPlain
    return exact


@lru_cache(maxsize=256)
def _row_decoder(column_names: tuple[str, ...]) -> msgspec.json.Decoder:
    """Exact decoder of one row object (absent columns UNSET) of a table with these columns."""
    return msgspec.json.Decoder(_decoders(column_names)[1])


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


__all__ = ["WATERMARK", "parse_canal_json", "parse_canal_values", "split_lines"]
