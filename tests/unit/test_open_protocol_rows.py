"""Typed open-protocol rows: every column type round-trips through what TiCDC writes, and decodes to what
the kv-scan codec decodes from the same stored row."""

from __future__ import annotations

import datetime as dt
import random
import re
from decimal import Decimal

import pyarrow as pa
import pytest

from backfill.codec import DecodeStats, TableSchema, decode_row, encode_row, record_key
from backfill.sources.ticdc.open_protocol import decode_message, frame
from backfill.sources.ticdc.open_rows import (
    COMMIT_TS,
    FETCH,
    FETCH_HANDLE_KEY,
    INDEX,
    OP,
    output_schema,
    rows_to_arrow,
)
from backfill.sources.ticdc.open_schema import schema_from_columns, with_elems
from tidbsim import coltypes as ct
from tidbsim.table_versions import TEMPLATES, build_table
from tidbsim.ticdc_open import column_flags, go_json, key_json, row_value_json
from tidelake.errors import InputError

pytestmark = pytest.mark.unit


def versions():
    out = []
    for i, tmpl in enumerate(TEMPLATES):
        ids = list(range(1000 + 10 * i, 1000 + 10 * i + 1 + tmpl.partitions))
        out.append(build_table(tmpl, uid=i + 1, name=tmpl.name, ids=ids, partition_width=100, update_ts=1))
    return out


VERSIONS = versions()


def random_rows(version, n, seed):
    """(key, stored value, decoded row by the codec, rowid) for ``n`` random rows of a simulated table."""
    rng = random.Random(seed)
    schema = version.schema
    out = []
    for i in range(n):
        row = {c.id: ct.random_value(c.type, rng, nullable=c.nullable) for c in version.public}
        rowid = None
        if version.pk_kind == "int":
            pid = version.physical_ids[i % len(version.physical_ids)]
            row[version.pk_columns[0].id] = i + 1 + (100 * (i % len(version.physical_ids)))
            key = record_key(pid, row[version.pk_columns[0].id])
        elif version.pk_kind == "common":
            pk = version.pk_columns
            key = record_key(version.table_id, [(schema.by_id[c.id], row[c.id]) for c in pk])
        else:
            rowid = i + 1
            key = record_key(version.table_id, rowid)
        value = encode_row(schema, row, version=2)
        decoded = decode_row(schema, key, value)
        out.append((key, value, decoded, rowid))
    return out


def encode_events(
    version, rows, *, flavor="tiflow", time_zone="UTC", op="insert", ts=400_000_000_000_000_000
):
    """One Kafka message holding the rows as TiCDC would batch them."""
    schema = version.schema
    keys, values = [], []
    for i, (_key, _value, decoded, rowid) in enumerate(rows):
        named = dict(decoded)
        if rowid is not None:
            named["_tidb_rowid"] = rowid
        new = None if op == "delete" else named
        old = named if op in ("delete", "update") else None
        ptn = None if version.partition is None else version.physical_ids[i % len(version.physical_ids)]
        keys.append(key_json(ts + i, version.db, version.name, flavor=flavor, row_id=rowid, physical_id=ptn))
        values.append(row_value_json(schema, new=new, old=old, flavor=flavor, time_zone=time_zone))
    return frame(keys, version=True), frame(values, version=False)


def decode(version, rows, **kw):
    time_zone = kw.pop("time_zone", "UTC")
    key, value = encode_events(version, rows, time_zone=time_zone, **kw)
    events = decode_message(key, value, topic="cdc", partition=2, offset=77)
    return rows_to_arrow(events, version.schema, time_zone=time_zone)


