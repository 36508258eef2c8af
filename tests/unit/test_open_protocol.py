"""Open protocol framing and events against TiCDC's own fixtures and the docs' event-stream example."""

from __future__ import annotations

import base64

import pytest

from backfill.sources.ticdc import compression
from backfill.sources.ticdc.go_quote import quote, unquote
from backfill.sources.ticdc.open_protocol import (
    DDL,
    RESOLVED,
    ROW,
    decode_message,
    decode_records,
    frame,
    records_table,
)
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

# Transcribed from pingcap/tiflow examples/java/src/test/resources/data/{key,value}/ (hex of each file).
FIXTURES = {
    "row_key_0": "000000000000000100000000000000227b227473223a312c2273636d223a2261222c2274626c223a2262222c2274223a317d",
    "row_key_1": "000000000000000100000000000000227b227473223a312c2273636d223a2261222c2274626c223a2262222c2274223a317d"
    "00000000000000227b227473223a322c2273636d223a2261222c2274626c223a2262222c2274223a317d"
    "00000000000000227b227473223a332c2273636d223a2261222c2274626c223a2262222c2274223a317d"
    "000000000000002a7b227473223a342c2273636d223a2261222c2274626c223a2263222c2270746e223a362c2274223a317d",
    "row_key_2": "0000000000000001",
    "row_value_0": "000000000000001f7b2275223a7b22636f6c31223a7b2274223a312c2276223a226161227d7d7d",
    "row_value_1": "000000000000001f7b2275223a7b22636f6c31223a7b2274223a312c2276223a226161227d7d7d"
    "000000000000001f7b2275223a7b22636f6c31223a7b2274223a312c2276223a226262227d7d7d"
    "000000000000001f7b2275223a7b22636f6c31223a7b2274223a312c2276223a226262227d7d7d"
    "000000000000001f7b2275223a7b22636f6c31223a7b2274223a312c2276223a226363227d7d7d",
    "row_value_2": "",
    "ddl_key_0": "000000000000000100000000000000227b227473223a312c2273636d223a2261222c2274626c223a2262222c2274223a327d",
    "ddl_key_1": "000000000000000100000000000000227b227473223a312c2273636d223a2261222c2274626c223a2262222c2274223a327d"
    "00000000000000227b227473223a322c2273636d223a2261222c2274626c223a2262222c2274223a327d"
    "00000000000000227b227473223a332c2273636d223a2261222c2274626c223a2262222c2274223a327d",
    "ddl_key_2": "0000000000000001",
    "ddl_value_0": "000000000000001c7b2271223a22637265617465207461626c652061222c2274223a317d",
    "ddl_value_1": "000000000000001c7b2271223a22637265617465207461626c652061222c2274223a317d"
    "000000000000001c7b2271223a22637265617465207461626c652062222c2274223a327d"
    "000000000000001c7b2271223a22637265617465207461626c652063222c2274223a337d",
    "ddl_value_2": "",
    "rts_key_0": "0000000000000001000000000000000e7b227473223a312c2274223a337d",
    "rts_key_1": "0000000000000001000000000000000e7b227473223a312c2274223a337d"
    "000000000000000e7b227473223a322c2274223a337d000000000000000e7b227473223a332c2274223a337d",
    "rts_key_2": "0000000000000001",
    "rts_value_0": "0000000000000000",
    "rts_value_1": "000000000000000000000000000000000000000000000000",
    "rts_value_2": "",
}


def fixture(kind: str, n: int) -> list[dict]:
    key = bytes.fromhex(FIXTURES[f"{kind}_key_{n}"])
    value = bytes.fromhex(FIXTURES[f"{kind}_value_{n}"])
    return decode_message(key, value, topic="t", partition=0, offset=n).to_pylist()


def test_fixture_sizes_match_the_reference():
    assert len(bytes.fromhex(FIXTURES["row_key_0"])) == 50  # reference §1.5


def test_single_row_event():
    (ev,) = fixture("row", 0)
    assert (ev["type"], ev["ts"], ev["schema"], ev["table"]) == (ROW, 1, "a", "b")
    assert ev["value"] == b'{"u":{"col1":{"t":1,"v":"aa"}}}'
    assert ev["physical_id"] is None and ev["row_id"] is None and ev["index"] == 0


