"""One TiDB → Delta type map: every type the codec decodes maps the same way for the Delta table backfill
creates (Spark DDL), the Arrow batches it decodes, and the column reconcile expects and encodes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill.codec import TableSchema, encode_row, record_key
from backfill.codec.arrow import decode_batch
from backfill.codec.schema import BASE_TYPES, TP_NEWDATE, TP_VAR_STRING, TP_VECTOR, ColumnKind
from backfill.codec.tableinfo import column_info, table_info
from reconcile.schema import Kind, column_from_spark, column_from_type
from tidelake.typemap import arrow_type, delta_type

pytestmark = pytest.mark.unit

# SQL types covering every type code in the codec's BASE_TYPES, each sign, charset and width that matters.
SQL_TYPES = [
    "tinyint", "tinyint unsigned", "smallint", "smallint unsigned", "mediumint", "mediumint unsigned",
    "int", "int unsigned", "bigint", "bigint unsigned", "float", "double", "decimal(12,3)", "decimal(38,0)",
    "decimal(50,10)", "char(4)", "varchar(20)", "binary(4)", "varbinary(20)", "tinytext", "text",
    "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob", "enum('a','b')", "set('a','b')",
    "json", "bit(5)", "bit(64)", "date", "datetime", "datetime(3)", "timestamp", "timestamp(6)", "time",
    "time(2)", "year",
]  # fmt: skip

# The canonical encoding reconcile picks for what the codec decodes (reconcile/encoding.py, sparkenc.py).
ENCODING = {
    ColumnKind.INT: {Kind.INT}, ColumnKind.UINT: {Kind.INT}, ColumnKind.UINT64: {Kind.INT},
    ColumnKind.FLOAT32: {Kind.FLOAT}, ColumnKind.FLOAT64: {Kind.DOUBLE}, ColumnKind.DECIMAL: {Kind.DECIMAL},
    ColumnKind.DECIMAL_STR: {Kind.DECIMAL}, ColumnKind.TEXT: {Kind.TEXT}, ColumnKind.BINARY: {Kind.BINARY},
    ColumnKind.ENUM: {Kind.TEXT}, ColumnKind.SET: {Kind.TEXT}, ColumnKind.JSON: {Kind.JSON},
    ColumnKind.BIT: {Kind.BIT}, ColumnKind.DATE: {Kind.DATE}, ColumnKind.DATETIME: {Kind.DATETIME},
    ColumnKind.TIMESTAMP: {Kind.TIMESTAMP}, ColumnKind.TIME: {Kind.TIME}, ColumnKind.YEAR: {Kind.YEAR},
}  # fmt: skip


def _schema(sql_type: str) -> TableSchema:
    cols = [column_info(1, "id", "bigint", primary_key=True), column_info(2, "v", sql_type)]
    return TableSchema.from_table_info(table_info(7, "t", cols, pk="int"))


def test_the_types_cover_every_type_code_the_codec_decodes():
    codes = {_schema(t).by_name["v"].tp for t in SQL_TYPES}
    # VAR_STRING and NEWDATE are old codes today's DDL never writes; VECTOR has no MySQL spelling here.
    assert set(BASE_TYPES) - codes == {TP_VAR_STRING, TP_NEWDATE, TP_VECTOR}


@pytest.mark.parametrize("sql_type", SQL_TYPES)
def test_table_creation_decoding_and_reconcile_agree(sql_type: str):
    schema = _schema(sql_type)
    col = schema.by_name["v"]
    upstream = column_from_type("v", sql_type, collation="utf8mb4_bin")
    # reconcile expects the Delta type backfill creates the table with ...
    assert col.spark_type.lower() == upstream.delta_type
    assert f"`v` {col.spark_type}" in schema.spark_ddl
    # ... and backfill's decoded batches carry that type's Arrow type (what Spark writes to Delta) ...
    assert col.arrow_type == arrow_type(upstream.delta_type)
    batch = pa.RecordBatch.from_pydict(
        {"key": [record_key(7, 1)], "value": [encode_row(schema, {1: 1, 2: None})]}
    )
    assert decode_batch(schema, batch).schema.field("v").type == arrow_type(upstream.delta_type)
    # ... and encodes the decoded values with the encoding meant for them, the same whether it reads the
    # column's type upstream or only the Delta type (Parquet exports, expected states).
    assert upstream.kind in ENCODING[col.kind]
    from_delta = column_from_spark("v", upstream.delta_type)
    assert from_delta.delta_type == upstream.delta_type
    if upstream.delta_type not in ("string", "binary", "smallint") and upstream.kind is not Kind.INT:
        assert from_delta.kind == upstream.kind


def test_old_type_codes_and_vector_map_like_their_modern_twins():
    for code, twin in ((TP_VAR_STRING, "varchar"), (TP_NEWDATE, "date")):
        assert BASE_TYPES[code] == twin
    assert column_from_type("v", "vector(3)").delta_type == delta_type(BASE_TYPES[TP_VECTOR]) == "string"
