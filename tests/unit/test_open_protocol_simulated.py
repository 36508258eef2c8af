"""The simulator's open-protocol messages: dispatch hashes from tiflow's tests, and a naive consumer that
reads a simulated changefeed with every dispatcher (duplicates, resolved events, several partitions) and
must arrive at the simulator's expected state."""

from __future__ import annotations

import datetime as dt
import itertools
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from backfill.codec import TableSchema
from backfill.sources.ticdc.open_protocol import DDL, RESOLVED, ROW, decode_records, records_table
from backfill.sources.ticdc.open_rows import COMMIT_TS, OP, rows_to_arrow
from tidbsim import SimulationConfig, load_expected, load_index, simulate
from tidbsim.changelog import CHANGELOG_PATH, read_changelog
from tidbsim.dispatch import Dispatcher, PositionInertia
from tidbsim.expected import primary_key
from tidbsim.kafka import Changefeed, open_protocol_messages

pytestmark = pytest.mark.unit


def test_position_inertia_vectors():
    # pingcap/tiflow pkg/hash/position_inertia_test.go
    h = PositionInertia()
    for w in (b"hash", b"pingcap", b"ticdc", b"tools"):
        h.write(b"hello", w)
    assert h.sum == 0x914505A7
    h = PositionInertia()
    h.write(b"ticdc", b"hello")
    h.write(b"hello", b"hash")
    h.write(b"tools", b"hello")
    h.write(b"hello", b"pingcap")
    assert h.sum == 0x7CD6194A


def test_table_and_index_value_dispatch_vectors():
    # pingcap/tiflow cdc/sink/dmlsink/mq/dispatcher/partition/{table,index_value}_test.go, 16 partitions
    table = Dispatcher("table")
    assert [table.partition(16, "test", t, 1, {}, ()) for t in ("t1", "t2", "t3")] == [15, 5, 3]
    iv = Dispatcher("index-value")
    assert iv.partition(16, "test", "t1", 1, {"a": 11, "b": 22}, ("a",)) == 2
    assert iv.partition(16, "test", "t1", 1, {"a": 22, "b": 22}, ("a",)) == 11
    assert iv.partition(16, "test", "t2", 1, {"a": 11, "b": 22}, ("a", "b")) == 5
    assert iv.partition(16, "test", "t2", 1, {"a": 11, "b": 0}, ("b", "a")) == 14
    assert iv.partition(16, "test", "t2", 1, {"a": 11, "b": 33}, ("a", "b")) == 2
    assert Dispatcher("ts").partition(16, "test", "t1", 35, {}, ()) == 3


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kafka-sim") / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=5, tables=4, rows=20, txns=160, scans=3, ddl_kinds=(), ticdc_changelog=True
        )
    )
    return out


def schemas_of(out: Path) -> dict[tuple[str, str], TableSchema]:
    schemas = {}
    for rec in read_changelog(out / CHANGELOG_PATH):
        if rec[0] == "schema":
            info = rec[3]
            schemas[(rec[2], info["name"]["O"])] = TableSchema.from_table_info(info, schema_name=rec[2])
    return schemas


