"""What TiCDC's open-protocol encoder writes for a row: column flags, values, key and value JSON.

Mirrors tiflow ``pkg/sink/codec/open/open_protocol_{message,encoder}.go`` + ``internal/column.go`` +
``cdc/entry/mounter.go formatColVal`` (flavor ``"tiflow"``: key fields ts, scm, tbl, rid, ptn, t, ohk, ccl;
columns sorted by name, as Go's json.Marshal orders a map) and ticdc ``pkg/sink/codec/open/codec.go``
(flavor ``"ticdc"``: key fields ts, scm, tbl, t, ohk, ccl, ptn, no rid; columns in table order). Values
come from the codec's value domain (what ``decode_row`` gives) and are turned into what TiDB hands TiCDC:
ints, float32/float64, DECIMAL/DATE/DATETIME/TIMESTAMP/TIME/JSON text, bytes for strings, ENUM index,
SET bits, BIT as u64. :func:`go_json` writes JSON the way Go's encoding/json does.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import itertools
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from json.encoder import encode_basestring  # the C one, without ensure_ascii
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec.schema import ColumnKind, ColumnSchema, TableSchema
from backfill.sources.ticdc import go_quote
from backfill.sources.ticdc.open_rows import (
    BLOB_CODES,
    FLAG_BINARY,
    FLAG_HANDLE,
    FLAG_MULTIPLE,
    FLAG_NULLABLE,
    FLAG_PRIMARY,
    FLAG_UNIQUE,
    FLAG_UNSIGNED,
    STRING_CODES,
)

K = ColumnKind
FLAVORS = ("tiflow", "ticdc")
_MYSQL_UNIQUE_KEY = 4


class Float32(float):
    """A float TiDB holds as float32 (FLOAT columns): Go formats it with 32-bit precision."""


def column_flags(schema: TableSchema) -> dict[str, int]:
    """TiCDC's column flags (tiflow ``TableInfo.initColumnsFlag``, ticdc ``initColumnFlags``)."""
    handle = set(schema.pk_columns) if schema.pk_kind in ("int", "common") else set()
    flags: dict[str, int] = {}
    for c in schema.columns:
        f = 0
        if c.charset == "binary":
            f |= FLAG_BINARY
        if c.is_primary_key:
            f |= FLAG_PRIMARY
        if c.flag & _MYSQL_UNIQUE_KEY:
            f |= FLAG_UNIQUE
        if c.nullable:
            f |= FLAG_NULLABLE
        if c.unsigned:
            f |= FLAG_UNSIGNED
        if c.name in handle:
            f |= FLAG_HANDLE
        flags[c.name] = f
    for ix in schema.table_info.get("index_info") or ():
        names = [ic["name"]["O"] if isinstance(ic["name"], Mapping) else ic["name"] for ic in ix["idx_cols"]]
        for n in names:
            if n not in flags:
                continue
            if ix.get("is_primary"):
                flags[n] |= FLAG_PRIMARY
            elif ix.get("is_unique"):
                flags[n] |= FLAG_UNIQUE
            if len(names) > 1:
                flags[n] |= FLAG_MULTIPLE
    return flags


def handle_columns(schema: TableSchema) -> tuple[str, ...]:
    """TiCDC's handle-key columns: the clustered key (int PK or common handle); none for rowid tables
    without a unique NOT NULL index (the simulator's tables have no other index)."""
    return schema.pk_columns if schema.pk_kind in ("int", "common") else ()


def go_value(col: ColumnSchema, value: Any, time_zone: str = "UTC") -> Any:
    """The value TiCDC holds for a column (mounter ``formatColVal``) from the codec's value domain."""
    if value is None:
        return None
    kind = col.kind
    if kind in (K.INT, K.UINT, K.YEAR):
        return int(value)
    if kind == K.UINT64:
        return int(value)
    if kind == K.FLOAT32:
        return Float32(float(np.float32(value)))
    if kind == K.FLOAT64:
        return float(value)
    if kind == K.DECIMAL:
        return format(Decimal(value), "f")
    if kind in (K.DECIMAL_STR, K.JSON, K.TIME, K.VECTOR):
        return str(value)
    if kind == K.TEXT:
        return value.encode("utf-8")
    if kind == K.BINARY:
        return bytes(value)
    if kind == K.ENUM:
        return 0 if value == "" else col.elems.index(value) + 1
    if kind == K.SET:
        names = [n for n in str(value).split(",") if n]
        return sum(1 << col.elems.index(n) for n in names)
    if kind == K.BIT:
        return int.from_bytes(value, "big")
    if kind == K.DATE:
        return value.isoformat()
    if kind == K.DATETIME:
        return time_text(value, col.fsp)
    if kind == K.TIMESTAMP:
        local = value.astimezone(_zone(time_zone)).replace(tzinfo=None)
        return time_text(local, col.fsp)
    raise ValueError(f"no open-protocol value for kind {kind}")