# ticdc writes no row id, so a rowid table cannot be keyed from its messages (tested below): not a case here.
@pytest.mark.parametrize(
    ("version", "flavor"),
    [(v, f) for f in ("tiflow", "ticdc") for v in VERSIONS if not (f == "ticdc" and v.pk_kind == "rowid")],
    ids=lambda p: getattr(p, "name", p),
)
def test_every_column_type_matches_the_codec(version, flavor):
    rows = random_rows(version, 60, seed=hash(version.name) & 0xFFFF)
    got = decode(version, rows, flavor=flavor)
    assert got.schema == output_schema(version.schema)
    names = version.schema.arrow_schema.names
    for i, (_k, _v, decoded, rowid) in enumerate(rows):
        row = {n: got.column(n)[i].as_py() for n in names}
        want = dict(decoded)
        if rowid is not None:
            want["_tidb_rowid"] = rowid
        assert row == {n: want[n] for n in names}, f"row {i}"
    assert got.column(OP).to_pylist() == ["PUT"] * len(rows)
    assert got.column(COMMIT_TS).to_pylist()[:2] == [400_000_000_000_000_000, 400_000_000_000_000_001]
    assert got.column(INDEX).to_pylist() == list(range(len(rows)))


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "+05:30", "America/New_York"])
def test_timestamps_in_the_changefeed_time_zone_become_utc(zone):
    version = VERSIONS[1]  # items: TIMESTAMP(6)
    rows = random_rows(version, 30, seed=7)
    got = decode(version, rows, time_zone=zone)
    assert got.column("c_ts").to_pylist() == [d["c_ts"] for _k, _v, d, _r in rows]


def test_deletes_carry_the_key_only():
    version = VERSIONS[0]
    rows = random_rows(version, 5, seed=3)
    got = decode(version, rows, op="delete")
    assert got.column(OP).to_pylist() == ["DELETE"] * 5
    assert got.column("id").to_pylist() == [d["id"] for _k, _v, d, _r in rows]
    assert got.column("title").null_count == 5


def test_update_that_moves_the_key_becomes_delete_then_put():
    version = VERSIONS[1]  # items: clustered (sku, seq)
    schema = version.schema
    (row,) = [d for _k, _v, d, _r in random_rows(version, 1, seed=5)]
    old = dict(row, seq=row["seq"] + 1)
    key = frame([key_json(9, "shop", "items")], version=True)
    value = frame([row_value_json(schema, new=row, old=old)], version=False)
    got = rows_to_arrow(decode_message(key, value, topic="t", partition=0, offset=1), schema)
    assert got.column(OP).to_pylist() == ["DELETE", "PUT"]
    assert got.column("seq").to_pylist() == [old["seq"], row["seq"]]
    assert got.column("price").to_pylist() == [None, row["price"]]
    same = frame([row_value_json(schema, new=row, old=dict(row, note="x"))], version=False)
    assert rows_to_arrow(decode_message(key, same, topic="t", partition=0, offset=1), schema).num_rows == 1


def test_handle_key_only_events_fail_or_are_marked():
    version = VERSIONS[0]
    schema = version.schema
    (row,) = [d for _k, _v, d, _r in random_rows(version, 1, seed=9)]
    key = frame([key_json(9, "shop", "orders", handle_only=True)], version=True)
    value = frame([row_value_json(schema, new=row, old=None, handle_only=True)], version=False)
    events = decode_message(key, value, topic="t", partition=4, offset=12)
    with pytest.raises(InputError, match="topic 't' partition 4 offset 12.*handle-key-only"):
        rows_to_arrow(events, schema)
    got = rows_to_arrow(events, schema, incomplete="mark")
    assert got.column(FETCH).to_pylist() == [FETCH_HANDLE_KEY]
    assert got.column("id").to_pylist() == [row["id"]]
    delete = frame([row_value_json(schema, new=None, old=row, handle_only=True)], version=False)
    got = rows_to_arrow(decode_message(key, delete, topic="t", partition=4, offset=13), schema)
    assert got.column(FETCH).to_pylist() == [None] and got.column(OP).to_pylist() == ["DELETE"]


def test_rowid_table_without_rid_is_an_error():
    version = VERSIONS[2]
    rows = random_rows(version, 2, seed=1)
    with pytest.raises(InputError, match="no row id"):
        decode(version, rows, flavor="ticdc")