def consume(out: Path, feed: Changefeed) -> tuple[dict, int, dict]:
    """A naive consumer: per-partition resolved ts, global = min; rows at or below it, last by ts per key
    (a PUT wins over a DELETE of the same key at the same ts); duplicates land on the same result."""
    offsets: dict[int, int] = defaultdict(int)
    records = []
    for m in open_protocol_messages(out, feed):
        records.append((m.topic, m.partition, offsets[m.partition], m.key, m.value))
        offsets[m.partition] += 1
    events = decode_records(records_table(records), compression=feed.compression)
    watermark: dict[int, int] = {}
    for e in events.filter(pa.compute.equal(events["type"], RESOLVED)).to_pylist():
        watermark[e["partition"]] = max(watermark.get(e["partition"], 0), e["ts"])
    resolved = min(watermark.get(p, 0) for p in range(feed.partitions))
    rows = events.filter(pa.compute.equal(events["type"], ROW))
    state: dict[tuple[str, str], dict] = defaultdict(dict)
    schemas = schemas_of(out)
    for (db, name), schema in schemas.items():
        mask = pa.compute.and_(pa.compute.equal(rows["schema"], db), pa.compute.equal(rows["table"], name))
        typed = rows_to_arrow(rows.filter(mask), schema, time_zone=feed.time_zone)
        for r in typed.to_pylist():
            if r[COMMIT_TS] > resolved:
                continue
            key = tuple(r[c] for c in schema.pk_columns)
            prev = state[(db, name)].get(key)
            rank = (r[COMMIT_TS], r[OP] == "PUT")
            if prev is None or rank >= prev[0]:
                state[(db, name)][key] = (rank, r)
    counts = {"ddl": int(pa.compute.sum(pa.compute.equal(events["type"], DDL)).as_py() or 0)}
    counts["messages"] = len(records)
    counts["rows"] = rows.num_rows
    return state, resolved, counts


@pytest.mark.parametrize(
    "feed",
    [
        Changefeed(dispatcher="default", partitions=3),
        Changefeed(dispatcher="index-value", partitions=4, max_batch_size=5, compression="snappy"),
        Changefeed(dispatcher="ts", partitions=2, restarts=3, compression="lz4", time_zone="Asia/Shanghai"),
        Changefeed(dispatcher="rowid", partitions=5, max_batch_size=1, seed=3),
        Changefeed(dispatcher="table", partitions=1, output_old_value=False, restarts=0),
        Changefeed(dispatcher="index-value", partitions=3, restarts=1, late_restarts=3, seed=4),
    ],
    ids=lambda f: f.dispatcher + ("-late-restarts" if f.late_restarts else ""),
)
def test_a_naive_consumer_reaches_the_expected_state(sim, feed):
    state, resolved, counts = consume(sim, feed)
    scans = load_index(sim)
    assert resolved == scans[-1]["resolved_ts"]
    expected = load_expected(sim, scans[-1]["scan_id"])
    assert counts["ddl"] == 0 and counts["rows"] > 100
    for (db, name), table in expected.items():
        want = {tuple(r[c] for c in primary_key(table)): r for r in table.to_pylist()}
        got = {k: v[1] for k, v in state[(db, name)].items() if v[1][OP] == "PUT"}
        assert set(got) == set(want), (db, name)
        for k, row in want.items():
            for col, value in row.items():
                assert got[k][col] == value, (db, name, k, col)


def test_messages_are_batched_broadcast_and_duplicated(sim):
    feed = Changefeed(dispatcher="default", partitions=3, max_batch_size=4, restarts=2, seed=1)
    offsets: dict[int, int] = defaultdict(int)
    records = []
    for m in open_protocol_messages(sim, feed):
        records.append((m.topic, m.partition, offsets[m.partition], m.key, m.value))
        offsets[m.partition] += 1
    events = decode_records(records_table(records)).to_pylist()
    per_message = defaultdict(int)
    for e in events:
        per_message[(e["partition"], e["offset"])] += 1
    assert max(per_message.values()) == 4
    resolved_by_partition = defaultdict(list)
    for e in events:
        if e["type"] == RESOLVED:
            resolved_by_partition[e["partition"]].append(e["ts"])
    assert len({tuple(v) for v in resolved_by_partition.values()}) == 1  # broadcast to every partition
    rows = [(e["partition"], e["ts"], e["value"]) for e in events if e["type"] == ROW]
    assert len(rows) > len(set(rows))  # the restart re-sent rows, in their own partition
    # a resolved event follows every row at or below its ts in its partition
    for p in range(3):
        seen_resolved = 0
        for e in (e for e in events if e["partition"] == p):
            if e["type"] == RESOLVED:
                seen_resolved = e["ts"]
            elif e["type"] == ROW:
                assert e["ts"] > seen_resolved


