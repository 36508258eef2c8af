"""canal-json on Kafka (TiDB extension): messages to events, row events to typed changes, the schema
inferred from a message; errors name topic, partition and offset."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest

from backfill.codec import TableSchema
from backfill.sources.ticdc.canal_kafka import canal_table_info, decode_canal_records, typed_canal_rows
from backfill.sources.ticdc.open_protocol import DDL, RESOLVED, ROW, records_table
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

# The shapes of the docs' ticdc-canal-json.md examples (DML, DDL, WATERMARK), content-compatible types.
INSERT = {
    "id": 0, "database": "test", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
    "es": 1639633141221, "ts": 1639633142960, "sql": "", "sqlType": {"id": 4, "name": 12, "price": 3},
    "mysqlType": {"id": "int(11)", "name": "varchar(20)", "price": "decimal(10,2)"},
    "data": [{"id": "2", "name": "a", "price": "1.50"}], "old": None,
    "_tidb": {"commitTs": 429918007904436226},
}  # fmt: skip
UPDATE = {**INSERT, "type": "UPDATE", "data": [{"id": "3", "name": "b", "price": "2.00"}], "old": [{"id": "2"}],
          "_tidb": {"commitTs": 429918007904436227}}  # fmt: skip
DDL_MESSAGE = {
    "id": 0, "database": "test", "table": "t", "pkNames": None, "isDdl": True, "type": "ALTER",
    "es": 1639633094670, "ts": 1639633095489, "sql": "ALTER TABLE t ADD COLUMN x INT", "sqlType": None,
    "mysqlType": None, "data": None, "old": None, "_tidb": {"commitTs": 429918007904436228},
}  # fmt: skip
WATERMARK = {
    "id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False, "type": "TIDB_WATERMARK",
    "es": 1640007049196, "ts": 1640007050284, "sql": "", "sqlType": None, "mysqlType": None, "data": None,
    "old": None, "_tidb": {"watermarkTs": 429918007904436229},
}  # fmt: skip


def records(*docs: dict | bytes, partition: int = 1):
    return records_table([
        ("cdc", partition, 10 + i, None, d if isinstance(d, bytes) else json.dumps(d).encode())
        for i, d in enumerate(docs)
    ])  # fmt: skip


def test_messages_become_row_ddl_and_resolved_events() -> None:
    events = decode_canal_records(records(INSERT, UPDATE, DDL_MESSAGE, WATERMARK))
    assert events.column("type").to_pylist() == [ROW, ROW, DDL, RESOLVED]
    assert events.column("ts").to_pylist() == [429918007904436226 + i for i in range(4)]
    assert events.column("table").to_pylist() == ["t", "t", "t", None]
    assert events.column("ddl_query").to_pylist()[2] == "ALTER TABLE t ADD COLUMN x INT"
    assert json.loads(events.column("value")[0].as_py()) == INSERT


def test_rows_are_typed_and_ordered_by_offset() -> None:
    info = canal_table_info("test", "t", INSERT, 5)
    schema = TableSchema.from_table_info(info, schema_name="test")
    assert schema.pk_kind == "int" and [c.spark_type for c in schema.columns][2] == "DECIMAL(10,2)"
    events = decode_canal_records(records(INSERT, WATERMARK, UPDATE))
    rows = events.filter(pc.equal(events.column("type"), ROW))
    typed = typed_canal_rows(rows, schema, time_zone="UTC")
    assert [(r["_tidb_op"], r["id"], r["_tidb_line"] >> 20) for r in typed.to_pylist()] == [
        ("PUT", 2, 10), ("DELETE", 2, 12), ("PUT", 3, 12),
    ]  # fmt: skip


def test_a_row_without_its_key_column_is_named() -> None:
    """Filling an absent key like an absent column (its default) would invent the row's identity."""
    schema = TableSchema.from_table_info(canal_table_info("test", "t", INSERT, 5), schema_name="test")
    keyless = {**INSERT, "data": [{"name": "a", "price": "1.50"}]}
    events = decode_canal_records(records(INSERT, keyless))
    with pytest.raises(InputError, match=r"partition 1 offset 11: a row change without the key column 'id'"):
        typed_canal_rows(events, schema, time_zone="UTC")


def test_without_the_tidb_extension_the_message_is_named() -> None:
    plain = {k: v for k, v in INSERT.items() if k != "_tidb"}
    with pytest.raises(
        InputError,
        match=r"topic 'cdc' partition 1 offset 11: no _tidb.commitTs; .*enable-tidb-extension=true",
    ):
        decode_canal_records(records(WATERMARK, plain))
    bare_watermark = {k: v for k, v in WATERMARK.items() if k != "_tidb"}
    with pytest.raises(InputError, match=r"offset 10: a watermark without _tidb.watermarkTs"):
        decode_canal_records(records(bare_watermark))