def test_batch_of_four_with_a_partition_id():
    evs = fixture("row", 1)
    assert [(e["ts"], e["table"], e["physical_id"], e["index"]) for e in evs] == [
        (1, "b", None, 0),
        (2, "b", None, 1),
        (3, "b", None, 2),
        (4, "c", 6, 3),
    ]
    assert [e["value"][-7:-3] for e in evs] == [b'"aa"', b'"bb"', b'"bb"', b'"cc"']


@pytest.mark.parametrize("kind", ["row", "ddl", "rts"])
def test_empty_batch_has_no_event(kind):
    assert fixture(kind, 2) == []


def test_ddl_events():
    (ev,) = fixture("ddl", 0)
    assert (ev["type"], ev["ts"], ev["ddl_query"], ev["ddl_type"]) == (DDL, 1, "create table a", 1)
    assert [(e["ts"], e["ddl_query"], e["ddl_type"]) for e in fixture("ddl", 1)] == [
        (1, "create table a", 1),
        (2, "create table b", 2),
        (3, "create table c", 3),
    ]


def test_resolved_events():
    (ev,) = fixture("rts", 0)
    assert (ev["type"], ev["ts"], ev["schema"], ev["value"]) == (RESOLVED, 1, None, None)
    assert [e["ts"] for e in fixture("rts", 1)] == [1, 2, 3]


# ---------------------------------------------------------------- bad input names where it is


def bad(key: bytes, value: bytes, **kw) -> str:
    with pytest.raises(InputError) as e:
        decode_message(key, value, topic="orders", partition=3, offset=41, **kw)
    msg = str(e.value)
    assert "topic 'orders' partition 3 offset 41" in msg
    return msg


def test_bad_version_and_framing():
    good_key = bytes.fromhex(FIXTURES["row_key_0"])
    good_value = bytes.fromhex(FIXTURES["row_value_0"])
    assert "batch version 2" in bad(b"\0" * 7 + b"\2" + good_key[8:], good_value)
    assert "no 8-byte version" in bad(b"\0\0\1", good_value)
    assert "runs past the end" in bad(good_key[:-1], good_value)
    assert "runs past the end" in bad(good_key, good_value[:-3])
    assert "stray bytes" in bad(good_key + b"\0\0", good_value)
    assert "1 keys but 2 values" in bad(good_key, good_value + good_value)


def test_bad_key_json():
    value = bytes.fromhex(FIXTURES["row_value_0"])
    assert "not JSON" in bad(frame([b'{"ts":1,'], version=True), value)
    assert "type t=7" in bad(frame([b'{"ts":1,"scm":"a","tbl":"b","t":7}'], version=True), value)
    assert "unsigned 64-bit ts" in bad(frame([b'{"ts":-1,"t":3}'], version=True), frame([b""], version=False))
    assert "without schema" in bad(frame([b'{"ts":1,"t":1}'], version=True), value)
    assert "resolved event with a 2-byte value" in bad(
        frame([b'{"ts":1,"t":3}'], version=True), frame([b"{}"], version=False)
    )


def test_bad_ddl_value():
    key = bytes.fromhex(FIXTURES["ddl_key_0"])
    assert "DDL value" in bad(key, frame([b'{"q":1}'], version=False))


def test_decode_records_keeps_message_order_and_location():
    rows = records_table(
        [
            ("t", 1, 10, bytes.fromhex(FIXTURES["row_key_1"]), bytes.fromhex(FIXTURES["row_value_1"])),
            ("t", 1, 11, bytes.fromhex(FIXTURES["rts_key_0"]), bytes.fromhex(FIXTURES["rts_value_0"])),
            ("t", 0, 5, bytes.fromhex(FIXTURES["row_key_2"]), b""),
        ]
    )
    evs = decode_records(rows).to_pylist()
    assert [(e["partition"], e["offset"], e["index"], e["type"]) for e in evs] == [
        (1, 10, 0, ROW),
        (1, 10, 1, ROW),
        (1, 10, 2, ROW),
        (1, 10, 3, ROW),
        (1, 11, 0, RESOLVED),
    ]


def every_fixture_message() -> list[tuple[str, int, int, bytes, bytes]]:
    kinds = [(k, n) for k in ("row", "ddl", "rts") for n in range(3)]
    return [
        (
            "t",
            i % 2,
            100 + i,
            bytes.fromhex(FIXTURES[f"{k}_key_{n}"]),
            bytes.fromhex(FIXTURES[f"{k}_value_{n}"]),
        )
        for i, (k, n) in enumerate(kinds * 2)
    ]