def _events(out: Path, feed: Changefeed) -> list[dict]:
    records, offsets = [], defaultdict(int)
    for m in open_protocol_messages(out, feed):
        records.append((m.topic, m.partition, offsets[m.partition], m.key, m.value))
        offsets[m.partition] += 1
    return decode_records(records_table(records)).to_pylist()


def _resent(events: list[dict]) -> list[dict]:
    """Rows and DDLs at or below a resolved ts their partition carried before them."""
    carried: dict[int, int] = defaultdict(int)
    found = []
    for e in events:  # in offset order per partition
        if e["type"] == RESOLVED:
            carried[e["partition"]] = max(carried[e["partition"]], e["ts"])
        elif e["ts"] <= carried[e["partition"]]:
            found.append(e)
    return found


def test_late_restarts_resend_rows_and_ddls_after_resolved_events(tmp_path):
    """A changefeed restarted from an older checkpoint sends rows and DDLs again after resolved events
    at or above them, in their own partitions; the older checkpoint comes as a lower resolved event; one
    resolved event reaches only some partitions before the restart (and the others after it)."""
    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=2, tables=3, rows=10, txns=90, scans=3, ticdc_changelog=True))
    feed = Changefeed(
        dispatcher="table", partitions=3, restarts=0, late_restarts=12, resolved_every=8, seed=1
    )
    events = _events(out, feed)
    resent = _resent(events)
    assert {e["type"] for e in resent} == {ROW, DDL}
    originals = {(e["partition"], e["ts"], e["value"], e["ddl_query"]) for e in events if e not in resent}
    assert all((e["partition"], e["ts"], e["value"], e["ddl_query"]) in originals for e in resent)
    marks = {p: [e["ts"] for e in events if e["type"] == RESOLVED and e["partition"] == p] for p in range(3)}
    assert any(b < a for m in marks.values() for a, b in itertools.pairwise(m))  # a lower one
    assert len({tuple(m) for m in marks.values()}) > 1  # one reached some partitions first
    assert {max(m) for m in marks.values()} == {load_index(out)[-1]["resolved_ts"]}
    assert not _resent(_events(out, Changefeed(dispatcher="table", partitions=3, restarts=2)))


def test_a_changefeed_from_creation_sends_the_database_and_table_ddls(tmp_path):
    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=2, tables=2, rows=5, txns=20, scans=1, ticdc_changelog=True))
    events = _events(out, Changefeed(dispatcher="table", partitions=2, from_creation=True))
    first = [
        (e["schema"], e["table"], e["ddl_query"].split(" ")[:2])
        for e in events
        if e["partition"] == 0 and e["type"] == DDL
    ]
    assert first[0][1] is None and first[0][2] == ["CREATE", "DATABASE"]  # `tbl` omitted, as TiCDC does
    assert any(q == ["CREATE", "TABLE"] for _, _, q in first[1:])


def test_ddls_are_broadcast_in_commit_order(tmp_path):
    out = tmp_path / "sim"
    simulate(SimulationConfig(out=out, seed=2, tables=4, rows=10, txns=80, scans=2, ticdc_changelog=True))
    feed = Changefeed(dispatcher="table", partitions=2)
    records, offsets = [], defaultdict(int)
    for m in open_protocol_messages(out, feed):
        records.append((m.topic, m.partition, offsets[m.partition], m.key, m.value))
        offsets[m.partition] += 1
    events = decode_records(records_table(records)).to_pylist()
    ddls = [
        [(e["ts"], e["ddl_query"]) for e in events if e["type"] == DDL and e["partition"] == p]
        for p in (0, 1)
    ]
    assert ddls[0] and ddls[0] == ddls[1]
    for p in (0, 1):
        last = 0
        for e in (e for e in events if e["partition"] == p and e["type"] == DDL):
            assert e["ts"] > last
            last = e["ts"]


