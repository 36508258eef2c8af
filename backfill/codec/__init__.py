"""TiDB key/value codec: record keys, row formats v2 and v1, schemas and their history, Arrow decoding.

Pure Python + numpy + pyarrow (no Spark). Value domain and Delta types follow DESIGN.md's mapping table;
see the module docstrings for the byte formats (shared/reference/tidb-kv-formats.md).
"""

from backfill.codec.arrow import ZERO_DATES_METADATA_KEY, decode_batch
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
    "decode_record_key",
    "decode_row",
    "encode_row",
    "from_comparable_key",
    "record_key",
    "table_span",
    "to_comparable_key",
]