def test_whole_rows_delete_an_updates_old_row_and_keep_a_deletes_columns():
    """A table without a clustered key whose stored rows have no row id (a snapshot's) is merged as whole
    rows: the row id stays NULL, an update deletes its old row (`p`) first, a delete keeps every column."""
    version = VERSIONS[2]  # events: no primary key
    schema = version.schema
    first, second = (decoded for _k, _v, decoded, _r in random_rows(version, 2, seed=4))
    changed = dict(first, level=(first["level"] or 0) + 1)
    messages = [
        (row_value_json(schema, new=changed, old=first), 7),  # an update
        (row_value_json(schema, new=None, old=second), 8),  # a delete
    ]
    events = pa.concat_tables(
        decode_message(
            frame([key_json(9 + i, "ops", "events", row_id=rid)], version=True), frame([value], version=False),
            topic="t", partition=0, offset=i,
        )
        for i, (value, rid) in enumerate(messages)
    )  # fmt: skip
    got = rows_to_arrow(events, schema, whole_rows=True)
    assert got.column(OP).to_pylist() == ["DELETE", "PUT", "DELETE"]
    assert got.column("_tidb_rowid").to_pylist() == [None, None, None]
    names = [c.name for c in schema.columns]
    rows = [{n: got.column(n)[i].as_py() for n in names} for i in range(3)]
    assert rows == [{n: row[n] for n in names} for row in (first, changed, second)]
    by_handle = rows_to_arrow(events, schema)  # keyed by the row ids: one PUT, a DELETE of the key only
    assert by_handle.column(OP).to_pylist() == ["PUT", "DELETE"]
    assert (
        by_handle.column("_tidb_rowid").to_pylist() == [7, 8] and by_handle.column("kind")[1].as_py() is None
    )


def test_zero_dates_become_null_and_are_counted():
    version = VERSIONS[1]
    schema = version.schema
    row = decode_row(schema, *random_rows(version, 1, seed=2)[0][:2])
    flags = column_flags(schema)
    body = go_json(
        {
            "u": {
                "sku": {"t": 15, "h": True, "f": flags["sku"], "v": row["sku"]},
                "seq": {"t": 3, "h": True, "f": flags["seq"], "v": row["seq"]},
                "c_date": {"t": 10, "f": flags["c_date"], "v": "0000-00-00"},
                "c_dt": {"t": 12, "f": flags["c_dt"], "v": "2021-02-30 00:00:00.000"},
                "c_ts": {"t": 7, "f": flags["c_ts"], "v": "0000-00-00 00:00:00.000000"},
            }
        }
    ).decode()
    key = frame([key_json(9, "shop", "items")], version=True)
    stats = DecodeStats()
    got = rows_to_arrow(
        decode_message(key, frame([body.encode()], version=False), topic="t", partition=0, offset=0),
        schema,
        stats=stats,
    )
    assert [got.column(c)[0].as_py() for c in ("c_date", "c_dt", "c_ts")] == [None, None, None]
    assert stats.zero_dates == 3
    assert got.schema.metadata[b"tidelake.zero_dates"] == b"3"
    assert got.column("price")[0].as_py() == Decimal("0.00")  # absent column: its default


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("qty", '"x"', "is not an integer"),
        ("qty", "1.5", "is not an integer"),  # Arrow alone would truncate it to 1
        ("c_tiny", "300", "out of range"),
        ("status", "9", "ENUM index 9"),
        ("amount", '"1.23456"', "DECIMAL(12,3)"),
        ("title", "5", "is not a string"),
        ("body", '"%%%"', "is not base64"),
        ("c_double", '"a"', "is not a number"),
    ],
)
def test_bad_values_name_the_column_and_message(column, value, message):
    version = VERSIONS[0]
    schema = version.schema
    col = schema.by_name[column]
    body = '{"u":{"id":{"t":8,"h":true,"f":11,"v":1},"%s":{"t":%d,"f":%d,"v":%s}}}'.replace("%s", column, 1)
    body = body.replace("%d", str(col.tp), 1).replace("%d", str(column_flags(schema)[column]), 1)
    body = body.replace("%s", value, 1)
    key = frame([key_json(9, "shop", "orders")], version=True)
    events = decode_message(key, frame([body.encode()], version=False), topic="t", partition=1, offset=5)
    with pytest.raises(InputError, match=f"offset 5 event 0: column .{column}.: .*{re.escape(message)}"):
        rows_to_arrow(events, schema)


def test_a_row_without_its_key_column_is_an_error():
    """Filling an absent key like an absent column (its default) would invent the row's identity."""
    schema = VERSIONS[0].schema
    col = schema.by_name["qty"]
    body = f'{{"u":{{"qty":{{"t":{col.tp},"f":{column_flags(schema)["qty"]},"v":1}}}}}}'
    key = frame([key_json(9, "shop", "orders")], version=True)
    events = decode_message(key, frame([body.encode()], version=False), topic="t", partition=0, offset=3)
    with pytest.raises(InputError, match="offset 3 event 0: row event without the key column 'id'"):
        rows_to_arrow(events, schema)