def test_columns_dispatcher_hashes_the_listed_columns():
    d = Dispatcher("columns", ("a",))
    h = PositionInertia()
    h.write(b"test", b"t1")
    h.write(b"a", b"11")
    assert d.partition(7, "test", "t1", 1, {"a": 11, "b": 2}, ()) == h.sum % 7
    h = PositionInertia()
    h.write(b"test", b"t1")
    h.write(b"a", b"null")
    assert d.partition(7, "test", "t1", 1, {"a": None}, ()) == h.sum % 7  # tiflow hashes NULL as "null"
    ticdc = Dispatcher("columns", ("a",), flavor="ticdc")
    assert ticdc.partition(7, "test", "t1", 1, {"a": None}, ()) == Dispatcher("table").partition(
        7, "test", "t1", 1, {}, ()
    )
    with pytest.raises(ValueError, match="no column 'zz'"):
        Dispatcher("columns", ("zz",)).partition(7, "test", "t1", 1, {"a": 1}, ())


@pytest.mark.parametrize(("flavor", "time_zone"), [("tiflow", "UTC"), ("ticdc", "Asia/Shanghai")])
def test_the_publishers_row_encoder_writes_the_reference_encoders_bytes(sim, flavor, time_zone):
    """`RowValueEncoder` (the publisher's, built once per schema) and `row_value_json` (the reference,
    per row) give the same bytes for every row change of the simulation, with and without old values."""
    from tidbsim.ticdc_open import RowValueEncoder, row_value_json

    schemas: dict = {}
    encoders: dict = {}
    changes = 0
    for rec in read_changelog(sim / CHANGELOG_PATH):
        if rec[0] == "schema":
            schemas[rec[1]] = TableSchema.from_table_info(rec[3], schema_name=rec[2])
            encoders.pop(rec[1], None)
            continue
        if rec[0] != "row":
            continue
        _, _, _, _, skey, _, new, old = rec
        schema = schemas[skey]
        fast = (
            encoders.setdefault(  # one per table, as the publisher keeps them (it reuses an old row's text)
                skey, RowValueEncoder(schema, flavor=flavor, time_zone=time_zone)
            )
        )
        reference = row_value_json(schema, new=new, old=old, flavor=flavor, time_zone=time_zone)
        assert fast.value(new=new, old=old) == reference
        without_old = RowValueEncoder(schema, flavor=flavor, time_zone=time_zone, output_old_value=False)
        reference = row_value_json(
            schema, new=new, old=old, flavor=flavor, time_zone=time_zone, output_old_value=False
        )
        assert without_old.value(new=new, old=old) == reference
        changes += 1
    assert changes > 100


def _changes_per_version(out: Path) -> list[tuple[TableSchema, str, list[tuple]]]:
    """Each table version's schema, database and row changes (commit ts, new, old), in log order."""
    versions: dict = {}
    for rec in read_changelog(out / CHANGELOG_PATH):
        if rec[0] == "schema":
            versions[rec[1]] = (TableSchema.from_table_info(rec[3], schema_name=rec[2]), rec[2], [])
        elif rec[0] == "row":
            versions[rec[4]][2].append((rec[1], rec[6], rec[7]))
    return list(versions.values())


@pytest.mark.parametrize(
    ("flavor", "time_zone", "old_values"), [("tiflow", "UTC", True), ("ticdc", "Asia/Shanghai", False)]
)
def test_the_publishers_batches_write_the_one_row_encoders_bytes(sim, flavor, time_zone, old_values):
    """Values written column by column by Arrow over a change-log chunk (`RowValueEncoder.arrow_values`,
    `CanalJsonEncoder.arrow_lines`: the publisher's) are the bytes of the reference encoders row by row,
    for chunks of every size (one row, a few, all of a table version's)."""
    from tidbsim.changelog import columnar_chunk
    from tidbsim.storage_codec import CanalJsonEncoder
    from tidbsim.ticdc_open import RowValueEncoder, arrow_bytes, row_value_json

    checked = 0
    for schema, db, changes in _changes_per_version(sim):
        opts = {"flavor": flavor, "time_zone": time_zone, "output_old_value": old_values}
        want = [row_value_json(schema, new=new, old=old, **opts) for _, new, old in changes]
        canal = CanalJsonEncoder(schema, db, terminator="", time_zone=time_zone)
        canal_want = [canal.line(ts, new, old, build_ms=0) for ts, new, old in changes]
        encoder = RowValueEncoder(schema, **opts)
        for size in (1, 7, len(changes) or 1):
            got: list[bytes] = []
            canal_got: list[bytes] = []
            for i in range(0, len(changes), size):
                batch = changes[i : i + size]
                chunk = columnar_chunk(
                    [("row", ts, db, schema.name, 0, None, new, old) for ts, new, old in batch]
                )
                [group] = chunk.groups
                new_rows = [-1 if r[6] is None else r[6][1] for r in chunk.records]
                old_rows = [-1 if r[7] is None else r[7][1] for r in chunk.records]
                got += arrow_bytes(encoder.arrow_values(group, new_rows, old_rows))
                ts = [r[1] for r in chunk.records]
                canal_got += arrow_bytes(canal.arrow_lines(group, ts, new_rows, old_rows, build_ms=0))
            assert got == want
            assert canal_got == canal_want
        checked += len(changes)
    assert checked > 300


