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

import msgspec

from backfill.sources.ticdc.change_rows import DELETE, PUT, ParsedRows
from tidelake.errors import InputError

WATERMARK = "TIDB_WATERMARK"


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
    data: bytes | str, terminator: str, column_names: Sequence[str], key_names: Sequence[str], where: str
) -> ParsedRows:
    """The row changes of one canal-json file of a table with ``column_names`` and key ``key_names``.

    Arrow's JSON reader takes a regular file (newline-terminated, every line a row change of known columns
    and no moved key); anything else goes line by line, which names the line of a problem."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if terminator in ("\n", "\r\n"):
        fast = _parse_with_arrow(raw, column_names, key_names)
        if fast is not None:
            return fast
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{where}:{line}: not UTF-8 text") from None
    return _parse_lines(text, terminator, column_names, key_names, where)


def _parse_with_arrow(raw: bytes, column_names: Sequence[str], key_names: Sequence[str]) -> ParsedRows | None:
    import io

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    row = pa.struct([(name, pa.string()) for name in column_names])
    by_name = pa.struct([(name, pa.int64()) for name in column_names])
    schema = pa.schema([
        ("id", pa.int64()), ("database", pa.string()), ("table", pa.string()), ("pkNames", pa.list_(pa.string())),
        ("isDdl", pa.bool_()), ("type", pa.string()), ("es", pa.int64()), ("ts", pa.int64()), ("sql", pa.string()),
        ("sqlType", by_name), ("mysqlType", pa.struct([(name, pa.string()) for name in column_names])),
        ("data", pa.list_(row)), ("old", pa.list_(row)),
        ("_tidb", pa.struct([("commitTs", pa.uint64())])),
    ])  # fmt: skip
    if not raw.endswith(b"\n") or b"\n\n" in raw or b"\n\r\n" in raw:
        return None  # blank or cut-short lines: line numbers need the line-by-line path
    try:
        table = pj.read_json(
            io.BytesIO(raw),
            read_options=pj.ReadOptions(block_size=max(1 << 20, len(raw) + 1)),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if table.num_rows != raw.count(b"\n"):
        return None
    kind = table.column("type").combine_chunks()
    is_ddl = pc.fill_null(table.column("isDdl").combine_chunks(), False)
    known = pc.fill_null(pc.is_in(kind, value_set=pa.array(["INSERT", "UPDATE", "DELETE"])), False)
    is_row = pc.and_(pc.invert(is_ddl), known)
    skipped = pc.or_(is_ddl, pc.fill_null(pc.equal(kind, WATERMARK), False))
    if not pc.all(pc.or_(is_row, skipped), min_count=0).as_py():
        return None  # an unknown type: the line-by-line path names it
    lines = pa.array(range(1, table.num_rows + 1), pa.int64()).filter(is_row)
    table = table.filter(is_row)
    ts = pc.struct_field(table.column("_tidb").combine_chunks(), "commitTs")
    data = table.column("data").combine_chunks()
    if (
        ts.null_count
        or table.column("_tidb").null_count
        or pc.any(pc.less(pc.list_value_length(data), 1)).as_py()
    ):
        return None
    if pc.max(pc.list_value_length(data)).as_py() not in (None, 1):
        return None  # several rows in one message (not what the storage sink writes)
    values = pc.list_flatten(data)
    kind = table.column("type").combine_chunks()
    old = table.column("old").combine_chunks()
    if not key_names and pc.any(pc.is_valid(old)).as_py():
        return None  # a multiset's updates: DELETE of the old row + PUT, line by line
    if key_names and pc.any(pc.equal(kind, "UPDATE")).as_py() and old.null_count < len(old):
        before = pc.list_element(old, 0)
        for key in key_names:
            before_key = pc.struct_field(before, key)
            moved = pc.and_(pc.is_valid(before_key), pc.not_equal(before_key, pc.struct_field(values, key)))
            if pc.any(pc.fill_null(moved, False)).as_py():
                return None  # a key-moving update: DELETE + PUT, line by line
    ops = pc.if_else(pc.equal(kind, "DELETE"), pa.scalar(DELETE), pa.scalar(PUT))
    columns = [pc.struct_field(values, name) for name in column_names]
    return ParsedRows(ops, ts.cast(pa.int64()), lines, columns)


def _parse_lines(
    text: str, terminator: str, column_names: Sequence[str], key_names: Sequence[str], where: str
) -> ParsedRows:
    width = len(column_names)
    index_of = {name: i for i, name in enumerate(column_names)}
    rows = ParsedRows.for_columns(width, fills=True)
    for line, raw in split_lines(text, terminator):
        try:
            message = _DECODE.decode(raw)
        except msgspec.ValidationError as exc:
            raise InputError(f"{where}:{line}: not a canal-json message: {exc}") from None
        except msgspec.DecodeError as exc:
            raise InputError(f"{where}:{line}: not JSON: {exc}") from None
        if message is None:
            raise InputError(f"{where}:{line}: not a canal-json message: null")
        if message.isDdl or message.type == WATERMARK:
            continue
        if message.type not in ("INSERT", "UPDATE", "DELETE"):
            raise InputError(f"{where}:{line}: type {message.type!r} is not INSERT, UPDATE or DELETE")
        ts = message.tidb.commitTs if message.tidb is not None else None
        if ts is None:
            raise InputError(
                f"{where}:{line}: no _tidb.commitTs; the changefeed must write canal-json with "
                "enable-tidb-extension=true"
            )
        if not message.data:
            raise InputError(f"{where}:{line}: a {message.type} without 'data'")
        unknown = [name for name in message.data[0] if name not in index_of]
        if unknown:
            raise InputError(f"{where}:{line}: column {unknown[0]!r} is not in the table's schema file")
        olds = message.old or []
        for position, values in enumerate(message.data):
            op = DELETE if message.type == "DELETE" else PUT
            old = olds[position] if message.type == "UPDATE" and position < len(olds) else None
            if old is not None and not key_names:  # a multiset: the old row goes, the new one comes
                _append(rows, index_of, width, {**values, **old}, DELETE, ts, line)
            elif old is not None and any(k in old and old[k] != values.get(k) for k in key_names):
                key_values = {k: old.get(k, values.get(k)) for k in key_names}
                _append(rows, index_of, width, key_values, DELETE, ts, line)
            _append(rows, index_of, width, values, op, ts, line)
    return rows


def _append(
    rows: ParsedRows,
    index_of: dict[str, int],
    width: int,
    values: dict[str, str | None],
    op: str,
    ts: int,
    line: int,
) -> None:
    rows.ops.append(op)
    rows.commit_ts.append(ts)
    rows.lines.append(line)
    present = [False] * width
    for name, value in values.items():
        i = index_of[name]
        rows.values[i].append(value)
        present[i] = True
    for i in range(width):
        if not present[i]:
            rows.values[i].append(None)
        rows.filled[i].append(not present[i])  # type: ignore[index]


__all__ = ["WATERMARK", "parse_canal_json", "split_lines"]
