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
from backfill.sources.ticdc.arrow_bytes import offsets_and_bytes
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
from tidbsim.changelog import RowGroup, python_values

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


class RowValueEncoder:
    """:func:`row_value_json` for one table schema, fast: each column's ``"name":{"t":..,"h":..,"f":..,"v":``
    text and value writers are built once; the publisher writes many rows' values column by column by
    Arrow (:meth:`arrow_values`; tests hold both to the bytes of :func:`row_value_json`)."""

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
        self.columns = []
        self.batch_writers: list[Callable[[list[Any]], list[str]]] = []
        self.arrow_writers: list[ArrowWriter] = []
        for name in names:
            col = schema.by_name[name]
            head = go_string(name) + ':{"t":' + str(col.tp) + (',"h":true' if name in handles else "")
            write = _value_writer(col, flags[name], time_zone)
            self.columns.append((name, head + ',"f":' + str(flags[name]) + ',"v":', write))
            self.batch_writers.append(with_nulls(_batch_value_writer(col, flags[name], time_zone, write)))
            self.arrow_writers.append(
                arrow_writer(_arrow_value_writer(col, flags[name], time_zone), self.batch_writers[-1])
            )

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

    def arrow_values(self, group: RowGroup, new_rows: Sequence[int], old_rows: Sequence[int]) -> pa.Array:
        """:meth:`value` of many changes whose rows are ``group``'s rows ``new_rows[i]``/``old_rows[i]``
        (-1: none; an update's old row is dropped without ``output_old_value``), written by Arrow: each
        column's texts by one cast or compute call, the sections and values by string joins."""
        new = np.asarray(new_rows, dtype=np.int64)
        old = np.asarray(old_rows, dtype=np.int64)
        sections, at = group_sections(group, new, old, self._arrow_sections)
        has_new = new >= 0
        first = sections.take(pa.array(np.where(has_new, at[new], at[old])))
        keep_old = has_new & (old >= 0) if self.output_old_value else np.zeros(len(new), dtype=bool)
        second = sections.take(pa.array(at[old], mask=~keep_old))
        tail = pc.binary_join_element_wise(',"p":', second, "}", "").fill_null("}")
        prefix = pc.if_else(pa.array(has_new), '{"u":', '{"d":')
        return pc.binary_join_element_wise(prefix, first, tail, "")

    def _arrow_sections(self, group: RowGroup, rows: pa.RecordBatch) -> pa.Array:
        heads = [(name, head) for name, head, _ in self.columns]
        return joined_members(group, rows, heads, self.arrow_writers, ("{", "},", "}}", "{}"))

    def value(self, *, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> bytes:
        """The value JSON of an insert (``new``), update (``new`` + ``old``) or delete (``old``)."""
        if new is None:
            assert old is not None
            return ('{"d":' + self._section(old) + "}").encode("utf-8")
        text = '{"u":' + self._section(new)
        if old is not None and self.output_old_value:
            text += ',"p":' + self._section(old)
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


ArrowWriter = Callable[[pa.Array, str], pa.Array]
"""A column's values (Arrow, tagged as :func:`tidbsim.changelog.typed_column` tags them) -> their texts."""
ArrowFastWriter = Callable[[pa.Array, str], "pa.Array | None"]
"""The texts of a column's values (none NULL) by Arrow compute, or None where it cannot."""


NULL_SAFE = "null_safe"
"""Set on a fast writer that can be given NULLs (its texts are NULL there, the others right)."""


def null_safe(fast: ArrowFastWriter) -> ArrowFastWriter:
    setattr(fast, NULL_SAFE, True)
    return fast


def arrow_writer(fast: ArrowFastWriter | None, slow: Callable[[list[Any]], list[str]]) -> ArrowWriter:
    """``fast``, NULL as ``null``; where it gives None, ``slow`` (a writer of Python values, None too)
    over the column's Python values."""
    keeps_nulls = getattr(fast, NULL_SAFE, False)

    def run(values: pa.Array, tag: str) -> pa.Array:
        texts = None
        if fast is not None and tag != "none" and values.null_count < len(values):
            if not values.null_count or keeps_nulls:
                texts = fast(values, tag)
                if texts is not None and values.null_count:
                    texts = texts.fill_null("null")
            else:  # the fast writers see no NULL: their texts are spread back over the column
                valid = values.is_valid().to_numpy(zero_copy_only=False)
                dense = fast(values.filter(pa.array(valid)), tag)
                if dense is not None:
                    texts = dense.take(pa.array(np.cumsum(valid) - 1, mask=~valid)).fill_null("null")
        if texts is None:
            return pa.array(slow(python_values(values, tag)), pa.string())
        return texts

    return run


def group_sections(
    group: RowGroup,
    new: np.ndarray,
    old: np.ndarray,
    write: Callable[[RowGroup, pa.RecordBatch], pa.Array],
) -> tuple[pa.Array, np.ndarray]:
    """The texts ``write`` gives of the rows of ``group`` that ``new`` or ``old`` name (-1: none), and
    where each of the group's rows is among them."""
    named = np.zeros(group.batch.num_rows + 1, dtype=bool)
    named[new] = True
    named[old] = True
    need = np.flatnonzero(named[:-1])  # -1 marks the extra last slot
    at = np.full(group.batch.num_rows + 1, -1, dtype=np.int64)
    at[need] = np.arange(len(need))
    rows = group.batch if len(need) == group.batch.num_rows else group.batch.take(pa.array(need))
    return write(group, rows), at


def joined_members(
    group: RowGroup,
    rows: pa.RecordBatch,
    heads: Sequence[tuple[str, str]],
    writers: Sequence[ArrowWriter],
    frame: tuple[str, str, str, str],
) -> pa.Array:
    """Per row, one JSON text of its columns: ``frame`` = (opening, between, closing, no columns); each
    (column name, head) of ``heads`` gives the head and the column's text by its writer (``null`` for a
    column the table version lacks). All by Arrow."""
    opening, between, closing, empty = frame
    at = {name: i for i, name in enumerate(group.names)}
    pieces: list[Any] = []
    lead = opening
    for (name, head), write in zip(heads, writers, strict=True):
        i = at.get(name)
        texts = (
            pa.array(["null"] * rows.num_rows, pa.string())
            if i is None
            else write(rows.column(i), group.tags[i])
        )
        pieces += [lead + head, texts]
        lead = between
    if not pieces:
        return pa.array([empty] * rows.num_rows, pa.string())
    return pc.binary_join_element_wise(*pieces, closing, "")


def quoted(texts: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', texts, '"', "")


def _string_data(texts: pa.Array) -> str:
    """Every value of a string array, one after another."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + len(texts) + 1]
    data = texts.buffers()[2]
    if data is None or len(offsets) == 0:
        return ""
    return data.to_pybytes()[offsets[0] : offsets[-1]].decode("utf-8")


def arrow_go_strings(texts: pa.Array) -> pa.Array | None:
    """:func:`go_strings` of a string array without control characters (None: some have one)."""
    data = _string_data(texts)
    if _NEEDS_ESCAPE.search(data) is None:
        return quoted(texts)
    if _CONTROL.search(data) is not None:
        return None
    for ch, escaped in _JSON_ESCAPES:
        if ch in data:
            texts = pc.replace_substring(texts, ch, escaped)
    return quoted(texts)


def arrow_floats(values: pa.Array, tag: str, bits: int, *, exponent: bool = True) -> pa.Array | None:
    """:func:`go_floats` by Arrow's cast to text (the shortest digits): Go's wherever Arrow writes no
    exponent and Go would not either; the others by :func:`go_floats`."""
    if tag != "float":
        return None
    floats = values if bits == 64 else values.cast(pa.float32(), safe=False)
    texts = floats.cast(pa.string())
    magnitude = pc.abs(floats)
    odd = pc.or_(
        pc.or_(pc.match_substring(texts, "e"), pc.invert(pc.is_finite(floats))),
        pc.and_(
            pc.not_equal(magnitude, 0), pc.or_(pc.less(magnitude, 1e-6), pc.greater_equal(magnitude, 1e21))
        ),
    )
    if not pc.any(odd).as_py():
        return texts
    odd = odd.fill_null(False)
    others = go_floats(values.filter(odd).to_pylist(), bits, exponent=exponent)
    return pc.replace_with_mask(texts, odd, pa.array(others, pa.string()))


def _byte_table(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """A byte -> escaped bytes table for :func:`_escape_bytes`: (256 x widest) bytes and each length."""
    width = max(map(len, texts))
    table = np.zeros((256, width), dtype=np.uint8)
    for b, text in enumerate(texts):
        table[b, : len(text)] = np.frombuffer(text, dtype=np.uint8)
    return table, np.array([len(t) for t in texts], dtype=np.int64)


def _escape_bytes(
    values: pa.Array, table: tuple[np.ndarray, np.ndarray], *, separated: bool = False
) -> tuple[np.ndarray, bytes]:
    """Every byte of a binary array replaced by its ``table`` text: the new offsets and data (with
    ``separated``, a NUL byte after each value, the offsets not counting them)."""
    offsets, raw = offsets_and_bytes(values)
    texts, lengths = table
    widths = lengths[raw]
    ends = np.cumsum(widths)
    starts = ends - widths
    at = np.repeat(np.arange(len(raw)), widths)
    within = np.arange(int(ends[-1]) if len(ends) else 0) - starts[at]
    new_offsets = np.concatenate(([0], ends))[offsets - offsets[0]]
    if not separated:
        return new_offsets, texts[raw[at], within].tobytes()
    value_of = np.repeat(np.arange(len(values)), np.diff(offsets))  # each raw byte's value
    out = np.zeros(len(within) + len(values), dtype=np.uint8)
    out[(starts + value_of)[at] + within] = texts[raw[at], within]
    return new_offsets, out.tobytes()


def arrow_go_quotes(values: pa.Array, tag: str) -> pa.Array | None:
    """:func:`go_quotes` then :func:`_quoted_json` of a binary array: '\\', '"' and ASCII controls escaped
    on the bytes by one table lookup, the values decoded at once (bytes that are not UTF-8 as ``\\xNN``;
    a NUL after each value, where none is left, ends any sequence), the JSON escapes by Arrow; a value
    with a rune Go does not print goes the long way."""
    if tag != "bytes":
        return None
    _, data = _escape_bytes(values, _GO_QUOTE_BYTES, separated=True)
    text = data.decode("utf-8", "backslashreplace")
    texts = text.split("\x00")
    texts.pop()  # after the last NUL
    odd = [i for i, t in enumerate(texts) if not t.isprintable()]
    for i in odd:
        texts[i] = go_quote.quote(values[i].as_py())
    out = pa.array(texts, pa.string())
    if odd:
        text = "".join(texts)
    for ch, escaped in _JSON_ESCAPES:
        if ch in text:
            out = pc.replace_substring(out, ch, escaped)
    return quoted(out)


_BASE64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)


def arrow_base64(values: pa.Array) -> pa.Array:
    """``base64.b64encode`` of each value (of a binary or string array, its UTF-8 bytes), quoted: every
    value padded to whole 3-byte groups, each group's four letters by one table lookup, '=' for the pad."""
    offsets, raw = offsets_and_bytes(values)
    lengths = np.diff(offsets).astype(np.int64)
    groups = (lengths + 2) // 3
    group_ends = np.cumsum(groups)
    value_of = np.repeat(np.arange(len(values)), lengths)
    padded = np.zeros(3 * int(group_ends[-1]) if len(values) else 0, dtype=np.uint8)
    within = np.arange(len(raw)) - (offsets[:-1] - offsets[0])[value_of]
    padded[3 * (group_ends - groups)[value_of] + within] = raw
    triples = padded.reshape(-1, 3).astype(np.uint32)
    bits = triples[:, 0] << 16 | triples[:, 1] << 8 | triples[:, 2]
    letters = _BASE64[np.stack([bits >> 18, bits >> 12 & 63, bits >> 6 & 63, bits & 63], axis=1)].ravel()
    ends = 4 * group_ends
    pad = 3 * groups - lengths  # 0, 1 or 2 '='
    letters[(ends - 1)[pad >= 1]] = ord("=")
    letters[(ends - 2)[pad == 2]] = ord("=")
    new_offsets = np.concatenate(([0], ends)).astype(np.int32)
    texts = pa.StringArray.from_buffers(
        len(values), pa.py_buffer(new_offsets.tobytes()), pa.py_buffer(letters.tobytes())
    )
    return quoted(texts)


def arrow_latin1_strings(values: pa.Array, tag: str) -> pa.Array | None:
    """:func:`go_string` of each byte string read as latin-1 (canal-json's binary values), quoted."""
    if tag != "bytes":
        return None
    offsets, data = _escape_bytes(values, _LATIN1_JSON_BYTES)
    return quoted(
        pa.StringArray.from_buffers(
            len(values), pa.py_buffer(offsets.astype(np.int32).tobytes()), pa.py_buffer(data)
        )
    )


def arrow_bit_texts(values: pa.Array, tag: str) -> pa.Array | None:
    """``str(int.from_bytes(v, "big"))`` of BIT values of one length, up to 8 bytes."""
    if tag != "bytes":
        return None
    lengths = pc.binary_length(values)
    width = pc.max(lengths).as_py()
    if width is None or width > 8 or pc.min(lengths).as_py() != width or width == 0:
        return None
    raw = offsets_and_bytes(values)[1].reshape(-1, width)
    padded = np.zeros((len(values), 8), dtype=np.uint8)
    padded[:, 8 - width :] = raw
    return pa.array(padded.view(">u8").ravel().astype(np.uint64)).cast(pa.string())


_DIGITS = r"^(0|[1-9][0-9]*)$"


def arrow_integer_texts(values: pa.Array, tag: str) -> pa.Array | None:
    """``str(int(v))`` of ints, or of Decimals written as plain digits."""
    if tag == "int":
        return values.cast(pa.string())
    if tag == "decimal" and pc.all(pc.match_substring_regex(values, _DIGITS)).as_py() is not False:
        return values
    return None


def arrow_decimal_texts(values: pa.Array, tag: str) -> pa.Array | None:
    """``format(Decimal(v), "f")`` quoted: a Decimal's ``str`` where it has no exponent."""
    if tag == "decimal" and not pc.any(pc.match_substring(values, "E")).as_py():
        return quoted(values)
    return None


def arrow_date_texts(values: pa.Array, tag: str) -> pa.Array | None:
    """``isoformat`` quoted, of dates from year 1000 on."""
    if tag == "date" and pc.min(values).as_py().year >= 1000:
        return quoted(values.cast(pa.string()))
    return None


def arrow_time_texts(values: pa.Array, tag: str, fsp: int, time_zone: str | None) -> pa.Array | None:
    """:func:`time_texts` quoted, by Arrow: naive DATETIME values, or UTC TIMESTAMP values in
    ``time_zone``, from year 1000 on (None for the others)."""
    width = 20 + fsp if fsp > 0 else 19
    try:
        if time_zone is None and tag == "datetime":
            stamps = values
        elif time_zone is not None and tag == "datetime_utc":
            arrow_zone = "UTC" if time_zone.upper() in ("UTC", "Z") else time_zone
            stamps = pc.local_timestamp(values.cast(pa.timestamp("us", tz=arrow_zone)))
        else:
            return None
        low = pc.min(stamps).as_py()
        if low is None or low.year < 1000:
            return None
        return quoted(pc.utf8_slice_codeunits(stamps.cast(pa.string()), 0, width))
    except (pa.ArrowException, ValueError):
        return None


def arrow_memoized(slow: Callable[[list[Any]], list[str]]) -> ArrowFastWriter:
    """``slow`` once per distinct value (ENUM and SET columns repeat theirs)."""

    def run(values: pa.Array, tag: str) -> pa.Array | None:
        if tag not in ("str", "int", "bytes"):
            return None
        encoded = values.dictionary_encode()
        texts = pa.array(slow(python_values(encoded.dictionary, tag)), pa.string())
        return texts.take(encoded.indices)

    return run


def arrow_decimal_or_time_writer(col: ColumnSchema, time_zone: str) -> ArrowFastWriter:
    """A DECIMAL, DATE, DATETIME or TIMESTAMP column's texts by Arrow, the same in both protocols (which
    quote them alike): TIMESTAMP in the changefeed's time zone, the others as stored."""
    if col.kind == K.DECIMAL:
        return null_safe(arrow_decimal_texts)
    if col.kind == K.DATE:
        return null_safe(arrow_date_texts)
    zone = time_zone if col.kind == K.TIMESTAMP else None
    return null_safe(lambda values, tag: arrow_time_texts(values, tag, col.fsp, zone))


def _arrow_value_writer(col: ColumnSchema, flag: int, time_zone: str) -> ArrowFastWriter | None:
    """:func:`_batch_value_writer` by Arrow compute for the kinds and tags it can do (the same texts)."""
    kind = col.kind
    if col.tp in STRING_CODES and kind == K.TEXT and not flag & FLAG_BINARY:
        return null_safe(lambda values, tag: arrow_go_strings(values) if tag == "str" else None)
    if col.tp in STRING_CODES and kind == K.BINARY and flag & FLAG_BINARY:
        return arrow_go_quotes
    if col.tp in BLOB_CODES and kind in (K.TEXT, K.BINARY):
        return (
            lambda values, tag: arrow_base64(values)
            if tag == ("str" if kind == K.TEXT else "bytes")
            else None
        )
    if col.tp in STRING_CODES or col.tp in BLOB_CODES:
        return None
    if kind in (K.INT, K.UINT, K.YEAR, K.UINT64):
        return null_safe(arrow_integer_texts)
    if kind in (K.FLOAT32, K.FLOAT64):
        bits = 32 if kind == K.FLOAT32 else 64
        return null_safe(lambda values, tag: arrow_floats(values, tag, bits))
    if kind == K.BIT:
        return arrow_bit_texts
    if kind in (K.DECIMAL, K.DATE, K.DATETIME, K.TIMESTAMP):
        return arrow_decimal_or_time_writer(col, time_zone)
    if kind in (K.DECIMAL_STR, K.JSON, K.TIME, K.VECTOR):
        return null_safe(lambda values, tag: arrow_go_strings(values) if tag == "str" else None)
    if kind in (K.ENUM, K.SET):
        return null_safe(arrow_memoized(with_nulls(memoized(_value_writer(col, flag, time_zone)))))
    return None


def arrow_bytes(texts: pa.Array) -> list[bytes]:
    """The values of an Arrow string (or binary) array without nulls, as bytes."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + len(texts) + 1]
    data = texts.buffers()[2]
    raw = b"" if data is None else data.to_pybytes()
    return [raw[a:b] for a, b in itertools.pairwise(offsets.tolist())]


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
_HTML_ESCAPES = _HTML
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


_CONTROL = re.compile("[\x00-\x1f]")
_JSON_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), *_HTML_ESCAPES)
"""Go's JSON escapes of what is not a control character, the backslash first."""

_GO_QUOTE_BYTES = _byte_table(
    [
        (b"\\\\" if b == 0x5C else b'\\"' if b == 0x22 else _QUOTE_CONTROL_TEXT.get(b, bytes([b])))
        for b in range(256)
    ]
)
"""Go's Quote of a byte below 0x80 (bytes from 0x80 on are kept: :func:`arrow_go_quotes` decodes them)."""

_LATIN1_JSON_BYTES = _byte_table([go_string(chr(b))[1:-1].encode() for b in range(256)])

__all__ = [
    "FLAVORS",
    "RowValueEncoder",
    "column_flags",
    "ddl_value_json",
    "go_json",
    "go_value",
    "handle_columns",
    "key_json",
    "row_columns",
    "row_value_json",
    "value_string",
]