def test_type_code_from_another_family_is_rejected():
    schema = VERSIONS[0].schema
    body = b'{"u":{"id":{"t":8,"h":true,"f":11,"v":1},"qty":{"t":15,"f":0,"v":"1"}}}'
    key = frame([key_json(9, "shop", "orders")], version=True)
    with pytest.raises(InputError, match="type code 15"):
        rows_to_arrow(
            decode_message(key, frame([body], version=False), topic="t", partition=0, offset=0), schema
        )


def test_old_format_without_flags_reads_base64_varchar():
    # pingcap/docs ticdc-open-protocol.md log 5: {"id":{"t":3,"h":true,"v":1},"val":{"t":15,"v":"YWE="}}
    info = schema_from_columns(
        "test", "t1", {"id": {"t": 3, "h": True, "v": 1}, "val": {"t": 15, "v": "YWE="}}
    )
    schema = TableSchema.from_table_info(info, schema_name="test")
    assert schema.pk_kind == "int" and schema.pk_columns == ("id",)
    key = frame([b'{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1}'], version=True)
    value = frame([b'{"u":{"id":{"t":3,"h":true,"v":1},"val":{"t":15,"v":"YWE="}}}'], version=False)
    got = rows_to_arrow(decode_message(key, value, topic="docs", partition=0, offset=4), schema)
    assert got.to_pylist()[0]["val"] == "aa" and got.to_pylist()[0]["id"] == 1


def test_schema_from_columns_of_a_current_event():
    version = VERSIONS[0]
    (row,) = [d for _k, _v, d, _r in random_rows(version, 1, seed=11)]
    import msgspec

    cols = msgspec.json.decode(row_value_json(version.schema, new=row, old=None))["u"]
    info = schema_from_columns("shop", "orders", cols, row_id=row["id"])
    guessed = TableSchema.from_table_info(info, schema_name="shop")
    assert guessed.pk_kind == "int" and guessed.pk_columns == ("id",)
    assert guessed.by_name["amount"].spark_type == "STRING"  # DECIMAL precision unknown
    assert guessed.by_name["status"].elems == ()
    key = frame([key_json(1, "shop", "orders", row_id=row["id"])], version=True)
    events = decode_message(
        key,
        frame([row_value_json(version.schema, new=row, old=None)], version=False),
        topic="t",
        partition=0,
        offset=0,
    )
    got = rows_to_arrow(events, guessed).to_pylist()[0]
    assert got["amount"] == format(row["amount"], "f")
    assert got["status"] == str(version.schema.by_name["status"].elems.index(row["status"]) + 1)
    named = TableSchema.from_table_info(with_elems(info, {"status": version.schema.by_name["status"].elems}))
    assert rows_to_arrow(events, named).to_pylist()[0]["status"] == row["status"]
    assert got["title"] == row["title"] and got["c_big_u"] == row["c_big_u"]


def test_schema_from_columns_rowid_and_clustered():
    cols = {"a": {"t": 3, "f": 0x4A, "v": 5}, "b": {"t": 15, "f": 0x40, "v": "x"}}
    rowid = TableSchema.from_table_info(schema_from_columns("s", "t", cols, row_id=77))
    assert rowid.pk_kind == "rowid"
    common = TableSchema.from_table_info(
        schema_from_columns("s", "t", {"a": {"t": 15, "f": 0x0A, "v": "k"}, "b": {"t": 3, "f": 0x40, "v": 1}})
    )
    assert common.pk_kind == "common" and common.pk_columns == ("a",)
    with pytest.raises(InputError, match="cannot be keyed"):
        schema_from_columns("s", "t", {"b": {"t": 3, "f": 0x40, "v": 1}})


def test_float_and_time_edge_values():
    version = VERSIONS[0]
    schema = version.schema
    base = dict(random_rows(version, 1, seed=4)[0][2])
    for f in (1e-7, 3.4028234663852886e38, -0.0, 123.0):
        row = dict(base, c_float=float(pa.scalar(f, pa.float32()).as_py()), c_double=f)
        key = frame([key_json(1, "shop", "orders")], version=True)
        got = rows_to_arrow(
            decode_message(
                key,
                frame([row_value_json(schema, new=row, old=None)], version=False),
                topic="t",
                partition=0,
                offset=0,
            ),
            schema,
        ).to_pylist()[0]
        assert (got["c_float"], got["c_double"]) == (row["c_float"], row["c_double"])
    assert dt.date(2020, 1, 1)
