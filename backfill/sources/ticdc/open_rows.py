"""Open-protocol row events of one table -> typed Arrow rows, the Delta types kv-scan decoding gives.

Column objects are ``{"t": type code, "h": handle (deprecated), "f": flags, "v": value}`` (tiflow
``pkg/sink/codec/internal/column.go``, ticdc ``pkg/sink/codec/open/codec.go``). Values, by type code:
integers as JSON numbers (unsigned ones as u64), FLOAT/DOUBLE numbers, DECIMAL/DATE/DATETIME/TIMESTAMP/
TIME/JSON/VECTOR as TiDB prints them, CHAR/VARCHAR (15, 253, 254) as text or, with the Binary flag,
Go-``strconv.Quote``-escaped (:mod:`go_quote`), the BLOB/TEXT codes 249-252 as base64, ENUM as its index,
SET as its bitmask, BIT as a u64. Messages from TiCDC before v4.0.5 have no ``"f"`` and carry CHAR/VARCHAR
values in base64 too (the docs' event-stream example); a column object without ``"f"`` is read that way.

The work is per column over the whole batch (one typed msgspec parse per batch, then one list per column
turned into Arrow and converted by Arrow compute); TIMESTAMP text is in the changefeed's time zone
(``time_zone``) and becomes a UTC instant. Zero or impossible dates become NULL and are counted (``stats``
and the schema metadata ``tidelake.zero_dates``, as ``decode_batch`` does). Output:
``TableSchema.arrow_schema`` (every field nullable: DELETE rows carry the key columns only), then
``_tidb_op`` (PUT/DELETE), ``_tidb_commit_ts`` (the storage decoders' shape), the ordering columns
``_kafka_partition``, ``_kafka_offset``, ``_kafka_index`` (event position in its message), ``_tidb_fetch``.

An update (``u`` + ``p``) whose key columns changed becomes a DELETE of the old key, then the PUT (same
ts, same position, the DELETE first). Handle-key-only events (``ohk``) and claim-check events (``ccl``)
that are PUTs carry only the handle columns: with ``incomplete="fail"`` they raise InputError, with
``"mark"`` they are returned with ``_tidb_fetch`` set to :data:`FETCH_HANDLE_KEY` or
``"claim-check:<location>"`` so the source can fetch the full row (at the event's ts) upstream.
"""

from __future__ import annotations

import binascii
import datetime as dt
import gc
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import ZERO_DATES_METADATA_KEY, DecodeStats
from backfill.codec.schema import ROWID_NAME, ColumnKind, ColumnSchema, TableSchema
from backfill.codec.values import ZeroDate, fill_value, int_bounds
from backfill.sources.ticdc import go_quote
from backfill.sources.ticdc.arrow_bytes import decoded_each
from backfill.sources.ticdc.open_protocol import ROW, Where
from tidelake.conventions import COMMIT_TS, OP
from tidelake.errors import InputError

K = ColumnKind
PARTITION, OFFSET, INDEX, FETCH = "_kafka_partition", "_kafka_offset", "_kafka_index", "_tidb_fetch"
PUT, DELETE = "PUT", "DELETE"
FETCH_HANDLE_KEY = "handle-key"
FETCH_CLAIM_CHECK = "claim-check:"

# Column flag bits (tiflow cdc/model/sink.go ColumnFlagType, 1 << iota)
FLAG_BINARY, FLAG_HANDLE, FLAG_GENERATED, FLAG_PRIMARY = 0x01, 0x02, 0x04, 0x08
FLAG_UNIQUE, FLAG_MULTIPLE, FLAG_NULLABLE, FLAG_UNSIGNED = 0x10, 0x20, 0x40, 0x80

