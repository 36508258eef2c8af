"""The Kafka source's typing task (`typing_task`, what each offset range's Arrow task runs in the second
read): framing, re-send filter, window cut, supersede selection and per-column typing in one pass, to the
values the kv-scan codec decodes from the same stored rows (every type family of the simulator's tables,
NULLs and unsigned columns included), and bad values named by topic, partition and offset."""

from __future__ import annotations

import pyarrow as pa
import pytest

from backfill.changes.collapse import LINE
from backfill.sources.kafka.source import ResendFloors, Segment, typing_task, unpack_pieces
from backfill.sources.ticdc.open_protocol import RESOLVED, frame, records_table
from backfill.sources.ticdc.open_rows import COMMIT_TS, OP
from tests.unit.test_open_protocol_rows import VERSIONS, encode_events, random_rows
from tidbsim.ticdc_open import key_json
from tidelake.sparkerrors import from_task

pytestmark = pytest.mark.unit

TS = 400_000_000_000_000_000


class Count:
    """What a task adds to an accumulator or notes in a tally, kept here."""

    def __init__(self) -> None:
        self.added = 0
        self.noted = 0

    def add(self, value: int) -> None:
        self.added += value

    def note(self) -> None:
        self.noted += 1


def resolved(ts: int) -> tuple[bytes, bytes]:
    return frame([key_json(ts, "", "", type_=RESOLVED)], version=True), frame([b""], version=False)


def typed(messages, segments, *, resend=None, batch_rows=1000):
    """The task's output over one partition's messages (offsets from 0), unpacked, per segment."""
    records = records_table([("cdc", 3, offset, k, v) for offset, (k, v) in enumerate(messages)])
    tally = Count()
    task = typing_task(
        segments,
        resend or ResendFloors({}, {}),
        protocol="open-protocol",
        compression="none",
        time_zone="UTC",
        zero_dates=Count(),
        tallies={s.table: tally for s in segments},
    )
    out: dict[int, list[pa.RecordBatch]] = {}
    for piece in task(records.to_batches(max_chunksize=batch_rows)):
        out.setdefault(piece.column("segment")[0].as_py(), []).extend(unpack_pieces([piece]))
    return {k: pa.Table.from_batches(v) for k, v in out.items()}, tally


def segment(version, low=0, high=1 << 62, table=0) -> Segment:
    return Segment(table, 0, version.schema, low, high, tuple(version.schema.pk_columns))


@pytest.mark.parametrize("version", [v for v in VERSIONS if v.pk_kind != "rowid"], ids=lambda v: v.name)
def test_every_column_type_is_typed_in_the_one_pass_task_as_the_codec_decodes_it(version):
    rows = random_rows(version, 40, seed=11)
    got, tally = typed([encode_events(version, rows, ts=TS), resolved(TS + 100)], [segment(version)])
    table = got[0]
    assert tally.noted == 1
    names = version.schema.arrow_schema.names
    assert table.num_rows == len(rows)
    by_ts = sorted(table.to_pylist(), key=lambda r: r[COMMIT_TS])
    for i, (_k, _v, decoded, _rowid) in enumerate(rows):
        assert {n: by_ts[i][n] for n in names} == {n: decoded[n] for n in names}, f"row {i}"
    assert {r[OP] for r in by_ts} == {"PUT"}
    assert sorted(table.column(LINE).to_pylist()) == list(range(len(rows)))  # offset 0, event i


def test_the_task_cuts_the_window_and_skips_re_sends():
    version = VERSIONS[0]
    rows = random_rows(version, 6, seed=5)
    first = encode_events(version, rows[:3], ts=TS)  # ts TS..TS+2
    again = encode_events(version, rows[:1], ts=TS)  # sent again after the resolved event: a re-send
    later = encode_events(version, rows[3:], ts=TS + 50)  # TS+50..: above the window's high
    messages = [first, resolved(TS + 10), again, later]
    got, _ = typed(messages, [segment(version, low=TS, high=TS + 40)])
    # TS itself is at the floor: only TS+1, TS+2 are inside (low, high]
    assert sorted(got[0].column(COMMIT_TS).to_pylist()) == [TS + 1, TS + 2]


def test_an_earlier_ranges_resolved_event_makes_a_re_send_too():
    version = VERSIONS[0]
    rows = random_rows(version, 2, seed=6)
    floors = ResendFloors({}, {("cdc", 3, -5): TS + 10})  # a range before this one resolved TS+10
    got, _ = typed([encode_events(version, rows, ts=TS + 9)], [segment(version)], resend=floors)
    assert got == {}


def test_a_hot_key_is_typed_once_per_task():
    version = VERSIONS[0]
    rows = random_rows(version, 1, seed=8)
    messages = [encode_events(version, rows, ts=TS + i, op="update") for i in range(5)]
    got, _ = typed(messages, [segment(version)])
    assert got[0].column(COMMIT_TS).to_pylist() == [TS + 4]


def test_a_value_of_the_wrong_type_names_topic_partition_and_offset():
    version = VERSIONS[0]
    rows = random_rows(version, 1, seed=9)
    key, _ = encode_events(version, rows, ts=TS)
    value = frame([b'{"u":{"id":{"t":8,"h":true,"f":11,"v":"seven"}}}'], version=False)
    with pytest.raises(RuntimeError) as failure:
        typed([resolved(TS - 10), (key, value)], [segment(version)])
    error = from_task(failure.value)
    assert error is not None and "topic 'cdc' partition 3 offset 1" in str(error), failure.value
    assert "'seven' is not an integer" in str(error)


def test_a_task_types_what_it_holds_in_parts(monkeypatch):
    """Past `EVENTS_HELD` row events a task types what it gathered (bounded memory); the supersede
    selection is per part, and the collapse after typing decides across parts."""
    from backfill.sources.kafka import source

    monkeypatch.setattr(source, "EVENTS_HELD", 2)
    version = VERSIONS[0]
    rows = random_rows(version, 1, seed=8)
    messages = [encode_events(version, rows, ts=TS + i, op="update") for i in range(5)]
    got, _ = typed(messages, [segment(version)], batch_rows=1)
    assert sorted(got[0].column(COMMIT_TS).to_pylist()) == [TS + 1, TS + 3, TS + 4]