def test_broken_and_large_messages_are_named() -> None:
    with pytest.raises(InputError, match=r"topic 'cdc' partition 1 offset 11: not JSON"):
        decode_canal_records(records(INSERT, b'{"type": "INSERT", "data": [{'))
    handle_only = {**INSERT, "_tidb": {"commitTs": 5, "onlyHandleKey": True}}
    with pytest.raises(InputError, match=r"offset 10: handle-key-only event of test.t at commit ts 5 .*"
                       r'large-message-handle-option = "none"'):  # fmt: skip
        decode_canal_records(records(handle_only))
    delete = {**handle_only, "type": "DELETE", "data": [{"id": "2"}]}
    assert decode_canal_records(records(delete)).column("type").to_pylist() == [ROW]
    schema = TableSchema.from_table_info(canal_table_info("test", "t", INSERT, 5), schema_name="test")
    bad = {**INSERT, "data": [{"id": "x", "name": "a", "price": "1"}]}
    events = decode_canal_records(records(INSERT, bad))
    with pytest.raises(
        InputError, match=r"topic 'cdc' partition 1 offset 11: column 'id': 'x' is not an integer"
    ):
        typed_canal_rows(events, schema, time_zone="UTC")


def test_compressed_values_become_the_same_events() -> None:
    """large-message-handle-compression: each value decompressed before its head is read; the events keep
    the decompressed row values, and a value that does not decompress is named."""
    from backfill.sources.ticdc.compression import compress

    docs = (INSERT, DDL_MESSAGE, WATERMARK, UPDATE)
    plain = decode_canal_records(records(*docs))
    packed = decode_canal_records(
        records(*(compress("lz4", json.dumps(d).encode()) for d in docs)), compression="lz4"
    )
    assert packed.equals(plain) and plain.column("value").null_count == 2
    with pytest.raises(InputError, match=r"topic 'cdc' partition 1 offset 11: value does not decompress"):
        decode_canal_records(records(compress("lz4", b"{}"), b"not lz4"), compression="lz4")


def test_an_empty_value_among_the_messages_is_named() -> None:
    with pytest.raises(InputError, match=r"topic 'cdc' partition 1 offset 11: empty message value"):
        decode_canal_records(records(INSERT, b""))


def test_a_value_over_several_lines_types_like_its_compact_form() -> None:
    """Each value is parsed on its own: JSON whitespace (line breaks too) inside one changes nothing, on the
    columnar path and on the exact one (an update that moves its key), and a bad value is still named."""
    schema = TableSchema.from_table_info(canal_table_info("test", "t", INSERT, 5), schema_name="test")
    compact = decode_canal_records(records(INSERT, UPDATE))
    spread = decode_canal_records(records(*(json.dumps(d, indent=2).encode() for d in (INSERT, UPDATE))))
    for events in (compact, spread):
        typed = typed_canal_rows(events, schema, time_zone="UTC")
        assert [(r["_tidb_op"], r["id"], r["name"]) for r in typed.to_pylist()] == [
            ("PUT", 2, "a"), ("DELETE", 2, None), ("PUT", 3, "b"),
        ]  # fmt: skip
    unknown = {**INSERT, "data": [{"id": "4", "name": "a", "price": "1", "zzz": "1"}]}
    events = decode_canal_records(records(*(json.dumps(d, indent=1).encode() for d in (INSERT, unknown))))
    with pytest.raises(InputError, match=r"partition 1 offset 11: column 'zzz' is not in the table's schema"):
        typed_canal_rows(events, schema, time_zone="UTC")


def test_a_batch_sliced_from_a_bigger_one_decodes() -> None:
    """Arrow batches cut from a bigger one carry an offset into shared buffers; the events (their values
    too) are those of the batch alone."""
    import pyarrow as pa

    whole = pa.concat_tables([records(INSERT, json.dumps({**INSERT, "es": i}).encode()) for i in range(5)])
    batch = whole.combine_chunks().to_batches()[0].slice(2, 3)
    events = decode_canal_records(batch)
    events.validate(full=True)
    assert events.column("value").to_pylist() == batch.column("value").to_pylist()


def test_a_decimal_without_precision_asks_for_content_compatible() -> None:
    loose = {**INSERT, "mysqlType": {"id": "int", "name": "varchar", "price": "decimal"}}
    with pytest.raises(
        InputError, match=r"'price' is 'decimal' .*content-compatible=true.*\[source.kafka\] schema"
    ):
        canal_table_info("test", "t", loose, 5)