STRING_CODES = frozenset({15, 253, 254})
BLOB_CODES = frozenset({249, 250, 251, 252})
TP_NULL = 6
# Type codes a value may carry for a column of each schema type family.
_FAMILIES: tuple[frozenset[int], ...] = (
    frozenset({1, 2, 3, 8, 9}),
    frozenset({4, 5}),
    frozenset({246}),
    STRING_CODES | BLOB_CODES,
    frozenset({10, 14}),
    frozenset({12}),
    frozenset({7}),
    frozenset({11}),
    frozenset({13}),
    frozenset({16}),
    frozenset({245}),
    frozenset({247}),
    frozenset({248}),
    frozenset({225}),
)
_FAMILY_OF = {code: fam for fam in _FAMILIES for code in fam}


class _Col(msgspec.Struct, gc=False):
    """A column object; ``f`` is None in messages from before v4.0.5 (no flags)."""

    t: int
    v: Any = None
    f: int | None = None
    h: bool = False

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)


class _Value(msgspec.Struct, gc=False):
    """A row value. ``p`` stays loose: ticdc's only-output-updated-columns can write stray fields in it."""

    u: dict[str, _Col] | None = None
    p: dict[str, Any] | None = None
    d: dict[str, _Col] | None = None


_VALUE = msgspec.json.Decoder(_Value)
_ATTR_T, _ATTR_V = attrgetter("t"), attrgetter("v")
_ATTR_U, _ATTR_P, _ATTR_D = attrgetter("u"), attrgetter("p"), attrgetter("d")
_TIME_TEXT = re.compile(r"-?\d{2,3}:\d{2}:\d{2}(\.\d{1,6})?\Z")
_OFFSET_TZ = re.compile(r"([+-])(\d{1,2}):(\d{2})\Z")


def output_schema(schema: TableSchema) -> pa.Schema:
    """The typed rows: the table's Delta columns (nullable), commit ts, op, ordering, fetch marker."""
    fields = [f.with_nullable(True) for f in schema.arrow_schema]
    fields += [
        pa.field(OP, pa.string(), nullable=False),
        pa.field(COMMIT_TS, pa.int64(), nullable=False),
        pa.field(PARTITION, pa.int32(), nullable=False),
        pa.field(OFFSET, pa.int64(), nullable=False),
        pa.field(INDEX, pa.int32(), nullable=False),
        pa.field(FETCH, pa.string()),
    ]
    return pa.schema(fields)


class _Bad(Exception):
    """Row ``row`` of the batch holds a value that breaks the format."""

    def __init__(self, row: int, message: str) -> None:
        self.row = row
        self.message = message