def _go_string_char_by_char(s: str) -> str:
    from tidbsim.ticdc_open import _ESC

    return '"' + "".join(_ESC.get(ch) or (f"\\u{ord(ch):04x}" if ch < " " else ch) for ch in s) + '"'


def test_the_batch_writers_write_the_one_value_writers_text():
    """Strings, binary strings, floats and times written many at a time (`go_strings`, `go_quotes`,
    `go_floats`, `time_texts`) as one at a time, over values that take every escape, both float forms,
    fractional seconds, time zones and a year before 1000."""
    import random

    import numpy as np

    from backfill.sources.ticdc import go_quote
    from tidbsim.storage_codec import go_fmt_f
    from tidbsim.ticdc_open import (
        _zone,
        go_float,
        go_floats,
        go_quotes,
        go_string,
        go_strings,
        time_text,
        time_texts,
    )

    rng = random.Random(7)
    chars = list('a "\\\n\r\t\b\f\x00\x1f\x7f<>&\u2028\u2029é中😀')
    texts = ["".join(rng.choice(chars) for _ in range(rng.randint(0, 9))) for _ in range(3000)]
    assert [go_string(t) for t in texts] == [_go_string_char_by_char(t) for t in texts]
    assert go_strings(texts) == [_go_string_char_by_char(t) for t in texts]
    assert go_strings(["plain", "text"]) == ['"plain"', '"text"']
    pieces = [b"a", b"\\", b'"', b"\x00", b"\x07", b"\x7f", b"\x80", b"\xff", "é".encode(), "😀".encode()]
    pieces += [b"\xe4\xb8", b"\xed\xa0\x80", "\u0085".encode(), "\u00ad".encode(), b"\xef\xbf\xbd", b" "]
    blobs = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for _ in range(3000)]
    blobs += [bytes(rng.randrange(256) for _ in range(rng.randint(0, 16))) for _ in range(1000)]
    assert go_quotes(blobs) == [go_quote.quote(b) for b in blobs]
    floats = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(3000)]
    floats += [0.0, -0.0, 1.0, 123.0, 1e-4, 9.99e-5, 1e-6, 1e16, 1e21, 3.4e38]
    for bits in (64, 32):
        values = [float(np.float32(f)) if bits == 32 else f for f in floats]
        assert go_floats(values, bits) == [go_float(f, bits) for f in values]
        assert go_floats(values, bits, exponent=False) == [go_fmt_f(f, bits) for f in values]
    start = dt.datetime(1990, 1, 1, tzinfo=dt.UTC)
    stamps = [start + dt.timedelta(seconds=rng.randint(0, 10**9), microseconds=rng.randint(0, 10**6 - 1))]
    stamps += [start + dt.timedelta(seconds=rng.randint(0, 10**9)) for _ in range(500)]
    for fsp in (0, 3, 6):
        naive = [s.replace(tzinfo=None) for s in stamps]
        assert time_texts(naive, fsp) == [time_text(t, fsp) for t in naive]
        early = [*naive, dt.datetime(999, 12, 31, 23, 59, 59)]  # strftime's year is not padded
        assert time_texts(early, fsp) == [time_text(t, fsp) for t in early]
        for zone in ("UTC", "Asia/Shanghai", "-05:30"):
            local = [t.astimezone(_zone(zone)).replace(tzinfo=None) for t in stamps]
            assert time_texts(stamps, fsp, zone) == [time_text(t, fsp) for t in local]