def _zone(name: str) -> dt.tzinfo:
    if name.upper() in ("UTC", "Z"):
        return dt.UTC
    if name[:1] in "+-" and ":" in name:
        hh, mm = name[1:].split(":")
        delta = dt.timedelta(hours=int(hh), minutes=int(mm))
        return dt.timezone(delta if name[0] == "+" else -delta)
    return ZoneInfo(name)


def time_text(t: dt.datetime, fsp: int) -> str:
    text = t.strftime("%Y-%m-%d %H:%M:%S")
    if fsp > 0:
        text += "." + f"{t.microsecond:06d}"[:fsp]
    return text


def column_object(col: ColumnSchema, value: Any, flag: int, *, handle: bool, flavor: str) -> dict[str, Any]:
    """``{"t","h","f","v"}`` as ``FromRowChangeColumn``/``writeColumnFieldValue`` build it."""
    obj: dict[str, Any] = {"t": col.tp}
    if handle:
        obj["h"] = True
    obj["f"] = flag
    if value is None:
        obj["v"] = None
    elif col.tp in STRING_CODES:
        raw = value if isinstance(value, bytes) else str(value).encode()
        obj["v"] = go_quote.quote(raw) if flag & FLAG_BINARY else raw.decode("utf-8", "replace")
    elif col.tp in BLOB_CODES:
        obj["v"] = base64.b64encode(value).decode("ascii")
    else:
        obj["v"] = value
    return obj


