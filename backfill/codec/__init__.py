"""TiDB key/value codec: record keys, row formats v2 and v1, schemas and their history, Arrow decoding.

Pure Python + numpy + pyarrow (no Spark). Byte formats: shared/reference/tidb-kv-formats.md; the Delta
types follow the type map of docs/architecture.md "Delta conventions". Conventions other packages rely on:

- Value domain (decode produces, encode accepts): ints -> int (BIGINT UNSIGNED -> Decimal; int accepted);
  FLOAT/DOUBLE -> float; DECIMAL -> Decimal at the column scale (precision > 38 -> str); CHAR/VARCHAR/TEXT,
  ENUM (name), SET ("a,b" in definition order) and JSON -> str; BINARY/VARBINARY/BLOB and BIT ((n+7)//8
  bytes, big-endian) -> bytes; DATE -> date; DATETIME -> naive datetime; TIMESTAMP -> datetime in UTC
  (encode: aware values are converted, naive ones are taken as UTC); TIME -> str "[-]HH:MM:SS[.f]" (hours
  grow to 3 digits, fsp digits of the column); YEAR -> int; NULL -> None.
- JSON text is TiDB's own printing (what ``SELECT j`` shows): keys in binary order, ", " and ": "
  separators, floats shortest with ".0" on integral values and "e" notation below 1e-15 / from 1e15.
  The encoder takes JSON text (str) or Python values (dict, list, int, float, bool, None).
- Zero and impossible dates (0000-00-00, 2020-02-30, year 0) decode to None and are counted: pass a
  :class:`DecodeStats` to decode_row/decode_batch, and decode_batch also puts the batch's count in its
  schema metadata under ``ZERO_DATES_METADATA_KEY`` (b"tidelake.zero_dates"). Encode them with ZERO_TIME
  or a :class:`PackedTime` (any calendar fields).
- encode_row writes what TiDB writes: the int-PK handle column, clustered PK columns the key gives back,
  and NULLs of columns whose default and origin default are NULL are left out; values are not padded or
  trimmed (BINARY(n), CHAR) beyond what the caller gives.
- Every bad byte raises :class:`CodecError` (table id, handle, byte offset); nothing decodes half-right.
"""

from backfill.codec.arrow import ZERO_DATES_METADATA_KEY, decode_batch, decode_keys
from backfill.codec.errors import CodecError
from backfill.codec.history import SchemaHistory, SchemaVersion
from backfill.codec.keys import (
    RecordKey,
    classify_key,
    decode_record_key,
    from_comparable_key,
    record_key,
    table_span,
    to_comparable_key,
)
from backfill.codec.mytime import ZERO_TIME, PackedTime
from backfill.codec.row import DecodeStats, decode_row, encode_row
from backfill.codec.schema import ColumnKind, ColumnSchema, TableSchema

__all__ = [
    "ZERO_DATES_METADATA_KEY",
    "ZERO_TIME",
    "CodecError",
    "ColumnKind",
    "ColumnSchema",
    "DecodeStats",
    "PackedTime",
    "RecordKey",
    "SchemaHistory",
    "SchemaVersion",
    "TableSchema",
    "classify_key",
    "decode_batch",
    "decode_keys",
    "decode_record_key",
    "decode_row",
    "encode_row",
    "from_comparable_key",
    "record_key",
    "table_span",
    "to_comparable_key",
]
