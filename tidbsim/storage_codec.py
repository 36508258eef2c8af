"""The lines a TiCDC storage sink writes for one row change: CSV and canal-json (TiDB extension).

CSV mirrors tiflow ``pkg/sink/codec/csv/csv_message.go``: ``op, table, schema[, commit-ts][, is-update]``
then the columns in table order; strings quoted (quote doubled) or, without a quote character,
backslash-escaped; other values printed with Go's ``%v``; binary strings base64 or hex; ENUM/SET as
names; an UPDATE is one ``U`` row, or with ``output-old-value`` a ``D`` (old) and an ``I`` (new) row, both
marked as updates. Canal-json mirrors ``canal_json_row_event_encoder.go``: every value a JSON string
(``formatValue``: integers in decimal, floats with Go's shortest ``'f'`` format, binary bytes read as
ISO-8859-1, ENUM as its index and SET as its bit mask, as the mounter hands them over), ``sqlType`` the
java.sql type codes with canal's unsigned promotion, ``mysqlType`` TiDB's type names, and
``_tidb.commitTs``. Values come from the codec's value domain and go through the mounter's forms
(:func:`tidbsim.ticdc_open.go_value`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import schema as S
from backfill.codec.schema import ColumnKind, ColumnSchema, TableSchema
from tidbsim.changelog import RowGroup
from tidbsim.storage_schema import type_to_str
from tidbsim.ticdc_open import (
    ArrowFastWriter,
    ArrowWriter,
    Float32,
    arrow_bit_texts,
    arrow_decimal_or_time_writer,
    arrow_floats,
    arrow_go_strings,
    arrow_integer_texts,
    arrow_latin1_strings,
    arrow_memoized,
    arrow_writer,
    go_floats,
    go_string,
    go_strings,
    go_value,
    group_sections,
    joined_members,
    memoized,
    null_safe,
    quoted,
    time_text,
    time_texts,
    with_nulls,
)

K = ColumnKind
PROTOCOLS = ("csv", "canal-json")
EXTENSIONS = {"csv": ".csv", "canal-json": ".json"}
BINARY_ENCODINGS = ("base64", "hex")


@dataclass(frozen=True)
class CsvOptions:
    """TiCDC's ``[sink.csv]`` settings (defaults as ``replica_config.go``, except commit ts on)."""

    delimiter: str = ","
    quote: str = '"'
    null: str = "\\N"
    terminator: str = "\r\n"
    include_commit_ts: bool = True
    binary_encoding_method: str = "base64"
    output_old_value: bool = False
    output_field_header: bool = False

    def __post_init__(self) -> None:
        if not self.delimiter or len(self.delimiter) > 2:
            raise ValueError("csv delimiter must be one or two characters")
        if len(self.quote) > 1 or (self.quote and self.quote in self.delimiter):
            raise ValueError("csv quote must be one character and not part of the delimiter")
        if self.binary_encoding_method not in BINARY_ENCODINGS:
            raise ValueError(f"binary-encoding-method must be one of {BINARY_ENCODINGS}")


# ------------------------------------------------------------------ Go number formats


def go_fmt_v(value: float, bits: int) -> str:
    """Go's ``fmt`` ``%v`` of a float: ``strconv.FormatFloat(f, 'g', -1, bits)``."""
    v = np.float32(value) if bits == 32 else np.float64(value)
    if v == 0:
        return "-0" if np.signbit(v) else "0"
    if not np.isfinite(v):
        return "NaN" if np.isnan(v) else ("+Inf" if v > 0 else "-Inf")
    mantissa, exp = np.format_float_scientific(v, unique=True, trim="-", exp_digits=2).split("e")
    e = int(exp)
    if e < -4 or e >= 6:  # shortest 'g' decides with precision 6
        return f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    return np.format_float_positional(v, unique=True, trim="-")


def go_fmt_f(value: float, bits: int) -> str:
    """``strconv.FormatFloat(f, 'f', -1, bits)``: shortest digits, never an exponent."""
    v = np.float32(value) if bits == 32 else np.float64(value)
    return np.format_float_positional(v, unique=True, trim="-")


# ------------------------------------------------------------------ CSV


def csv_value(col: ColumnSchema, value: Any, opts: CsvOptions, time_zone: str = "UTC") -> str | None:
    """The text of one CSV cell before quoting or escaping; None for NULL."""
    text = _csv_text(col, value, opts, time_zone)
    return None if text is None else text[0]