def row_columns(
    schema: TableSchema,
    row: Mapping[str, Any],
    *,
    flavor: str,
    time_zone: str = "UTC",
    only: set[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Column objects of one row (``only``: handle-key columns only), ordered as the flavor writes them."""
    flags = column_flags(schema)
    handles = set(handle_columns(schema))
    out: dict[str, dict[str, Any]] = {}
    names = [c.name for c in schema.columns]
    if flavor == "tiflow":
        names.sort()
    for name in names:
        if only is not None and name not in only:
            continue
        col = schema.by_name[name]
        out[name] = column_object(
            col, go_value(col, row.get(name), time_zone), flags[name], handle=name in handles, flavor=flavor
        )
    return out


def key_json(
    ts: int,
    schema_name: str,
    table: str,
    *,
    type_: int = 1,
    flavor: str = "tiflow",
    row_id: int | None = None,
    physical_id: int | None = None,
    handle_only: bool = False,
    claim_check: str | None = None,
) -> bytes:
    """Key JSON of a row (1), DDL (2) or resolved (3) event in the flavor's field order."""
    if type_ == 3:
        return b'{"ts":' + str(ts).encode() + b',"t":3}'
    if flavor == "tiflow" and schema_name and table and not handle_only and not claim_check:  # a row's key
        text = '{"ts":' + str(ts) + _row_key_names(schema_name, table)
        text += (',"rid":' + str(row_id) if row_id else "") + (
            ',"ptn":' + str(physical_id) if physical_id is not None else ""
        )
        return (text + ',"t":' + str(type_) + "}").encode("utf-8")
    doc: dict[str, Any] = {"ts": ts}
    if schema_name:  # `omitempty` (internal/message_key.go): a database's DDL has no table
        doc["scm"] = schema_name
    if table:
        doc["tbl"] = table
    if flavor == "tiflow":
        if row_id:
            doc["rid"] = row_id
        if physical_id is not None:
            doc["ptn"] = physical_id
        doc["t"] = type_
        if handle_only:
            doc["ohk"] = True
        if claim_check:
            doc["ccl"] = claim_check
    else:
        doc["t"] = type_
        if handle_only:
            doc["ohk"] = True
        if claim_check:
            doc["ohk"] = False
            doc["ccl"] = claim_check
        if physical_id is not None:
            doc["ptn"] = physical_id
    return go_json(doc)


@functools.lru_cache(maxsize=4096)
def _row_key_names(schema_name: str, table: str) -> str:
    """A row key's ``,"scm":..,"tbl":..`` (once per table: every row event's key has it)."""
    return ',"scm":' + go_string(schema_name) + ',"tbl":' + go_string(table)


def row_value_json(
    schema: TableSchema,
    *,
    new: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
    flavor: str = "tiflow",
    time_zone: str = "UTC",
    output_old_value: bool = True,
    delete_handle_only: bool = False,
    handle_only: bool = False,
) -> bytes:
    """Value JSON of an insert (``new``), update (``new`` + ``old``) or delete (``old``)."""
    only = set(handle_columns(schema)) if handle_only else None
    if new is None:
        assert old is not None
        d_only = set(handle_columns(schema)) if (delete_handle_only or handle_only) else None
        return go_json({"d": row_columns(schema, old, flavor=flavor, time_zone=time_zone, only=d_only)})
    doc: dict[str, Any] = {"u": row_columns(schema, new, flavor=flavor, time_zone=time_zone, only=only)}
    if old is not None and output_old_value:
        doc["p"] = row_columns(schema, old, flavor=flavor, time_zone=time_zone, only=only)
    return go_json(doc)


REMEMBERED_ROWS = 1 << 17
"""Rows per table whose text :meth:`RowValueEncoder.values` keeps for the key's next update (then it
starts over: memory stays bounded at millions of keys, the bytes are the same)."""


class RowValueEncoder:
    """:func:`row_value_json` for one table schema, fast: each column's ``"name":{"t":..,"h":..,"f":..,"v":``
    text and value writer are built once, so a row is a join of strings (the publisher's hot path; tests
    hold it to the same bytes as :func:`row_value_json`)."""

    def __init__(
        self,
        schema: TableSchema,
        *,
        flavor: str = "tiflow",
        time_zone: str = "UTC",
        output_old_value: bool = True,
    ) -> None:
        flags = column_flags(schema)
        handles = set(handle_columns(schema))
        names = [c.name for c in schema.columns]
        if flavor == "tiflow":
            names.sort()
        self.output_old_value = output_old_value
        self.keys = tuple(k for k in schema.pk_columns if k in schema.by_name) or None
        self.last: dict[Any, tuple[Mapping[str, Any], str]] = {}  # per key: the last row written, its text
        self.columns = []
        self.batch_writers: list[Callable[[list[Any]], list[str]]] = []
        for name in names:
            col = schema.by_name[name]
            head = go_string(name) + ':{"t":' + str(col.tp) + (',"h":true' if name in handles else "")
            write = _value_writer(col, flags[name], time_zone)
            self.columns.append((name, head + ',"f":' + str(flags[name]) + ',"v":', write))
            self.batch_writers.append(with_nulls(_batch_value_writer(col, flags[name], time_zone, write)))
        # a section as one str.format template: "{" + head + value + "}" per column, joined by ","
        self.template = "{{" + ",".join(_braces(head) + "{}}}" for _, head, _ in self.columns) + "}}"

    def section(self, row: Mapping[str, Any]) -> str:
        """A row's column objects; an update's old row is mostly the row the key's last change wrote."""
        if self.keys is None:
            return self._section(row)
        key = tuple(map(row.get, self.keys))
        last = self.last.get(key)
        if last is not None and last[0] == row:
            return last[1]
        text = self._section(row)
        self.last[key] = (dict(row), text)
        return text

    def _section(self, row: Mapping[str, Any]) -> str:
        get = row.get
        return (
            "{"
            + ",".join(
                head + ("null" if (v := get(name)) is None else write(v)) + "}"
                for name, head, write in self.columns
            )
            + "}"
        )

    def values(
        self, changes: Sequence[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]]
    ) -> list[bytes]:
        """:meth:`value` of many changes ``(new, old)``, each column's values written at once (the
        publisher's hot path: a column's texts are one list comprehension or one Arrow cast, not a Python
        call per value); the same bytes, and the same reuse of a key's last text for an update's old row
        (the rows are kept for that, not copied: they must not change afterwards)."""
        rows: list[Mapping[str, Any]] = []  # the sections to write
        touched: list[Any] = []
        if len(self.last) > REMEMBERED_ROWS:
            self.last.clear()

        def slot(row: Mapping[str, Any]) -> int | str:
            if self.keys is None:
                rows.append(row)
                return len(rows) - 1
            key = tuple(map(row.get, self.keys))
            last = self.last.get(key)
            if last is not None and last[0] == row:
                return last[1]  # a text, or a slot of this batch
            rows.append(row)
            self.last[key] = (row, len(rows) - 1)  # type: ignore[assignment]  # the text below
            touched.append(key)
            return len(rows) - 1

        plan: list[tuple[int | str, int | str | None]] = []
        for new, old in changes:
            if new is None:
                assert old is not None
                plan.append((slot(old), None))
                if self.keys is not None:  # the key's next change is an insert: nothing to reuse
                    self.last.pop(tuple(map(old.get, self.keys)), None)
            else:
                keep_old = old is not None and self.output_old_value
                plan.append((slot(new), slot(old) if keep_old else None))  # type: ignore[arg-type]
        texts = self._sections(rows)
        for key in touched:
            entry = self.last.get(key)
            if entry is not None and isinstance(entry[1], int):
                self.last[key] = (entry[0], texts[entry[1]])
        out = []
        for (first, second), (new, _) in zip(plan, changes, strict=True):
            a = texts[first] if isinstance(first, int) else first
            if new is None:
                out.append(('{"d":' + a + "}").encode("utf-8"))
            elif second is None:
                out.append(('{"u":' + a + "}").encode("utf-8"))
            else:
                b = texts[second] if isinstance(second, int) else second
                out.append(('{"u":' + a + ',"p":' + b + "}").encode("utf-8"))
        return out

    def _sections(self, rows: list[Mapping[str, Any]]) -> list[str]:
        """Each row's column objects, written column by column."""
        if not rows:
            return []
        names = [name for name, _, _ in self.columns]
        columns = [
            write(values)
            for values, write in zip(column_values(rows, names), self.batch_writers, strict=True)
        ]
        return list(map(self.template.format, *columns))

    def value(self, *, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> bytes:
        """The value JSON of an insert (``new``), update (``new`` + ``old``) or delete (``old``)."""
        if new is None:
            assert old is not None
            return ('{"d":' + self.section(old) + "}").encode("utf-8")
        text = '{"u":' + self.section(new)
        if old is not None and self.output_old_value:
            text += ',"p":' + self.section(old)
        return (text + "}").encode("utf-8")


def _value_writer(col: ColumnSchema, flag: int, time_zone: str) -> Any:
    """A column's non-null value (codec domain) -> its JSON text, as ``column_object`` + :func:`go_json`."""
    if col.tp in STRING_CODES and col.kind == K.TEXT and not flag & FLAG_BINARY:
        return lambda value: go_string(value if isinstance(value, str) else go_value(col, value).decode())
    if col.tp in STRING_CODES:

        def string(value: Any) -> str:
            v = go_value(col, value, time_zone)
            raw = v if isinstance(v, bytes) else str(v).encode()
            return go_string(go_quote.quote(raw) if flag & FLAG_BINARY else raw.decode("utf-8", "replace"))

        return string
    if col.tp in BLOB_CODES:
        return lambda value: '"' + base64.b64encode(go_value(col, value, time_zone)).decode("ascii") + '"'
    kind = col.kind
    if kind in (K.INT, K.UINT, K.YEAR, K.UINT64):
        return lambda value: str(int(value))
    if kind in (K.FLOAT32, K.FLOAT64):
        bits = 32 if kind == K.FLOAT32 else 64
        return lambda value: go_float(go_value(col, value, time_zone), bits)
    if kind in (K.DECIMAL, K.DATE, K.DATETIME, K.TIMESTAMP):  # digits, '-', ':', '.', ' ': nothing to escape
        return lambda value: '"' + go_value(col, value, time_zone) + '"'
    if kind in (K.DECIMAL_STR, K.JSON, K.TIME, K.VECTOR):
        return lambda value: go_string(str(value))

    def other(value: Any) -> str:
        out: list[str] = []
        _write(out, go_value(col, value, time_zone))
        return "".join(out)

    return other


def column_values(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[list[Any]]:
    """Each named column's values over ``rows`` (None where a row has no such column): one C call per
    row (``itemgetter``) and one transpose, when every row has every column."""
    if not rows or not names:
        return [[] for _ in names]
    try:
        if len(names) == 1:
            return [[row[names[0]] for row in rows]]
        return list(map(list, zip(*map(operator.itemgetter(*names), rows), strict=True)))
    except KeyError:
        return [[row.get(name) for row in rows] for name in names]


def _braces(text: str) -> str:
    """``text`` as literal text of a ``str.format`` template."""
    return text.replace("{", "{{").replace("}", "}}")


def with_nulls(write: Callable[[list[Any]], list[str]]) -> Callable[[list[Any]], list[str]]:
    """A column writer of non-null values, extended to None (JSON ``null``)."""

    def run(values: list[Any]) -> list[str]:
        present = [v for v in values if v is not None]
        if len(present) == len(values):
            return write(values)
        out = np.full(len(values), "null", dtype=object)
        if present:  # the texts as objects: numpy would make a list of str a fixed-width array first
            at = np.flatnonzero(np.fromiter((v is not None for v in values), bool, len(values)))
            out[at] = np.array(write(present), dtype=object)
        return out.tolist()

    return run


def go_strings(values: list[str]) -> list[str]:
    """:func:`go_string` of many strings: one scan of them all when none needs an escape."""
    if _NEEDS_ESCAPE.search("".join(values)) is None:
        return ['"' + v + '"' for v in values]
    return list(map(go_string, values))


def go_floats(values: list[Any], bits: int, *, exponent: bool = True) -> list[str]:
    """:func:`go_float` (``exponent``) or ``FormatFloat(f, 'f', -1, bits)`` of many floats. The shortest
    digits are Python's ``repr`` (64 bits) or Arrow's cast to text (32 bits), Go's own wherever those
    write no exponent and Go's JSON would not either (1e-6 <= |f| < 1e21; ``repr`` writes an exponent
    outside [1e-4, 1e16)); the others one by one (``exponent=False``: numpy's positional form)."""
    if bits == 64:
        texts = [t[:-2] if t.endswith(".0") else t for t in map(repr, map(float, values))]
        numbers = values
    else:
        floats = pa.array(values, pa.float64()).cast(pa.float32(), safe=False)
        texts = arrow_texts(floats.cast(pa.string()))
        numbers = floats.to_numpy(zero_copy_only=False).tolist()
    out = []
    for text, f in zip(texts, numbers, strict=True):
        if "e" in text or "n" in text or not 1e-6 <= abs(f) < 1e21:
            if exponent:
                text = go_float(f, bits)
            else:
                v = np.float32(f) if bits == 32 else np.float64(f)
                text = np.format_float_positional(v, unique=True, trim="-")
        out.append(text)
    return out


def arrow_texts(texts: pa.StringArray) -> list[str]:
    """The values of an Arrow string array without nulls, cut from its data buffer (``to_pylist`` makes a
    scalar of each, several times slower)."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + len(texts) + 1]
    data = texts.buffers()[2]
    raw = b"" if data is None else data.to_pybytes()
    if raw.isascii():
        text = raw.decode("ascii")
        return [text[a:b] for a, b in itertools.pairwise(offsets.tolist())]
    return [raw[a:b].decode() for a, b in itertools.pairwise(offsets.tolist())]


def time_texts(values: list[dt.datetime], fsp: int, time_zone: str | None = None) -> list[str]:
    """:func:`time_text` of many datetimes (TIMESTAMP values, aware, in ``time_zone`` first): Arrow's text
    of them cut to ``fsp``, which is ``strftime``'s when every year is from 1000 on; else ``isoformat``
    (the same), or :func:`time_text` for earlier years (and zones Arrow does not know, as ``+08:00``)."""
    width = 20 + fsp if fsp > 0 else 19
    try:
        if time_zone is None:
            stamps = pa.array(values, pa.timestamp("us"))
        elif all(v.tzinfo is not None for v in values):
            arrow_zone = "UTC" if time_zone.upper() in ("UTC", "Z") else time_zone
            stamps = pc.local_timestamp(pa.array(values, pa.timestamp("us", tz=arrow_zone)))  # naive
        else:
            stamps = None
        low = pc.min(stamps).as_py() if stamps is not None else None
        if low is not None and low.year >= 1000:
            return [t[:width] for t in arrow_texts(stamps.cast(pa.string()))]
    except (pa.ArrowException, ValueError):  # a zone Arrow does not know: Python's
        pass
    if time_zone is not None:  # the offset isoformat writes is cut off below
        zone = _zone(time_zone)
        values = [v.astimezone(zone) for v in values]
    spec = "microseconds" if fsp > 0 else "seconds"
    return [v.isoformat(" ", spec)[:width] if v.year >= 1000 else time_text(v, fsp) for v in values]


def _batch_value_writer(
    col: ColumnSchema, flag: int, time_zone: str, write: Callable[[Any], str]
) -> Callable[[list[Any]], list[str]]:
    """A column's non-null values -> their JSON texts, as :func:`_value_writer`'s ``write`` gives them one
    by one (the kinds without a faster form use it)."""
    kind = col.kind
    if col.tp in STRING_CODES and kind == K.TEXT and not flag & FLAG_BINARY:
        return lambda values: (
            go_strings(values) if all(type(v) is str for v in values) else list(map(write, values))
        )
    if col.tp in STRING_CODES and kind == K.BINARY and flag & FLAG_BINARY:
        return lambda values: list(map(_quoted_json, go_quotes(values)))
    if col.tp in STRING_CODES:
        return lambda values: list(map(write, values))
    if col.tp in BLOB_CODES:
        if kind == K.TEXT:
            return lambda values: ['"' + base64.b64encode(v.encode()).decode("ascii") + '"' for v in values]
        if kind == K.BINARY:
            return lambda values: ['"' + base64.b64encode(v).decode("ascii") + '"' for v in values]
        return lambda values: list(map(write, values))
    if kind in (K.INT, K.UINT, K.YEAR, K.UINT64):
        return lambda values: list(map(str, map(int, values)))
    if kind in (K.FLOAT32, K.FLOAT64):
        bits = 32 if kind == K.FLOAT32 else 64
        return lambda values: go_floats(values, bits)
    if kind == K.DECIMAL:
        return lambda values: ['"' + format(Decimal(v), "f") + '"' for v in values]
    if kind == K.DATE:
        return lambda values: ['"' + v.isoformat() + '"' for v in values]
    if kind in (K.DATETIME, K.TIMESTAMP):
        zone = time_zone if kind == K.TIMESTAMP else None
        return lambda values: ['"' + t + '"' for t in time_texts(values, col.fsp, zone)]
    if kind in (K.DECIMAL_STR, K.JSON, K.TIME, K.VECTOR):
        return lambda values: go_strings(list(map(str, values)))
    if kind == K.BIT:
        return lambda values: [str(int.from_bytes(v, "big")) for v in values]
    return memoized(write)


_ESCAPE_SHORT = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v"}
_QUOTE_CONTROL = re.compile(b"[\x00-\x1f\x7f]")
_QUOTE_CONTROL_TEXT = {b: _ESCAPE_SHORT.get(b, f"\\x{b:02x}").encode() for b in (*range(0x20), 0x7F)}


def go_quotes(values: list[Any]) -> list[str]:
    """``go_quote.quote`` of many byte strings: '\\', '"' and ASCII controls escaped on the bytes, bytes
    that are not UTF-8 as ``\\xNN`` by the decoder (Go's ``\\x`` escape of them); a value whose text then
    holds a rune Go does not print (``str.isprintable`` is Go's ``unicode.IsPrint``) goes the long way."""
    out = []
    for value in values:
        data = bytes(value)
        raw = data.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
        if _QUOTE_CONTROL.search(raw) is not None:
            raw = _QUOTE_CONTROL.sub(lambda m: _QUOTE_CONTROL_TEXT[m.group()[0]], raw)
        text = raw.decode("utf-8", "backslashreplace")
        out.append(text if text.isprintable() else go_quote.quote(data))
    return out


def _quoted_json(quoted: str) -> str:
    """:func:`go_string` of a ``go_quote.quote`` text, which holds no control or line-separator runes."""
    text = quoted.replace("\\", "\\\\").replace('"', '\\"')
    if "<" in text or ">" in text or "&" in text:
        text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return '"' + text + '"'


def memoized(write: Callable[[Any], str]) -> Callable[[list[Any]], list[str]]:
    """``write`` over many values, once per distinct value (ENUM and SET columns repeat theirs)."""

    def run(values: list[Any]) -> list[str]:
        seen: dict[Any, str] = {}
        out = []
        for v in values:
            text = seen.get(v)
            if text is None:
                text = seen[v] = write(v)
            out.append(text)
        return out

    return run


def ddl_value_json(query: str, action: int) -> bytes:
    return go_json({"q": query, "t": action})


# ---------------------------------------------------------------- Go's encoding/json


def go_json(obj: Any) -> bytes:
    """JSON as Go's ``json.Marshal`` writes it: no spaces, HTML-safe string escapes, Go float format."""
    out: list[str] = []
    _write(out, obj)
    return "".join(out).encode("utf-8")


_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "<": "\\u003c", ">": "\\u003e"}
_ESC["&"] = "\\u0026"
_ESC["\u2028"] = "\\u2028"
_ESC["\u2029"] = "\\u2029"


_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029]')


_GO_SHORT_ONLY_IN_JSON = re.compile("[\b\f]")
"""What Go writes as ``\\u0008``/``\\u000c`` and Python's json as ``\\b``/``\\f`` (its other escapes are Go's)."""
_HTML = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_GO_ESCAPES = str.maketrans({**{chr(c): f"\\u{c:04x}" for c in range(0x20)}, **_ESC})


def go_string(s: str) -> str:
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    if _GO_SHORT_ONLY_IN_JSON.search(s) is None:
        text: str = encode_basestring(s)  # C
        for ch, escaped in _HTML:
            if ch in text:
                text = text.replace(ch, escaped)
        return text
    return '"' + s.translate(_GO_ESCAPES) + '"'


def go_float(f: float, bits: int = 64) -> str:
    """encoding/json floatEncoder: shortest round-trip digits, 'f' format unless tiny/huge ('e')."""
    if math.isnan(f) or math.isinf(f):
        raise ValueError(f"Go's json cannot encode {f}")
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    v = np.float32(f) if bits == 32 else np.float64(f)
    a = abs(float(v))
    if a < 1e-6 or a >= 1e21:
        text = np.format_float_scientific(v, unique=True, trim="-", exp_digits=2)
        if text[-3:-1] == "-0":  # Go cleans e-07 up to e-7
            text = text[:-2] + text[-1]
        return text
    return np.format_float_positional(v, unique=True, trim="-")


def _write(out: list[str], obj: Any) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, Float32):
        out.append(go_float(obj, 32))
    elif isinstance(obj, float):
        out.append(go_float(obj, 64))
    elif isinstance(obj, str):
        out.append(go_string(obj))
    elif isinstance(obj, dict):
        out.append("{")
        first = True
        for k, v in obj.items():
            if not first:
                out.append(",")
            first = False
            out.append(go_string(k))
            out.append(":")
            _write(out, v)
        out.append("}")
    else:
        raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def value_string(value: Any) -> bytes:
    """tiflow ``model.ColumnValueString`` of a TiCDC value, as the dispatchers hash it."""
    if value is None:
        return b"null"
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, Float32):
        return np.format_float_positional(np.float32(value), unique=True, trim="-").encode()
    if isinstance(value, float):
        return np.format_float_positional(np.float64(value), unique=True, trim="-").encode()
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")


__all__ = [
    "FLAVORS",
    "RowValueEncoder",
    "column_flags",
    "column_values",
    "ddl_value_json",
    "go_json",
    "go_value",
    "handle_columns",
    "key_json",
    "row_columns",
    "row_value_json",
    "value_string",
]