def test_a_batch_framed_at_once_gives_what_its_messages_give_one_by_one():
    """`decode_records` frames a whole batch with numpy; every fixture (rows, DDL, resolved, empty batches)
    in one batch, and slices of it (Arrow arrays with an offset), give each message's own events."""
    import pyarrow as pa

    messages = every_fixture_message()
    batch = records_table(messages)
    one_by_one = [
        decode_message(key, value, topic=t, partition=p, offset=o).to_pylist()
        for t, p, o, key, value in messages
    ]
    assert decode_records(batch).to_pylist() == [e for events in one_by_one for e in events]
    for start, length in ((3, 7), (1, 1), (5, 0), (0, 18)):
        part = pa.RecordBatch.from_pydict(batch.to_pydict()).slice(start, length)
        assert decode_records(part).to_pylist() == [
            e for events in one_by_one[start : start + length] for e in events
        ]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (b"\0" * 7 + b"\2" + bytes.fromhex(FIXTURES["row_key_0"])[8:], None, "batch version 2"),
        (b"\0\0\1", None, "no 8-byte version"),
        (bytes.fromhex(FIXTURES["row_key_0"])[:-1], None, "runs past the end"),
        (None, bytes.fromhex(FIXTURES["row_value_0"])[:-3], "runs past the end"),
        (bytes.fromhex(FIXTURES["row_key_0"]) + b"\0\0", None, "stray bytes"),
        (None, bytes.fromhex(FIXTURES["row_value_0"]) * 2, "1 keys but 2 values"),
        (frame([b'{"ts":1,'], version=True), None, "not JSON"),
        (frame([b'{"ts":1}{"ts":2}'], version=True), None, "not JSON"),
        (frame([b'1},{"ts":2,"t":3'], version=True), None, "not JSON"),
        (frame([b""], version=True), None, "not JSON"),
    ],
)
def test_a_bad_message_in_a_batch_is_named(key, value, message):
    """Framed at once, a batch with one bad message among good ones is refused naming that message."""
    good = every_fixture_message()
    bad_key = key if key is not None else bytes.fromhex(FIXTURES["row_key_0"])
    bad_value = value if value is not None else bytes.fromhex(FIXTURES["row_value_0"])
    batch = records_table([*good[:4], ("orders", 3, 41, bad_key, bad_value), *good[4:]])
    with pytest.raises(InputError, match=f"topic 'orders' partition 3 offset 41.*{message}"):
        decode_records(batch)


# ---------------------------------------------------------------- compression


@pytest.mark.parametrize("codec", compression.CODECS)
def test_compressed_values_decode(codec):
    value = b'{"u":{"id":{"t":3,"f":11,"v":1}}}' * 3
    key = frame([b'{"ts":5,"scm":"s","tbl":"t","t":1}'], version=True)
    framed = frame([compression.compress(codec, value)], version=False)
    (ev,) = decode_message(key, framed, topic="t", partition=0, offset=0, compression=codec).to_pylist()
    assert ev["value"] == value


def test_snappy_is_the_block_format():
    # A hand-made snappy block (format_description.txt): varint length 11, literal "hello", copy-1 of
    # length 6 at offset 5 ("hello " would need a space; we copy "hello" + repeat of 'o').
    block = bytes([10, 4 << 2]) + b"hello" + bytes([((5 - 4) << 2) | 1 | (0 << 5), 5])
    assert compression.decompress("snappy", block) == b"hellohello"


def test_lz4_is_the_frame_format():
    assert compression.compress("lz4", b"x" * 100)[:4] == bytes.fromhex("04224d18")


def test_corrupt_compressed_value_is_an_input_error():
    key = frame([b'{"ts":5,"scm":"s","tbl":"t","t":1}'], version=True)
    assert "does not decompress" in bad(
        key, frame([b"\xff\xff\xff\xff"], version=False), compression="snappy"
    )


# ---------------------------------------------------------------- Go quoting