def _csv_text(
    col: ColumnSchema, value: Any, opts: CsvOptions, time_zone: str = "UTC"
) -> tuple[str, bool] | None:
    """(text, is a Go string) of one cell, None for NULL (``fromColValToCsvVal`` + ``formatValue``)."""
    if value is None:
        return None
    kind = col.kind
    if kind in (K.ENUM, K.SET):
        return str(value), True
    v = go_value(col, value, time_zone)
    if kind == K.BINARY:
        raw = bytes(v)
        text = base64.b64encode(raw).decode() if opts.binary_encoding_method == "base64" else raw.hex()
        return text, True
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace"), True
    if isinstance(v, str):
        return v, True
    if isinstance(v, float):
        return go_fmt_v(v, 32 if isinstance(v, Float32) else 64), False
    return str(v), False


def _csv_cell(text: tuple[str, bool] | None, opts: CsvOptions) -> str:
    if text is None:
        return opts.null
    value, is_string = text
    if not is_string:
        return value
    if opts.quote:
        return opts.quote + value.replace(opts.quote, opts.quote * 2) + opts.quote
    return _escape(value, opts.delimiter)


def _escape(value: str, delimiter: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        if value.startswith(delimiter, i):
            out.append("".join("\\" + ch for ch in delimiter))
            i += len(delimiter)
            continue
        ch = value[i]
        out.append({"\r": "\\r", "\n": "\\n", "\\": "\\\\"}.get(ch, ch))
        i += 1
    return "".join(out)


def csv_header(schema: TableSchema, opts: CsvOptions) -> bytes:
    """``output-field-header``: the first line of every file (``encodeHeader``)."""
    names = ["ticdc-meta$operation", "ticdc-meta$table", "ticdc-meta$schema"]
    if opts.include_commit_ts:
        names.append("ticdc-meta$commit-ts")
    if opts.output_old_value:
        names.append("ticdc-meta$is-update")
    names += [c.name for c in schema.columns]
    return (opts.delimiter.join(names) + opts.terminator).encode("utf-8")


def _csv_formatter(col: ColumnSchema, opts: CsvOptions, time_zone: str) -> Callable[[Any], str]:
    """The cell of a non-NULL value, decided once per column (as :func:`csv_value` and the quoting do)."""
    kind = col.kind
    if kind in (K.INT, K.UINT, K.YEAR):
        return str
    if kind == K.UINT64:
        return lambda v: str(int(v))
    if kind in (K.FLOAT32, K.FLOAT64):
        bits = 32 if kind == K.FLOAT32 else 64
        return lambda v: go_fmt_v(v, bits)
    if kind == K.BIT:
        return lambda v: str(int.from_bytes(v, "big"))
    q = opts.quote
    if not q:
        return lambda v: _csv_cell(_csv_text(col, v, opts, time_zone), opts)
    if kind in (K.TEXT, K.ENUM, K.SET, K.JSON, K.TIME, K.DECIMAL_STR):
        return lambda v: q + (v.replace(q, q + q) if q in v else v) + q
    if kind == K.DECIMAL:
        return lambda v: q + format(v, "f") + q
    if kind == K.DATE:
        return lambda v: q + v.isoformat() + q
    if kind == K.DATETIME:
        fsp = col.fsp
        return lambda v: q + time_text(v, fsp) + q
    return lambda v: _csv_cell(_csv_text(col, v, opts, time_zone), opts)


class CsvEncoder:
    """CSV lines of one table version, with each column's formatter chosen once."""

    def __init__(self, schema: TableSchema, db: str, opts: CsvOptions, *, time_zone: str = "UTC") -> None:
        self.opts = opts
        self.names = [c.name for c in schema.columns]
        self.formats = [_csv_formatter(c, opts, time_zone) for c in schema.columns]
        self.prefix = {
            op: opts.delimiter.join(_csv_cell((m, True), opts) for m in (op, schema.name, db))
            for op in ("I", "D", "U")
        }

    def _line(self, op: str, commit_ts: int, update: bool, row: Mapping[str, Any]) -> str:
        o = self.opts
        cells = [self.prefix[op]]
        if o.include_commit_ts:
            cells.append(str(commit_ts))
        if o.output_old_value:
            cells.append("true" if update else "false")
        null = o.null
        get = row.get
        cells += [
            null if (v := get(n)) is None else f(v) for n, f in zip(self.names, self.formats, strict=True)
        ]
        return o.delimiter.join(cells) + o.terminator

    def lines(self, commit_ts: int, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> bytes:
        """The CSV row(s) of one change: I, D, U, or D+I for an update with ``output-old-value``."""
        if new is None:
            assert old is not None
            text = self._line("D", commit_ts, False, old)
        elif old is None:
            text = self._line("I", commit_ts, False, new)
        elif self.opts.output_old_value:
            text = self._line("D", commit_ts, True, old) + self._line("I", commit_ts, True, new)
        else:
            text = self._line("U", commit_ts, True, new)
        return text.encode("utf-8")


def csv_lines(
    schema: TableSchema,
    db: str,
    commit_ts: int,
    new: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
    opts: CsvOptions,
) -> bytes:
    """The CSV row(s) of one change (see :class:`CsvEncoder`)."""
    return CsvEncoder(schema, db, opts).lines(commit_ts, new, old)


# ------------------------------------------------------------------ canal-json

JAVA_TINYINT, JAVA_SMALLINT, JAVA_INTEGER, JAVA_BIGINT = -6, 5, 4, -5
JAVA_REAL, JAVA_DOUBLE, JAVA_DECIMAL, JAVA_CHAR, JAVA_VARCHAR = 7, 8, 3, 1, 12
JAVA_DATE, JAVA_TIME, JAVA_TIMESTAMP, JAVA_BIT, JAVA_BINARY = 91, 92, 93, -7, -2
JAVA_BLOB, JAVA_CLOB, JAVA_NULL = 2004, 2005, 0
_JAVA_TYPES = {
    S.TP_TINY: JAVA_TINYINT,
    S.TP_SHORT: JAVA_SMALLINT,
    S.TP_LONG: JAVA_INTEGER,
    S.TP_FLOAT: JAVA_REAL,
    S.TP_DOUBLE: JAVA_DOUBLE,
    S.TP_NULL: JAVA_NULL,
    S.TP_NEWDECIMAL: JAVA_DECIMAL,
    S.TP_TIMESTAMP: JAVA_TIMESTAMP,
    S.TP_DATETIME: JAVA_TIMESTAMP,
    S.TP_LONGLONG: JAVA_BIGINT,
    S.TP_INT24: JAVA_INTEGER,
    S.TP_DATE: JAVA_DATE,
    S.TP_NEWDATE: JAVA_DATE,
    S.TP_DURATION: JAVA_TIME,
    S.TP_YEAR: JAVA_VARCHAR,
    S.TP_ENUM: JAVA_INTEGER,
    S.TP_SET: JAVA_BIT,
    S.TP_GEOMETRY: JAVA_BINARY,
    S.TP_BIT: JAVA_BIT,
    S.TP_JSON: JAVA_VARCHAR,
}
_PROMOTE = {  # canal's unsigned promotion: (type, largest signed value, promoted java type)
    S.TP_TINY: (127, JAVA_SMALLINT),
    S.TP_SHORT: (32767, JAVA_INTEGER),
    S.TP_LONG: (2**31 - 1, JAVA_BIGINT),
    S.TP_LONGLONG: (2**63 - 1, JAVA_DECIMAL),
}


def java_sql_type(col: ColumnSchema, value: Any) -> int:
    """``getJavaSQLType``: ``MySQLType2JavaType`` plus the unsigned promotion by value."""
    binary = col.charset == "binary"
    tp = col.tp
    if tp in (S.TP_TINYBLOB, S.TP_MEDIUMBLOB, S.TP_LONGBLOB, S.TP_BLOB):
        java = JAVA_BLOB if binary else JAVA_CLOB
    elif tp in (S.TP_VAR_STRING, S.TP_VARCHAR):
        java = JAVA_BLOB if binary else JAVA_VARCHAR
    elif tp == S.TP_STRING:
        java = JAVA_BLOB if binary else JAVA_CHAR
    else:
        java = _JAVA_TYPES.get(tp, JAVA_VARCHAR)
    if col.unsigned and value is not None and tp in _PROMOTE:
        limit, promoted = _PROMOTE[tp]
        if int(value) > limit:
            java = promoted
    return java


def mysql_type(col: ColumnSchema) -> str:
    """``utils.GetMySQLType`` without ``content-compatible``: TiDB's name plus `` unsigned``."""
    name = type_to_str(col.tp, col.charset)
    if col.unsigned and name not in ("bit", "year"):
        name += " unsigned"
    return name


def canal_value(col: ColumnSchema, value: Any, time_zone: str = "UTC") -> str | None:
    """``canalEntryBuilder.formatValue`` of the mounter's value; None for NULL."""
    if value is None:
        return None
    v = go_value(col, value, time_zone)
    if isinstance(v, bytes):
        return v.decode("latin-1") if col.charset == "binary" else v.decode("utf-8", "replace")
    if isinstance(v, float):
        return go_fmt_f(v, 32 if isinstance(v, Float32) else 64)
    return str(v)


def _canal_formatter(col: ColumnSchema, time_zone: str) -> Callable[[Any], str]:
    """The JSON text of a non-NULL value, decided once per column (as :func:`canal_value` does it)."""
    kind = col.kind
    if kind in (K.INT, K.UINT, K.YEAR):
        return lambda v: '"' + str(v) + '"'
    if kind == K.UINT64:
        return lambda v: '"' + str(int(v)) + '"'
    if kind == K.TEXT:
        return go_string
    if kind in (K.FLOAT32, K.FLOAT64):
        bits = 32 if kind == K.FLOAT32 else 64
        return lambda v: '"' + go_fmt_f(v, bits) + '"'
    if kind == K.DECIMAL:
        return lambda v: '"' + format(v, "f") + '"'
    if kind == K.DATE:
        return lambda v: '"' + v.isoformat() + '"'
    if kind == K.DATETIME:
        fsp = col.fsp
        return lambda v: '"' + time_text(v, fsp) + '"'
    if kind == K.ENUM:
        index = {e: str(i) for i, e in enumerate(col.elems, 1)} | {"": "0"}
        return lambda v: '"' + index[v] + '"'
    if kind in (K.JSON, K.TIME, K.DECIMAL_STR):
        return lambda v: go_string(str(v))
    return lambda v: go_string(canal_value(col, v, time_zone) or "")


def _canal_batch_formatter(
    col: ColumnSchema, time_zone: str, write: Callable[[Any], str]
) -> Callable[[list[Any]], list[str]]:
    """A column's non-null values -> their JSON texts, as ``write`` (:func:`_canal_formatter`) gives them
    one by one (the kinds without a faster form use it)."""
    kind = col.kind
    if kind in (K.INT, K.UINT, K.YEAR, K.UINT64):
        return lambda values: ['"' + t + '"' for t in map(str, map(int, values))]
    if kind == K.TEXT:
        return lambda values: (
            go_strings(values) if all(type(v) is str for v in values) else list(map(write, values))
        )
    if kind in (K.FLOAT32, K.FLOAT64):
        bits = 32 if kind == K.FLOAT32 else 64
        return lambda values: ['"' + t + '"' for t in go_floats(values, bits, exponent=False)]
    if kind == K.DECIMAL:
        return lambda values: ['"' + format(v, "f") + '"' for v in values]
    if kind == K.DATE:
        return lambda values: ['"' + v.isoformat() + '"' for v in values]
    if kind in (K.DATETIME, K.TIMESTAMP):
        zone = time_zone if kind == K.TIMESTAMP else None
        return lambda values: ['"' + t + '"' for t in time_texts(values, col.fsp, zone)]
    if kind in (K.JSON, K.TIME, K.DECIMAL_STR):
        return lambda values: go_strings(list(map(str, values)))
    if kind == K.BINARY:
        return lambda values: go_strings([bytes(v).decode("latin-1") for v in values])
    return memoized(write)


def _canal_arrow_formatter(
    col: ColumnSchema, time_zone: str, slow: Callable[[list[Any]], list[str]]
) -> ArrowFastWriter | None:
    """:func:`_canal_batch_formatter` by Arrow compute for the kinds and tags it can do (the same texts)."""
    kind = col.kind
    if kind in (K.INT, K.UINT, K.YEAR, K.UINT64):
        return null_safe(
            lambda values, tag: None if (t := arrow_integer_texts(values, tag)) is None else quoted(t)
        )
    if kind in (K.TEXT, K.JSON, K.TIME, K.DECIMAL_STR):
        return null_safe(lambda values, tag: arrow_go_strings(values) if tag == "str" else None)
    if kind in (K.DECIMAL, K.DATE, K.DATETIME, K.TIMESTAMP):
        return arrow_decimal_or_time_writer(col, time_zone)
    if kind in (K.FLOAT32, K.FLOAT64):
        bits = 32 if kind == K.FLOAT32 else 64
        return null_safe(
            lambda values, tag: None
            if (t := arrow_floats(values, tag, bits, exponent=False)) is None
            else quoted(t)
        )
    if kind == K.BINARY:
        return arrow_latin1_strings
    if kind == K.BIT:
        return lambda values, tag: None if (t := arrow_bit_texts(values, tag)) is None else quoted(t)
    return null_safe(arrow_memoized(slow))


class CanalJsonEncoder:
    """canal-json messages of one table version (``newJSONMessageForDML``); what does not depend on the
    row is built once.

    ``mysqlType`` is a Go map there, so its key order varies between messages; it is written in column
    order here (one of the orders TiCDC may print).
    """

    def __init__(
        self,
        schema: TableSchema,
        db: str,
        *,
        terminator: str = "\r\n",
        time_zone: str = "UTC",
        enable_tidb_extension: bool = True,
    ) -> None:
        self.columns = schema.columns
        self.names = [c.name for c in schema.columns]
        self.keys = [go_string(n) + ":" for n in self.names]
        self.formats = [_canal_formatter(c, time_zone) for c in schema.columns]
        self.batch_formats = [
            with_nulls(_canal_batch_formatter(c, time_zone, f))
            for c, f in zip(schema.columns, self.formats, strict=True)
        ]
        self.arrow_formats: list[ArrowWriter] = [
            arrow_writer(_canal_arrow_formatter(c, time_zone, f), f)
            for c, f in zip(schema.columns, self.batch_formats, strict=True)
        ]
        self.promoted = [c.unsigned and c.tp in _PROMOTE for c in schema.columns]
        self.static_sql_types = [str(java_sql_type(c, None)) for c in schema.columns]
        pk = [go_string(c.name) for c in schema.columns if c.is_primary_key]
        self.head = (
            '{"id":0,"database":' + go_string(db) + ',"table":' + go_string(schema.name) + ',"pkNames":'
            + ("[" + ",".join(pk) + "]" if pk else "null") + ',"isDdl":false,"type":"'
        )  # fmt: skip
        self.mysql_types = (
            ',"mysqlType":{' + ",".join(k + go_string(mysql_type(c)) for k, c in zip(self.keys, self.columns, strict=True)) + "}"
        )  # fmt: skip
        self.terminator = terminator
        self.tidb = enable_tidb_extension

    def _values(self, row: Mapping[str, Any]) -> str:
        get = row.get
        return "[{" + ",".join(
            k + ("null" if (v := get(n)) is None else f(v))
            for k, n, f in zip(self.keys, self.names, self.formats, strict=True)
        ) + "}]"  # fmt: skip

    def arrow_lines(
        self,
        group: RowGroup,
        commit_ts: Sequence[int],
        new_rows: Sequence[int],
        old_rows: Sequence[int],
        *,
        build_ms: int,
    ) -> pa.Array:
        """:meth:`line` of many changes whose rows are ``group``'s rows ``new_rows[i]``/``old_rows[i]``
        (-1: none), written by Arrow: each column's texts by one cast or compute call, the rest by joins."""
        new = np.asarray(new_rows, dtype=np.int64)
        old = np.asarray(old_rows, dtype=np.int64)
        sections, at = group_sections(group, new, old, self._arrow_sections)
        has_new, has_old = new >= 0, old >= 0
        data_rows = np.where(has_new, new, old)
        update = has_new & has_old
        kinds = np.where(update, "UPDATE", np.where(has_new, "INSERT", "DELETE")).astype(object)
        types = self._sql_types(group, data_rows)
        ts = np.asarray(commit_ts, dtype=np.uint64)
        es = pa.array(ts >> np.uint64(18)).cast(pa.string())
        old_part = pc.binary_join_element_wise(
            ',"old":', sections.take(pa.array(at[old], mask=~update)), ',"data":', ""
        ).fill_null(',"old":null,"data":')
        pieces: list[Any] = [self.head, pa.array(kinds, pa.string()), '","es":', es, ',"ts":' + str(build_ms)]
        pieces += [types, old_part, sections.take(pa.array(at[data_rows]))]
        if self.tidb:
            pieces += [',"_tidb":{"commitTs":', pa.array(ts).cast(pa.string()), "}"]
        return pc.binary_join_element_wise(*pieces, "}" + self.terminator, "")

    def _arrow_sections(self, group: RowGroup, rows: pa.RecordBatch) -> pa.Array:
        heads = list(zip(self.names, self.keys, strict=True))
        return joined_members(group, rows, heads, self.arrow_formats, ("[{", ",", "}]", "[{}]"))

    def _sql_types(self, group: RowGroup, data_rows: np.ndarray) -> pa.Array:
        """Each change's ``,"sql":"","sqlType":{..}`` and ``mysqlType``: a promoted unsigned column's
        type by whether its value is past the signed type's largest."""
        at = {name: i for i, name in enumerate(group.names)}
        code = np.zeros(len(data_rows), dtype=np.int64)
        every = len(data_rows) == group.batch.num_rows and bool(
            (data_rows == np.arange(len(data_rows))).all()
        )
        promoted = [c for c, p in zip(self.columns, self.promoted, strict=True) if p]
        for bit, c in enumerate(promoted):
            i = at.get(c.name)
            if i is None:
                continue
            column, tag = group.batch.column(i), group.tags[i]
            if not every:
                column = column.take(pa.array(data_rows))
            limit = _PROMOTE[c.tp][0]
            if tag == "int":
                over = pc.fill_null(pc.greater(column, limit), False).to_numpy(zero_copy_only=False)
            else:
                over = np.array(
                    [v is not None and int(v) > limit for v in group.python_column(i, pa.array(data_rows))]
                )
            code |= over.astype(np.int64) << bit
        texts = []
        codes, at_code = np.unique(code, return_inverse=True)
        for value in codes.tolist():
            over_of = {c.name: bool(value >> bit & 1) for bit, c in enumerate(promoted)}
            sql_types = [
                str(java_sql_type(c, _PROMOTE[c.tp][0] + 1 if over_of.get(c.name) else None)) if p else t
                for c, p, t in zip(self.columns, self.promoted, self.static_sql_types, strict=True)
            ]
            texts.append(
                ',"sql":"","sqlType":{' + ",".join(k + t for k, t in zip(self.keys, sql_types, strict=True))
                + "}" + self.mysql_types
            )  # fmt: skip
        return pa.array(texts, pa.string()).take(pa.array(at_code))

    def line(
        self, commit_ts: int, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None, *, build_ms: int
    ) -> bytes:
        """One message and the terminator."""
        row = new if new is not None else old
        assert row is not None
        kind = "DELETE" if new is None else ("INSERT" if old is None else "UPDATE")
        sql_types = [
            str(java_sql_type(c, row.get(c.name))) if p else t
            for c, p, t in zip(self.columns, self.promoted, self.static_sql_types, strict=True)
        ]
        out = [
            self.head,
            kind,
            '","es":',
            str(commit_ts >> 18),
            ',"ts":',
            str(build_ms),
            ',"sql":"","sqlType":{',
            ",".join(k + t for k, t in zip(self.keys, sql_types, strict=True)),
            "}",
            self.mysql_types,
        ]
        if kind == "UPDATE":
            assert old is not None and new is not None
            out += [',"old":', self._values(old), ',"data":', self._values(new)]
        else:
            out += [',"old":null,"data":', self._values(row)]
        if self.tidb:
            out.append(f',"_tidb":{{"commitTs":{commit_ts}}}')
        out.append("}")
        out.append(self.terminator)
        return "".join(out).encode("utf-8")


def canal_json_line(
    schema: TableSchema,
    db: str,
    commit_ts: int,
    new: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
    *,
    build_ms: int,
    terminator: str = "\r\n",
    time_zone: str = "UTC",
    enable_tidb_extension: bool = True,
) -> bytes:
    """One canal-json message (see :class:`CanalJsonEncoder`)."""
    encoder = CanalJsonEncoder(
        schema, db, terminator=terminator, time_zone=time_zone, enable_tidb_extension=enable_tidb_extension
    )
    return encoder.line(commit_ts, new, old, build_ms=build_ms)


__all__ = [
    "EXTENSIONS",
    "PROTOCOLS",
    "CanalJsonEncoder",
    "CsvEncoder",
    "CsvOptions",
    "canal_json_line",
    "canal_value",
    "csv_header",
    "csv_lines",
    "csv_value",
    "go_fmt_f",
    "go_fmt_v",
    "java_sql_type",
    "mysql_type",
]
