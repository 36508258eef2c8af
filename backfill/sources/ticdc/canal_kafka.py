"""TiCDC canal-json on Kafka (``protocol=canal-json``, tiflow ``canal_json_row_event_encoder.go``): one
message per row change, DDL or watermark, its value one canal-json document (:mod:`canal_json`).

Completeness needs the TiDB extension (``enable-tidb-extension=true``): ``_tidb.commitTs`` on rows and
DDLs, and ``TIDB_WATERMARK`` messages with ``_tidb.watermarkTs``, broadcast to every partition, which
are the partitions' resolved events. Without it nothing says what is complete, so a message without them
is refused. DDLs go to partition 0 only. Large-message handling (``onlyHandleKey``,
``claimCheckLocation``) is refused naming the message (``open_rows.incomplete_message``: the full row is
not in it), except for a DELETE by primary key, which needs no more.

:func:`decode_canal_records` gives the same events table as the open protocol's ``decode_records`` (the
row events keep their value for :func:`typed_canal_rows`); :func:`canal_table_info` infers a TableInfo
from a row message's ``mysqlType`` and ``pkNames`` when no schema folder is configured.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backfill.codec import DecodeStats, TableSchema
from backfill.sources.ticdc.arrow_bytes import decoded_each, nulled_unless, one_array
from backfill.sources.ticdc.canal_json import WATERMARK, parse_canal_values
from backfill.sources.ticdc.change_rows import to_arrow
from backfill.sources.ticdc.compression import check_codec, decompress
from backfill.sources.ticdc.open_protocol import DDL, EVENT_SCHEMA, RESOLVED, ROW, Where, event_line
from backfill.sources.ticdc.open_rows import FETCH_CLAIM_CHECK, FETCH_HANDLE_KEY, incomplete_message
from backfill.sources.ticdc.text_values import TextDialect
from tidelake.errors import InputError

_EXTENSION = (
    "the changefeed must write canal-json with enable-tidb-extension=true (commit ts on every change and "
    "TIDB_WATERMARK events, from which the resolved ts comes)"
)


class _Tidb(msgspec.Struct, gc=False):
    commitTs: int | None = None  # TiCDC's field names, as written
    watermarkTs: int | None = None
    onlyHandleKey: bool = False
    claimCheckLocation: str | None = None


class _Head(msgspec.Struct, gc=False):
    """What routing a message needs; ``data`` and the type maps are left to :mod:`canal_json`."""

    type: str = ""
    isDdl: bool = False
    database: str | None = ""
    table: str | None = ""
    sql: str | None = ""
    pkNames: list[str] | None = None
    tidb: _Tidb | None = msgspec.field(default=None, name="_tidb")


_HEAD = msgspec.json.Decoder(_Head)


def _error(where: Where, message: str) -> InputError:
    return InputError(f"canal-json: {where}: {message}")


def _head(value: bytes, where: Where) -> _Head:
    try:
        return _HEAD.decode(value)
    except msgspec.ValidationError as exc:  # (a DecodeError too: this one first)
        raise _error(where, f"not a canal-json message: {exc}") from None
    except msgspec.DecodeError as exc:
        raise _error(where, f"not JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise _error(where, f"not UTF-8 text (byte {exc.start})") from None


def _heads(values: pa.Array, place: Callable[[int], Where]) -> list[_Head]:
    """Every message's head, each value parsed in place; a failure (an empty or null value too) is located
    and named message by message."""
    try:
        return decoded_each(values, _HEAD.decode)
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    out = []
    for i, raw in enumerate(values.to_pylist()):
        if not raw:
            raise _error(place(i), "empty message value")
        out.append(_head(raw, place(i)))
    return out


def decode_canal_records(records: pa.Table | pa.RecordBatch, *, compression: str = "none") -> pa.Table:
    """Kafka records (columns value, topic, partition, offset) -> events (``EVENT_SCHEMA``), in order.

    Only the values' heads are read in Python; the records' columns go to the events as Arrow arrays (a
    Python object per message and column, there and back, cost as much as the parse: one per row change)."""
    check_codec(compression)
    value, topic, partition, offset = (
        _array(records, name) for name in ("value", "topic", "partition", "offset")
    )
    place = _places(records)
    if compression != "none":
        value = pa.array(_decompressed(value.to_pylist(), compression, place), pa.binary())
    types, ts, schemas, tables, queries = _routes(_heads(value, place), place)
    n = len(value)
    kinds = pa.array(types, pa.int8())
    arrays = [
        topic.cast(pa.string()), partition.cast(pa.int32()), offset.cast(pa.int64()),
        pa.array(np.zeros(n, np.int32)), kinds, pa.array(ts, pa.uint64()),
        pa.array(schemas, pa.string()), pa.array(tables, pa.string()),
        pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64()), pa.array(np.zeros(n, np.bool_)), pa.nulls(n, pa.string()),
        nulled_unless(value.cast(pa.binary()), np.asarray(types) == ROW),
        pa.array(queries, pa.string()), pa.nulls(n, pa.int32()),
    ]  # fmt: skip
    return pa.Table.from_arrays(arrays, schema=EVENT_SCHEMA)


def _array(records: pa.Table | pa.RecordBatch, name: str) -> pa.Array:
    return one_array(records.column(name))


def _places(records: pa.Table | pa.RecordBatch) -> Callable[[int], Where]:
    """Message index -> its place in Kafka, read from the Arrow columns only when an error asks."""
    topic, partition, offset = (_array(records, name) for name in ("topic", "partition", "offset"))
    return lambda i: Where(topic[i].as_py(), partition[i].as_py(), offset[i].as_py())


def _decompressed(
    values: list[bytes | None], compression: str, place: Callable[[int], Where]
) -> list[bytes | None]:
    out = list(values)
    for i, raw in enumerate(out):
        try:
            out[i] = decompress(compression, raw) if raw else raw
        except ValueError as exc:
            raise _error(place(i), f"value does not decompress ({exc})") from None
    return out


def _routes(
    heads: list[_Head], place: Callable[[int], Where]
) -> tuple[list[int], list[int], list[str | None], list[str | None], list[str | None]]:
    """Per message its event type, ts, schema, table and DDL query (None where the event has none); a
    message the events cannot be complete without (no TiDB extension, a large message's handle only) is
    refused naming it."""
    n = len(heads)
    types: list[int] = [ROW] * n
    ts: list[int] = [0] * n
    schemas: list[str | None] = [None] * n
    tables: list[str | None] = [None] * n
    queries: list[str | None] = [None] * n
    for i, head in enumerate(heads):
        tidb = head.tidb
        if head.type == WATERMARK and not head.isDdl:
            if tidb is None or tidb.watermarkTs is None:
                raise _error(place(i), f"a watermark without _tidb.watermarkTs; {_EXTENSION}")
            types[i], ts[i] = RESOLVED, tidb.watermarkTs
            continue
        if tidb is None or tidb.commitTs is None:
            raise _error(place(i), f"no _tidb.commitTs; {_EXTENSION}")
        if (tidb.onlyHandleKey or tidb.claimCheckLocation) and (head.type != "DELETE" or not head.pkNames):
            # a DELETE by primary key needs no more than the key; anything else needs the whole row
            fetch = (
                FETCH_CLAIM_CHECK + tidb.claimCheckLocation if tidb.claimCheckLocation else FETCH_HANDLE_KEY
            )
            raise _error(place(i), incomplete_message(fetch, f"{head.database}.{head.table}", tidb.commitTs))
        ts[i], schemas[i], tables[i] = tidb.commitTs, head.database or "", head.table or ""
        if head.isDdl:
            types[i], queries[i] = DDL, head.sql or ""
    return types, ts, schemas, tables, queries


def typed_canal_rows(
    events: pa.Table, schema: TableSchema, *, time_zone: str, stats: DecodeStats | None = None
) -> pa.Table:
    """The row events of one table (columns value, topic, partition, offset), typed like the storage
    source's canal-json; ``_tidb_line`` is the message's offset times 2^20 (the collapse's last order)."""
    from backfill.changes.collapse import LINE

    place = _places(events)

    def where(line: int) -> str:
        return f"canal-json: {place(line - 1)}"

    names = [c.name for c in schema.columns]
    keys = [k for k in schema.pk_columns if k in schema.by_name]
    rows = parse_canal_values(_array(events, "value"), names, keys, where)
    typed = to_arrow(schema, rows, TextDialect("latin1", True, time_zone), where=where, stats=stats)
    positions = pc.subtract(typed.column(LINE), 1)
    line = event_line(pc.take(events.column("offset"), positions))
    return typed.set_column(typed.schema.get_field_index(LINE), LINE, line)


# Lengths that do not change the Delta type, for base names without one; BIT gets 64 (8 bytes, as the
# open protocol's inferred schema: docs/kafka.md says what is lost).
_DEFAULT_LENGTHS = {"varchar": 16383, "char": 255, "varbinary": 65535, "binary": 255, "bit": 64}
_NEEDS_ARGUMENTS = re.compile(r"^(decimal|numeric)(\s+unsigned)?$", re.IGNORECASE)


def canal_table_info(db: str, name: str, doc: dict[str, Any], table_id: int) -> dict[str, Any]:
    """A TableInfo from one row message: columns in ``data`` order typed by ``mysqlType`` (full types with
    the changefeed's ``content-compatible=true``), the primary key from ``pkNames``."""
    from backfill.codec import tableinfo

    mysql_types: dict[str, str] = doc.get("mysqlType") or {}
    rows: Sequence[dict[str, Any]] = doc.get("data") or [{}]
    pk = list(doc.get("pkNames") or [])
    columns = list(rows[0]) or list(mysql_types)
    infos = []
    for offset, column in enumerate(columns):
        sql_type = mysql_types.get(column)
        if not sql_type:
            raise InputError(f"canal-json: {db}.{name}: no mysqlType for column {column!r}")
        if _NEEDS_ARGUMENTS.match(sql_type.strip()):
            raise InputError(
                f"canal-json: {db}.{name}: column {column!r} is {sql_type!r} without precision and scale; "
                "set content-compatible=true on the changefeed or configure [source.kafka] schema"
            )
        try:
            info = tableinfo.column_info(
                offset + 1, column, sql_type, offset=offset, primary_key=column in pk
            )
        except ValueError:  # a base name without its length (no content-compatible): any length types it
            base, _, unsigned = sql_type.strip().partition(" ")
            length = _DEFAULT_LENGTHS.get(base.lower())
            if length is None:
                raise InputError(
                    f"canal-json: {db}.{name}: column {column!r}: mysqlType {sql_type!r}"
                ) from None
            typed = f"{base}({length}) {unsigned}".strip()
            info = tableinfo.column_info(offset + 1, column, typed, offset=offset, primary_key=column in pk)
        infos.append(info)
    types = {c: mysql_types[c].split("(")[0].split(" ")[0].lower() for c in columns}
    single_int = len(pk) == 1 and types.get(pk[0]) in {"tinyint", "smallint", "mediumint", "int", "bigint"}
    key: str | list[str] | None = "int" if single_int else (pk or None)
    return tableinfo.table_info(table_id, name, infos, pk=key)


__all__ = ["canal_table_info", "decode_canal_records", "typed_canal_rows"]