@contextmanager
def gc_paused() -> Iterator[None]:
    """For a parse that makes many small objects and no cycles (a dict or list per message): the cyclic
    GC would only rescan them (~12% of a canal-json file's decode)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _first_bad(values: Sequence[Any], ok: Callable[[Any], bool]) -> int:
    for i, v in enumerate(values):
        if not ok(v):
            return i
    return -1


class _Batch:
    """The row events of one table, parsed: op, section (u or d), old section (p) per event."""

    def __init__(self, events: pa.Table) -> None:
        self.n = events.num_rows
        self.partition = events.column("partition")
        self.offset = events.column("offset")
        self.index = events.column("index")
        self.ts = events.column("ts")
        self.row_id = events.column("row_id")
        self.topic = events.column("topic")  # the place columns stay Arrow: read per error only
        handle_only = events.column("handle_only")
        claim = events.column("claim_check")
        self.fetch: list[str | None] = (
            [None] * self.n  # the usual batch: no large-message event
            if not pc.any(handle_only).as_py() and claim.null_count == len(claim)
            else [
                FETCH_CLAIM_CHECK + c if c else FETCH_HANDLE_KEY if h else None
                for h, c in zip(handle_only.to_pylist(), claim.to_pylist(), strict=True)
            ]
        )
        self.put: list[bool] = []
        self.sections: list[dict[str, Any]] = []
        self.old: list[dict[str, Any] | None] = []
        values = events.column("value")
        docs: list[_Value] | None
        try:  # a typed parse of each value in place; a failure is located and named below
            with gc_paused():
                docs = decoded_each(values, _VALUE.decode) if values.null_count == 0 else None
        except (msgspec.DecodeError, TypeError):
            docs = None
        if docs is None:
            docs = []
            for i, raw in enumerate(values.to_pylist()):
                try:
                    docs.append(_VALUE.decode(raw))
                except msgspec.ValidationError as e:
                    raise self.error(i, f"row value does not have the open protocol's shape: {e}") from None
                except (msgspec.DecodeError, TypeError) as e:
                    raise self.error(i, f"row value is not JSON: {e}") from None
        dels = list(map(_ATTR_D, docs))
        ups = list(map(_ATTR_U, docs))
        olds = list(map(_ATTR_P, docs))
        self.put = [not d for d in dels]
        self.sections = [d or u for d, u in zip(dels, ups, strict=True)]
        self.old = [p if put and p else None for p, put in zip(olds, self.put, strict=True)]
        if not all(self.sections):
            bad = _first_bad(self.sections, bool)
            raise self.error(bad, "row value has neither 'u' (insert/update) nor 'd' (delete) columns")

    def where(self, row: int) -> Where:
        return Where(self.topic[row].as_py(), self.partition[row].as_py(), self.offset[row].as_py())

    def error(self, row: int, message: str) -> InputError:
        return self.where(row).error(message, self.index[row].as_py())


def incomplete_message(fetch: str, table: str, commit_ts: int) -> str:
    """Why a handle-key-only or claim-check PUT stops the run, and what to change.

    The full row is not fetched upstream: only TiDB can read a row as of a commit ts (``tidb_snapshot``),
    MySQL-compatible servers cannot, and reading the row as it is now would apply a later state early."""
    if fetch == FETCH_HANDLE_KEY:
        kind, option = "handle-key-only", 'large-message-handle-option = "handle-key-only"'
    else:
        kind = "claim-check"
        option = f'large-message-handle-option = "claim-check", the message stored at {fetch.removeprefix(FETCH_CLAIM_CHECK)!r}'
    return (
        f"{kind} event of {table} at commit ts {commit_ts} carries only the handle-key columns (the changefeed's "
        f"{option}); tidelake does not fetch the full row upstream: recreate the changefeed with "
        'large-message-handle-option = "none" and a max-message-bytes (changefeed and broker) above the largest '
        "row, starting before this commit ts"
    )


def rows_to_arrow(
    events: pa.Table,
    schema: TableSchema,
    *,
    time_zone: str = "UTC",
    incomplete: str = "fail",
    stats: DecodeStats | None = None,
    whole_rows: bool = False,
) -> pa.Table:
    """Row events of one table (``open_protocol.EVENT_SCHEMA`` rows) -> typed rows (:func:`output_schema`).

    ``time_zone``: the changefeed's time zone (a name like ``Asia/Shanghai`` or ``+08:00``), in which
    TiCDC printed TIMESTAMP values. ``incomplete``: ``"fail"`` or ``"mark"`` for handle-key-only and
    claim-check PUTs. ``stats`` counts rows and zero dates. ``whole_rows``: a table without a clustered
    key whose stored rows have no ``_tidb_rowid`` (a snapshot's), merged by primary key or whole rows: the
    row id is left NULL, a delete keeps every column, and an update deletes its old row (``p``) first.
    """
    if incomplete not in ("fail", "mark"):
        raise ValueError(f"incomplete must be 'fail' or 'mark', got {incomplete!r}")
    events = events.filter(pc.equal(events.column("type"), ROW))
    b = _Batch(events)
    target = output_schema(schema)
    if b.n == 0:
        return target.empty_table()
    for i, (fetch, put) in enumerate(zip(b.fetch, b.put, strict=True)) if any(b.fetch) else ():
        if fetch and put and incomplete == "fail":
            raise b.error(
                i, incomplete_message(fetch, f"{schema.schema_name or '?'}.{schema.name}", b.ts[i].as_py())
            )
    st = DecodeStats()
    decoder = _Decoder(schema, time_zone, st, b, whole_rows=whole_rows)
    is_put = pa.array(b.put, pa.bool_())
    columns = decoder.columns(b.sections, is_put, key_only_for_deletes=not whole_rows)
    meta = _meta(b, is_put)
    main = pa.Table.from_arrays([*columns, *meta], schema=target)
    st.rows += b.n
    if stats is not None:
        stats.add(st)
    zero_dates = {ZERO_DATES_METADATA_KEY: str(st.zero_dates).encode()}
    moved = decoder.moved_keys(b)
    if not moved:
        return main.replace_schema_metadata(zero_dates)
    rows = np.array(moved, dtype=np.int64)
    keys = [c.name for c in schema.columns] if whole_rows else schema.pk_columns
    old_sections = [  # a column absent from p did not change (only-output-updated-columns)
        {k: _as_col((b.old[i] or {}).get(k, b.sections[i].get(k)), b, i) for k in keys} for i in moved
    ]
    sub = _Subset(b, moved)
    key_cols = decoder.columns(
        old_sections, pa.array([False] * len(moved)), key_only_for_deletes=not whole_rows, batch=sub
    )
    sub_meta = [m.take(pa.array(rows)) for m in meta]
    sub_meta[0] = pa.array([DELETE] * len(moved), pa.string())
    sub_meta[-1] = pa.nulls(len(moved), pa.string())
    deletes = pa.Table.from_arrays([*key_cols, *sub_meta], schema=target)
    both = pa.concat_tables([main, deletes])
    position = np.concatenate([np.arange(b.n) * 2 + 1, rows * 2])
    return both.take(pa.array(np.argsort(position, kind="stable"))).replace_schema_metadata(zero_dates)


def _as_col(obj: Any, b: _Batch, row: int) -> _Col | None:
    if obj is None or isinstance(obj, _Col):
        return obj
    try:
        return msgspec.convert(obj, _Col)
    except msgspec.ValidationError as e:
        raise b.error(row, f"old value column is not a column object: {e}") from None


def _meta(b: _Batch, is_put: pa.Array) -> list[pa.Array]:
    ts = pc.cast(b.ts.combine_chunks(), pa.int64())  # TSOs are below 2^63; a larger one fails here
    op = pc.if_else(is_put, pa.scalar(PUT), pa.scalar(DELETE))
    fetch = (
        pa.array([f if put else None for f, put in zip(b.fetch, b.put, strict=True)], pa.string())
        if any(b.fetch)
        else pa.nulls(b.n, pa.string())
    )
    return [
        op,
        ts,
        b.partition.combine_chunks().cast(pa.int32()),
        b.offset.combine_chunks().cast(pa.int64()),
        b.index.combine_chunks().cast(pa.int32()),
        fetch,
    ]


class _Subset:
    """A view of some rows of a batch, for error locations and row ids of split-update DELETEs."""

    def __init__(self, b: _Batch, rows: list[int]) -> None:
        self.rows = rows
        self.b = b
        self.n = len(rows)
        self.row_id = b.row_id.take(pa.array(rows, pa.int64()))

    def error(self, row: int, message: str) -> InputError:
        return self.b.error(self.rows[row], message)


class _Decoder:
    def __init__(
        self,
        schema: TableSchema,
        time_zone: str,
        stats: DecodeStats,
        batch: _Batch,
        *,
        whole_rows: bool = False,
    ) -> None:
        self.schema = schema
        self.time_zone = time_zone
        self.stats = stats
        self.batch = batch
        self.key_names = set(schema.pk_columns)
        self.whole_rows = whole_rows

    def moved_keys(self, b: _Batch) -> list[int]:
        """Rows of updates whose old values (``p``) hold different key-column values than the new ones
        (`whole_rows`: every update with old values, its old row deleted as a whole)."""
        if self.whole_rows:
            return [i for i, old in enumerate(b.old) if old is not None]
        if self.schema.pk_kind == "rowid":
            return []  # the key is the row id, which an update keeps
        names = list(self.schema.pk_columns)
        out = []
        for i, old in enumerate(b.old):
            if old is None:
                continue
            new = b.sections[i]
            for name in names:
                before = old.get(name)
                if before is None:
                    continue  # only-output-updated-columns: an absent column did not change
                after = new.get(name)
                if not isinstance(before, dict | _Col) or not isinstance(after, _Col):
                    raise b.error(i, f"column {name!r} of an update is not a column object")
                if before.get("v") != after.get("v"):
                    out.append(i)
                    break
        return out

    def columns(
        self,
        sections: list[dict[str, Any]],
        is_put: pa.Array,
        *,
        key_only_for_deletes: bool,
        batch: Any = None,
    ) -> list[pa.Array]:
        b = batch if batch is not None else self.batch
        puts = is_put.to_numpy(zero_copy_only=False)
        put_list = is_put.to_pylist()  # zipped with Python lists: no numpy scalar per row
        out: list[pa.Array] = []
        any_delete = not puts.all()
        deletes = put_list.count(False)
        # a delete's non-key cells are not read: the sections once with an empty one for each delete
        masked = [s if p else {} for s, p in zip(sections, put_list, strict=True)] if any_delete else sections
        for field in self.schema.arrow_schema:
            name = field.name
            if name == ROWID_NAME and self.schema.pk_kind == "rowid":
                if self.whole_rows:
                    out.append(pa.nulls(len(sections), pa.int64()))
                    continue
                rid = b.row_id.combine_chunks() if isinstance(b.row_id, pa.ChunkedArray) else b.row_id
                if rid.null_count:
                    bad = int(np.flatnonzero(rid.is_null().to_numpy(zero_copy_only=False))[0])
                    raise b.error(
                        bad,
                        f"{self.schema.name} has no clustered primary key but the event carries no row "
                        "id ('rid'); this TiCDC does not write it (only tiflow does)",
                    )
                out.append(rid.cast(pa.int64()))
                continue
            col = self.schema.by_name[name]
            is_key = name in self.key_names
            if any_delete and key_only_for_deletes and not is_key:
                cells = list(map(dict.get, masked, repeat(name)))
                absent = cells.count(None) > deletes  # does a PUT lack this column?
            else:
                cells = list(map(dict.get, sections, repeat(name)))
                absent = None in cells
            if is_key and None in cells:  # filling it as TiCDC fills an absent column would invent the key
                i = cells.index(None)
                kind = "row" if put_list[i] else "delete"
                raise b.error(i, f"{kind} event without the key column {name!r}")
            try:
                arr = self._column(col, cells, puts, b, absent=absent)
            except _Bad as e:
                raise b.error(e.row, f"column {name!r}: {e.message}") from None
            if any_delete and key_only_for_deletes and not is_key:
                arr = pc.if_else(is_put, arr, pa.nulls(len(arr), arr.type))
            out.append(arr)
        return out

    # ------------------------------------------------------------ one column

    def _column(
        self, col: ColumnSchema, cells: list[Any], puts: np.ndarray, b: Any, *, absent: bool = True
    ) -> pa.Array:
        n = len(cells)
        try:
            if None in cells:
                try:  # column structs (the common case: a delete's non-key cells are None)
                    codes = [c.t if c is not None else None for c in cells]
                    vals = [c.v if c is not None else None for c in cells]
                except AttributeError:  # loose dicts (old values)
                    codes = [c["t"] if c is not None else None for c in cells]
                    vals = [c.get("v") if c is not None else None for c in cells]
            else:
                codes = list(map(_ATTR_T, cells))
                vals = list(map(_ATTR_V, cells))
        except (TypeError, KeyError, AttributeError):
            bad = _first_bad(cells, lambda c: c is None or (isinstance(c, dict) and "t" in c))
            raise _Bad(bad, "not a column object with a type code 't'") from None
        family = _FAMILY_OF.get(col.tp)
        for code in set(codes):  # a few distinct codes per column: check those, locate a bad one after
            if code is not None and code != col.tp and _FAMILY_OF.get(code) is not family:
                for i, (c, v) in enumerate(zip(codes, vals, strict=True)):
                    if c == code and not (c == TP_NULL and v is None):
                        raise _Bad(
                            i, f"type code {c} does not fit the schema's type {col.tp} ({col.spark_type})"
                        )
        arr = self._values(col, cells, vals, codes)
        if absent and None in cells and puts.any():
            fill_rows = np.fromiter((c is None for c in cells), bool, n) & puts
            if fill_rows.any():
                fill = fill_value(col)
                if isinstance(fill, ZeroDate):
                    self.stats.zero_dates += int(fill_rows.sum())
                    fill = None
                self.stats.filled += int(fill_rows.sum())
                arr = pc.if_else(pa.array(fill_rows), pa.scalar(fill, col.arrow_type), arr)
        if len(arr) != n:
            raise AssertionError("column length mismatch")
        return arr

    def _values(self, col: ColumnSchema, cells: list[Any], vals: list[Any], codes: list[Any]) -> pa.Array:
        kind = col.kind
        if kind in (K.INT, K.UINT, K.YEAR):
            return self._ints(col, vals, pa.int64())
        if kind == K.UINT64:
            return pc.cast(self._ints(col, vals, pa.uint64()), col.arrow_type)
        if kind in (K.FLOAT32, K.FLOAT64):
            arr = _typed(vals, pa.float64(), "a number")
            return pc.cast(arr, col.arrow_type) if kind == K.FLOAT32 else arr
        if kind == K.DECIMAL:
            arr = _typed(vals, pa.string(), "a decimal string")
            try:
                return pc.cast(arr, col.arrow_type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                prec, scale = col.decimal_precision
                bad = _first_bad(vals, lambda v: v is None or _fits_decimal(v, prec, scale))
                raise _Bad(bad, f"{vals[bad]!r} is not a DECIMAL({prec},{scale})") from None
        if kind in (K.DECIMAL_STR, K.JSON, K.VECTOR):
            return _typed(vals, pa.string(), "a string")
        if kind == K.TIME:
            arr = _typed(vals, pa.string(), "a TIME string")
            ok = pc.match_substring_regex(arr, "^" + _TIME_TEXT.pattern.removesuffix("\\Z") + "$")
            if not pc.all(pc.fill_null(ok, True), min_count=0).as_py():
                bad = _first_bad(vals, lambda v: v is None or _TIME_TEXT.match(v) is not None)
                raise _Bad(bad, f"{vals[bad]!r} is not a TIME value")
            return arr
        if kind in (K.TEXT, K.BINARY):
            return self._strings(col, cells, vals, codes)
        if kind == K.ENUM:
            return self._enum(col, vals)
        if kind == K.SET:
            return self._set(col, vals)
        if kind == K.BIT:
            return self._bit(col, vals)
        if kind in (K.DATE, K.DATETIME, K.TIMESTAMP):
            return self._time(col, vals)
        raise _Bad(0, f"no decoder for column kind {kind}")

    def _ints(self, col: ColumnSchema, vals: list[Any], typ: pa.DataType) -> pa.Array:
        arr = _typed(vals, typ, "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
        if col.kind == K.UINT64:
            return arr
        lo, hi = int_bounds(col)
        mm = pc.min_max(arr).as_py()
        if mm["min"] is not None and (mm["min"] < lo or mm["max"] > hi):
            bad = _first_bad(vals, lambda v: v is None or lo <= v <= hi)
            raise _Bad(bad, f"{vals[bad]} out of range {lo}..{hi} of {col.spark_type}")
        return pc.cast(arr, col.arrow_type)

    def _strings(self, col: ColumnSchema, cells: list[Any], vals: list[Any], codes: list[Any]) -> pa.Array:
        text = col.kind == K.TEXT
        blob = col.tp in BLOB_CODES
        flags = [c.get("f") if c is not None else 0 for c in cells]
        plain = not blob and all(
            code is None or (code in STRING_CODES and f is not None and not f & FLAG_BINARY)
            for f, code in zip(flags, codes, strict=True)
        )
        if plain:
            arr = _typed(vals, pa.string(), "a string")
            return arr if text else arr.cast(pa.binary())
        raw: list[bytes | None] = []
        for i, (v, f, code) in enumerate(zip(vals, flags, codes, strict=True)):
            if v is None:
                raw.append(None)
                continue
            if not isinstance(v, str):
                raise _Bad(i, f"{v!r} is not a string")
            try:
                if code in BLOB_CODES or f is None:
                    raw.append(binascii.a2b_base64(v, strict_mode=True))
                elif f & FLAG_BINARY:
                    raw.append(go_quote.unquote(v))
                else:
                    raw.append(v.encode("utf-8"))
            except (ValueError, binascii.Error) as e:
                how = "base64" if code in BLOB_CODES or f is None else "a Go-quoted string"
                raise _Bad(i, f"{v[:60]!r} is not {how}: {e}") from None
        if not text:
            return pa.array(raw, pa.binary())
        out: list[str | None] = []
        for i, r in enumerate(raw):
            try:
                out.append(None if r is None else r.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise _Bad(i, f"invalid UTF-8 in a text column at byte {e.start}") from None
        return pa.array(out, pa.string())

    def _indexes(self, vals: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        arr = _typed(vals, pa.uint64(), "an unsigned integer", lambda v: isinstance(v, int) and v >= 0)
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        return arr.fill_null(0).to_numpy(zero_copy_only=False), valid

    def _enum(self, col: ColumnSchema, vals: list[Any]) -> pa.Array:
        idx, valid = self._indexes(vals)
        if not col.elems:  # names unknown (schema built from the events): keep the number as text
            return _mask(pa.array([str(int(i)) for i in idx], pa.string()), valid)
        if (idx > len(col.elems)).any():
            bad = int(np.flatnonzero(idx > len(col.elems))[0])
            raise _Bad(bad, f"ENUM index {idx[bad]} out of range 0..{len(col.elems)}")
        names = pa.array(["", *col.elems], pa.string())
        return _mask(names.take(pa.array(idx.astype(np.int64))), valid)

    def _set(self, col: ColumnSchema, vals: list[Any]) -> pa.Array:
        bits, valid = self._indexes(vals)
        uniq, inverse = np.unique(bits, return_inverse=True)
        texts = []
        for j, u in enumerate(uniq.tolist()):
            if not col.elems:
                texts.append(str(u))
                continue
            if u >> len(col.elems):
                bad = int(np.flatnonzero(inverse == j)[0])
                raise _Bad(bad, f"SET bits {u:#x} name values beyond the {len(col.elems)} elements")
            texts.append(",".join(e for k, e in enumerate(col.elems) if u >> k & 1))
        return _mask(pa.array(texts, pa.string()).take(pa.array(inverse.astype(np.int64))), valid)

    def _bit(self, col: ColumnSchema, vals: list[Any]) -> pa.Array:
        v, valid = self._indexes(vals)
        width = (max(col.flen, 1) + 7) // 8
        if width < 8 and (v >> np.uint64(8 * width)).any():
            bad = int(np.flatnonzero(v >> np.uint64(8 * width))[0])
            raise _Bad(bad, f"bit value {int(v[bad]):#x} wider than BIT({col.flen})")
        mat = v.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - width :]
        fixed = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(width), len(v), [None, pa.py_buffer(np.ascontiguousarray(mat).tobytes())]
        )
        return _mask(fixed.cast(pa.binary()), valid)

    def _time(self, col: ColumnSchema, vals: list[Any]) -> pa.Array:
        arr = _typed(vals, pa.string(), "a date/time string")
        kind = col.kind
        parsed: pa.Array
        try:
            parsed = pc.cast(arr, pa.date32() if kind == K.DATE else pa.timestamp("us"))
        except pa.ArrowInvalid:
            parsed = self._time_slow(col, vals)
        if kind == K.TIMESTAMP:
            parsed = _to_utc(parsed, self.time_zone)
        return parsed

    def _time_slow(self, col: ColumnSchema, vals: list[Any]) -> pa.Array:
        """Per value: zero and impossible dates -> NULL (counted); malformed text -> error."""
        out: list[Any] = []
        for i, v in enumerate(vals):
            if v is None:
                out.append(None)
                continue
            m = _DATETIME.match(v)
            if not m:
                raise _Bad(i, f"{v!r} is not a date/time value")
            y, mo, d, h, mi, s, frac = m.groups()
            try:
                if col.kind == K.DATE:
                    out.append(dt.date(int(y), int(mo), int(d)))
                else:
                    usec = int((frac or "0").ljust(6, "0"))
                    out.append(
                        dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), usec)
                    )
            except ValueError:
                if int(h or 0) > 23 or int(mi or 0) > 59 or int(s or 0) > 59:
                    raise _Bad(i, f"{v!r} has time fields out of range") from None
                self.stats.zero_dates += 1
                out.append(None)
        return pa.array(out, pa.date32() if col.kind == K.DATE else pa.timestamp("us"))


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?: (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?)?\Z")


def _to_utc(naive: pa.Array, time_zone: str) -> pa.Array:
    """Local wall-clock times in ``time_zone`` -> UTC instants (ambiguous DST times: the earlier one)."""
    if time_zone.upper() in ("UTC", "+00:00", "-00:00", "Z"):
        return naive.cast(pa.timestamp("us", tz="UTC"))
    m = _OFFSET_TZ.match(time_zone)
    if m:
        sign, hh, mm = m.groups()
        shift = (int(hh) * 60 + int(mm)) * 60_000_000 * (1 if sign == "+" else -1)
        us = pc.cast(naive, pa.int64())
        return pc.cast(pc.subtract(us, shift), pa.timestamp("us", tz="UTC"))
    local = pc.assume_timezone(naive, time_zone, ambiguous="earliest", nonexistent="earliest")
    return local.cast(pa.timestamp("us", tz="UTC"))


def _fits_decimal(text: Any, prec: int, scale: int) -> bool:
    from decimal import Decimal, InvalidOperation

    try:
        d = Decimal(text)
    except (InvalidOperation, TypeError):
        return False
    return d.is_finite() and d == d.quantize(Decimal(1).scaleb(-scale)) and d.adjusted() < prec - scale


def _typed(vals: list[Any], typ: pa.DataType, what: str, ok: Callable[[Any], bool] | None = None) -> pa.Array:
    try:
        if ok is not None and float in set(map(type, vals)):  # Arrow truncates 1.5 to an integer 1
            raise TypeError("a fraction")
        return pa.array(vals, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
        if ok is None:
            ok = _CHECKS.get(typ, lambda v: True)
        bad = _first_bad(vals, lambda v: v is None or ok(v))
        if bad < 0:
            bad = _first_bad(vals, lambda v: _single(v, typ))
        raise _Bad(max(bad, 0), f"{vals[max(bad, 0)]!r} is not {what}") from None


def _single(v: Any, typ: pa.DataType) -> bool:
    try:
        pa.array([v], typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
        return False
    return True


_CHECKS: dict[pa.DataType, Callable[[Any], bool]] = {
    pa.string(): lambda v: isinstance(v, str),
    pa.float64(): lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def _mask(arr: pa.Array, valid: np.ndarray) -> pa.Array:
    if valid.all():
        return arr
    return pc.if_else(pa.array(valid), arr, pa.nulls(len(arr), arr.type))


__all__ = [
    "COMMIT_TS",
    "DELETE",
    "FETCH",
    "FETCH_CLAIM_CHECK",
    "FETCH_HANDLE_KEY",
    "INDEX",
    "OFFSET",
    "OP",
    "PARTITION",
    "PUT",
    "gc_paused",
    "output_schema",
    "rows_to_arrow",
]