def test_the_arrow_writers_write_the_one_value_writers_text():
    """The publisher's column writers by Arrow compute (strings with and without escapes, Go-quoted and
    latin-1 binary strings, base64, floats in both forms, BIT, dates and times in zones) give the one-value
    writers' texts, or None where they leave a column to them (control characters, years before 1000)."""
    import base64
    import random

    import numpy as np
    import pyarrow as pa

    from backfill.sources.ticdc import go_quote
    from tidbsim.storage_codec import go_fmt_f
    from tidbsim.ticdc_open import (
        _quoted_json,
        _zone,
        arrow_base64,
        arrow_bit_texts,
        arrow_date_texts,
        arrow_floats,
        arrow_go_quotes,
        arrow_go_strings,
        arrow_latin1_strings,
        arrow_time_texts,
        go_float,
        go_string,
        time_text,
    )

    rng = random.Random(11)
    chars = list('a "\\<>&\u2028\u2029é中😀')
    texts = ["".join(rng.choice(chars) for _ in range(rng.randint(0, 9))) for _ in range(2000)]
    assert arrow_go_strings(pa.array(texts)).to_pylist() == [go_string(t) for t in texts]
    assert arrow_go_strings(pa.array(["plain", "a\nb"])) is None  # a control character: the long way
    pieces = [
        b"a",
        b"\\",
        b'"',
        b"\x00",
        b"\x07",
        b"\x7f",
        b"\x80",
        b"\xff",
        "é".encode(),
        "😀".encode(),
        b"<&>",
    ]
    pieces += [
        b"\xe4\xb8",
        b"\xed\xa0\x80",
        "\u0085".encode(),
        "\u00ad".encode(),
        b"\xef\xbf\xbd",
        "\u2028".encode(),
    ]
    blobs = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for _ in range(2000)]
    blobs += [bytes(rng.randrange(256) for _ in range(rng.randint(0, 16))) for _ in range(1000)]
    array = pa.array(blobs, pa.binary())
    assert arrow_go_quotes(array, "bytes").to_pylist() == [_quoted_json(go_quote.quote(b)) for b in blobs]
    assert arrow_latin1_strings(array, "bytes").to_pylist() == [go_string(b.decode("latin-1")) for b in blobs]
    assert arrow_go_quotes(array.slice(5, 10), "bytes").to_pylist() == [
        _quoted_json(go_quote.quote(b)) for b in blobs[5:15]
    ]
    want = ['"' + base64.b64encode(b).decode() + '"' for b in blobs]
    assert arrow_base64(pa.array(blobs, pa.binary())).to_pylist() == want
    assert arrow_base64(pa.array(texts)).to_pylist() == [
        '"' + base64.b64encode(t.encode()).decode() + '"' for t in texts
    ]
    bits = [bytes(rng.randrange(256) for _ in range(3)) for _ in range(100)]
    assert arrow_bit_texts(pa.array(bits), "bytes").to_pylist() == [
        str(int.from_bytes(b, "big")) for b in bits
    ]
    assert arrow_bit_texts(pa.array([b"\x01", b"\x01\x02"]), "bytes") is None  # lengths differ
    floats = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(3000)]
    floats += [0.0, -0.0, 1.0, 123.0, 1e-4, 9.99e-5, 1e-6, 1e16, 1.5e20, 1e21, 3.4e38]
    for bits_ in (64, 32):
        values = [float(np.float32(f)) if bits_ == 32 else f for f in floats]
        array = pa.array(values, pa.float64())
        assert arrow_floats(array, "float", bits_).to_pylist() == [go_float(f, bits_) for f in values]
        positional = arrow_floats(array, "float", bits_, exponent=False).to_pylist()
        assert positional == [go_fmt_f(f, bits_) for f in values]
    days = [dt.date(1000, 1, 1) + dt.timedelta(days=rng.randint(0, 3_000_000)) for _ in range(300)]
    assert arrow_date_texts(pa.array(days), "date").to_pylist() == [f'"{d.isoformat()}"' for d in days]
    assert arrow_date_texts(pa.array([dt.date(999, 1, 1)]), "date") is None
    start = dt.datetime(1990, 1, 1, tzinfo=dt.UTC)
    stamps = [start + dt.timedelta(seconds=rng.randint(0, 10**9), microseconds=rng.randint(0, 10**6 - 1))]
    stamps += [start + dt.timedelta(seconds=rng.randint(0, 10**9)) for _ in range(500)]
    aware = pa.array(stamps, pa.timestamp("us", tz="UTC"))
    naive = [s.replace(tzinfo=None) for s in stamps]
    for fsp in (0, 3, 6):
        got = arrow_time_texts(pa.array(naive, pa.timestamp("us")), "datetime", fsp, None).to_pylist()
        assert got == [f'"{time_text(t, fsp)}"' for t in naive]
        for zone in ("UTC", "Asia/Shanghai", "-05:30"):
            local = [t.astimezone(_zone(zone)).replace(tzinfo=None) for t in stamps]
            texts = arrow_time_texts(aware, "datetime_utc", fsp, zone)
            if zone == "-05:30":  # not in the time zone database Arrow reads: left to Python
                assert texts is None
                continue
            assert texts.to_pylist() == [f'"{time_text(t, fsp)}"' for t in local]
    early = pa.array([dt.datetime(999, 12, 31, 23, 59, 59)], pa.timestamp("us"))
    assert arrow_time_texts(early, "datetime", 0, None) is None