@pytest.mark.parametrize(
    ("raw", "quoted"),
    [
        (b"\x89PNG\r\n\x1a\n", "\\x89PNG\\r\\n\\x1a\\n"),  # docs' Column type code table (VARBINARY)
        (b"test", "test"),
        (b'a"b\\c', 'a\\"b\\\\c'),
        (b"\x07\x08\x0c\x0b\t\x00\x7f", "\\a\\b\\f\\v\\t\\x00\\x7f"),
        ("é中😀".encode(), "é中😀"),
        ("\u00a0".encode(), "\\u00a0"),
        (b"\xff\xc3", "\\xff\\xc3"),
    ],
)
def test_go_quote_vectors(raw, quoted):
    assert quote(raw) == quoted
    assert unquote(quoted) == raw


def test_go_unquote_octal_and_long_escapes():
    assert unquote("\\101\\U0001F600\\u4e2d") == b"A" + "😀中".encode()
    for broken in ("\\", "\\q", "\\x4", '"', "\\ud800"):
        with pytest.raises(ValueError, match="dangling backslash|escape|double quote"):
            unquote(broken)


def test_go_quote_roundtrips_every_byte():
    data = bytes(range(256)) + "ß€𝄞".encode()
    assert unquote(quote(data)) == data


# ---------------------------------------------------------------- the docs' event stream

DOCS_LOG = [  # pingcap/docs ticdc/ticdc-open-protocol.md, "Examples of the Event stream output", logs 1-14
    (0, '{"ts":415508856908021766,"scm":"test","tbl":"t1","t":2}',
     '{"q":"CREATE TABLE test.t1(id int primary key, val varchar(16))","t":3}'),
    (0, '{"ts":415508856908021766,"t":3}', None),
    (1, '{"ts":415508856908021766,"scm":"test","tbl":"t1","t":2}',
     '{"q":"CREATE TABLE test.t1(id int primary key, val varchar(16))","t":3}'),
    (1, '{"ts":415508856908021766,"t":3}', None),
    (0, '{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1}',
     '{"u":{"id":{"t":3,"h":true,"v":1},"val":{"t":15,"v":"YWE="}}}'),
    (1, '{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1}',
     '{"u":{"id":{"t":3,"h":true,"v":2},"val":{"t":15,"v":"YmI="}}}'),
    (0, '{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1}',
     '{"u":{"id":{"t":3,"h":true,"v":3},"val":{"t":15,"v":"Y2M="}}}'),
    (0, '{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1}',
     '{"u":{"id":{"t":3,"h":true,"v":3},"val":{"t":15,"v":"Y2M="}}}'),
    (0, '{"ts":415508881418485761,"scm":"test","tbl":"t1","t":1}', '{"d":{"id":{"t":3,"h":true,"v":1}}}'),
    (1, '{"ts":415508881418485761,"scm":"test","tbl":"t1","t":1}', '{"d":{"id":{"t":3,"h":true,"v":2}}}'),
    (0, '{"ts":415508881418485761,"scm":"test","tbl":"t1","t":1}',
     '{"u":{"id":{"t":3,"h":true,"v":3},"val":{"t":15,"v":"ZGQ="}}}'),
    (0, '{"ts":415508881418485761,"scm":"test","tbl":"t1","t":1}',
     '{"u":{"id":{"t":3,"h":true,"v":4},"val":{"t":15,"v":"ZWU="}}}'),
    (0, '{"ts":415508881038376963,"t":3}', None),
    (1, '{"ts":415508881038376963,"t":3}', None),
]  # fmt: skip


def docs_records():
    offsets = {0: 0, 1: 0}
    out = []
    for partition, key, value in DOCS_LOG:
        v = frame([value.encode()] if value is not None else [b""], version=False)
        out.append(("docs", partition, offsets[partition], frame([key.encode()], version=True), v))
        offsets[partition] += 1
    return records_table(out)


def test_docs_event_stream_decodes():
    evs = decode_records(docs_records()).to_pylist()
    assert [e["type"] for e in evs] == [DDL, RESOLVED, DDL, RESOLVED, *[ROW] * 8, RESOLVED, RESOLVED]
    assert evs[0]["ddl_query"] == "CREATE TABLE test.t1(id int primary key, val varchar(16))"
    assert evs[0]["ddl_type"] == 3
    # log 8 repeats log 7 in the same partition
    assert (evs[6]["partition"], evs[6]["value"]) == (evs[7]["partition"], evs[7]["value"])
    assert [e["offset"] for e in evs if e["partition"] == 0] == list(range(9))
    assert base64.b64decode("ZWU=") == b"ee"