@pytest.mark.parametrize("protocol", ["open-protocol", "canal-json"])
def test_processes_publishing_their_partitions_send_what_one_process_sends(sim, protocol):
    """`changefeed_messages(..., partitions)` (each of `publish_changefeed`'s processes): every
    partition's messages, in order, exactly as when one process writes them all; `partition_shares`
    gives every partition to one process."""
    from tidbsim.kafka import changefeed_messages, partition_shares

    feed = Changefeed(
        dispatcher="index-value",
        partitions=5,
        max_batch_size=6,
        restarts=2,
        late_restarts=2,
        protocol=protocol,
    )
    whole: dict[int, list] = defaultdict(list)
    for m in changefeed_messages(sim, feed):
        whole[m.partition].append(m)
    for processes in (2, 3):
        shares: dict[int, list] = defaultdict(list)
        for k in range(processes):
            for m in changefeed_messages(sim, feed, range(k, feed.partitions, processes)):
                shares[m.partition].append(m)
        assert shares == whole
        rows = sum(m.row_events for ms in shares.values() for m in ms)
        assert rows == sum(m.row_events for ms in whole.values() for m in ms) > 100
    split = partition_shares(sim, feed, 2)
    assert sorted(p for share in split for p in share) == list(range(feed.partitions)) and len(split) == 2
    by_table = Changefeed(dispatcher="table", partitions=4)
    assert len(partition_shares(sim, by_table, 8)) == 4  # no process without a partition


@pytest.mark.parametrize(
    ("row_id", "physical_id", "table"), [(None, None, "t"), (7, None, "t<&>"), (0, 12, 'q"\u2028')]
)
def test_a_row_key_is_written_as_gos_encoder_writes_the_key_struct(row_id, physical_id, table):
    from tidbsim.ticdc_open import go_json, key_json

    doc = {"ts": 1 << 60, "scm": "db", "tbl": table, "rid": row_id or None, "ptn": physical_id, "t": 1}
    expected = go_json({k: v for k, v in doc.items() if v is not None})
    assert key_json(1 << 60, "db", table, row_id=row_id, physical_id=physical_id) == expected
