"""Dropping superseded open-protocol row events before typing them changes nothing the collapse keeps."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from backfill.codec import TableSchema
from backfill.sources.ticdc.open_protocol import EVENT_SCHEMA, ROW
from backfill.sources.ticdc.open_rows import COMMIT_TS, INDEX, OFFSET, OP, rows_to_arrow
from backfill.sources.ticdc.open_schema import schema_from_columns
from backfill.sources.ticdc.open_supersede import LatestPerKey
from backfill.tables import RowIdentity
from tidelake.conventions import ROWID
from tidelake.errors import InputError

pytestmark = pytest.mark.unit

KEY_FLAGS, VALUE_FLAGS = 11, 65  # handle + primary + binary; nullable + binary


def columns(key: int, value: int | None, *, key_name: str = "id") -> dict:
    return {key_name: {"t": 8, "f": KEY_FLAGS, "v": key}, "v": {"t": 8, "f": VALUE_FLAGS, "v": value}}


def rowid_columns(value: int) -> dict:
    return {"v": {"t": 8, "f": VALUE_FLAGS, "v": value}}


def events(rows: list[dict], *, handle_only: list[bool] | None = None) -> pa.Table:
    """Row events of `db.t`, one per dict (ts, value JSON, optional row_id), at offsets 0, 1, ..."""
    n = len(rows)
    return pa.table(
        {
            "topic": ["t"] * n,
            "partition": [0] * n,
            "offset": list(range(n)),
            "index": [0] * n,
            "type": [ROW] * n,
            "ts": [r["ts"] for r in rows],
            "schema": ["db"] * n,
            "table": ["t"] * n,
            "row_id": [r.get("row_id") for r in rows],
            "physical_id": [None] * n,
            "handle_only": handle_only or [False] * n,
            "claim_check": [None] * n,
            "value": [
                r["value"] if isinstance(r["value"], bytes) else json.dumps(r["value"]).encode() for r in rows
            ],
            "ddl_query": [None] * n,
            "ddl_type": [None] * n,
        },
        schema=EVENT_SCHEMA,
    )


def schema_of(sample: dict, row_id: int | None = None) -> TableSchema:
    return TableSchema.from_table_info(
        schema_from_columns("db", "t", sample, row_id=row_id, table_id=1), schema_name="db"
    )


def collapsed(typed: pa.Table, keys: tuple[str, ...]) -> list[tuple]:
    """The shared collapse rule over typed rows (apply/collapse.last_change_per_key), in Python."""
    last: dict[tuple, tuple[tuple, dict]] = {}
    for row in typed.to_pylist():
        order = (row[COMMIT_TS], row[OP] == "PUT", (row[OFFSET] << 20) + row[INDEX])
        key = tuple(row[k] for k in keys)
        if key not in last or order > last[key][0]:
            last[key] = (order, row)
    names = [*keys, "v", OP, COMMIT_TS]
    return sorted(tuple(row.get(c) for c in names) for _, row in last.values())


def random_history(rng: random.Random, n: int) -> list[dict]:
    """Inserts, updates (some moving the key), deletes, re-sent duplicates and split updates over 12 keys."""
    out, ts = [], 1000
    for _ in range(n):
        ts += rng.choice((0, 1, 1, 5))  # some events share a commit ts
        key, roll = rng.randrange(12), rng.random()
        if roll < 0.1 and out:
            out.append(dict(rng.choice(out)))  # an at-least-once duplicate, later in the partition
        elif roll < 0.25:
            out.append({"ts": ts, "value": {"d": columns(key, rng.randrange(100))}})
        elif roll < 0.35:  # an update that moves the row to another key
            new = rng.randrange(12)
            out.append({"ts": ts, "value": {"u": columns(new, rng.randrange(100)), "p": columns(key, 1)}})
        elif roll < 0.45:  # a split update: DELETE then INSERT at one ts
            out.append({"ts": ts, "value": {"d": columns(key, 1)}})
            out.append({"ts": ts, "value": {"u": columns(key, rng.randrange(100))}})
        else:
            out.append({"ts": ts, "value": {"u": columns(key, rng.randrange(100)), "p": columns(key, 0)}})
    return out


@pytest.mark.parametrize("seed", range(8))
def test_kept_events_collapse_to_the_same_rows(seed):
    history = random_history(random.Random(seed), 300)
    table = events(history)
    schema = schema_of(columns(1, 1))
    keys = RowIdentity.HANDLE.columns(schema)
    kept = LatestPerKey(keys).keep(table)
    assert kept.num_rows < table.num_rows / 2  # 300 events over 12 keys: most are superseded
    assert collapsed(rows_to_arrow(kept, schema), keys) == collapsed(rows_to_arrow(table, schema), keys)


@pytest.mark.parametrize("seed", range(4))
def test_values_parsed_in_slices_keep_what_one_parse_keeps(seed, monkeypatch):
    """A task's values are parsed `PARSED_AT_ONCE` at a time (bounded memory); the keys of all slices are
    compared together, so the slices keep exactly what one parse of every value keeps."""
    from backfill.sources.ticdc import open_supersede

    table = events(random_history(random.Random(seed), 300))
    whole = LatestPerKey(("id",)).keep(table).column("offset").to_pylist()
    monkeypatch.setattr(open_supersede, "PARSED_AT_ONCE", 7)
    assert LatestPerKey(("id",)).keep(table).column("offset").to_pylist() == whole


def test_a_slice_that_does_not_parse_is_kept_for_the_typing_to_name(monkeypatch):
    from backfill.sources.ticdc import open_supersede

    monkeypatch.setattr(open_supersede, "PARSED_AT_ONCE", 2)
    history = [{"ts": 10 + i, "value": {"u": columns(1, i)}} for i in range(6)]
    history[3] = {"ts": 13, "value": b'{"u": {"id": '}
    kept = LatestPerKey(("id",)).keep(events(history))
    assert kept.column("offset").to_pylist() == [2, 3, 5]  # the slice [2, 3] kept whole, 5 supersedes 0-1, 4
    with pytest.raises(InputError, match="offset 3"):
        rows_to_arrow(kept, schema_of(columns(1, 1)))


def test_an_update_that_moves_its_key_is_kept():
    history = [
        {"ts": 10, "value": {"u": columns(2, 5), "p": columns(1, 4)}},  # 1 -> 2: deletes key 1 too
        {"ts": 20, "value": {"u": columns(2, 6), "p": columns(2, 5)}},
    ]
    kept = LatestPerKey(("id",)).keep(events(history))
    assert kept.column("offset").to_pylist() == [0, 1]


def test_the_later_event_of_a_key_wins_put_over_delete_at_one_ts():
    history = [
        {"ts": 10, "value": {"u": columns(1, 1)}},
        {"ts": 20, "value": {"u": columns(1, 2), "p": columns(1, 1)}},
        {"ts": 30, "value": {"u": columns(1, 3)}},  # the PUT half of a split update...
        {"ts": 30, "value": {"d": columns(1, 2)}},  # ...wins over its DELETE half, sent after it
        {"ts": 25, "value": {"u": columns(2, 9)}},
    ]
    kept = LatestPerKey(("id",)).keep(events(history))
    assert kept.column("offset").to_pylist() == [2, 4]


def test_key_text_written_apart_stays_apart():
    """Equal values written differently (flags) are not joined here; the collapse after typing does."""
    other = columns(1, 2)
    other["id"] = {"t": 8, "f": 9, "v": 1}
    history = [{"ts": 10, "value": {"u": columns(1, 1)}}, {"ts": 20, "value": {"u": other}}]
    assert LatestPerKey(("id",)).keep(events(history)).num_rows == 2


def test_row_id_tables_key_by_the_events_row_id():
    history = [
        {"ts": 10, "value": {"u": rowid_columns(1)}, "row_id": 7},
        {"ts": 20, "value": {"u": rowid_columns(2)}, "row_id": 7},
        {"ts": 15, "value": {"u": rowid_columns(3)}, "row_id": 8},
        {"ts": 16, "value": {"u": rowid_columns(4)}},  # no rid: kept for the typing to refuse
    ]
    kept = LatestPerKey((ROWID,)).keep(events(history))
    assert kept.column("offset").to_pylist() == [1, 2, 3]


def test_what_the_typing_must_see_is_kept():
    """A handle-key-only event, an event without its key column, and any batch with a broken value."""
    history = [
        {"ts": 10, "value": {"u": columns(1, 1)}},
        {"ts": 20, "value": {"u": columns(1, 2)}},
        {"ts": 30, "value": {"u": {"v": {"t": 8, "f": VALUE_FLAGS, "v": 3}}}},
    ]
    latest = LatestPerKey(("id",))
    kept = latest.keep(events(history, handle_only=[True, False, False]))
    assert kept.column("offset").to_pylist() == [0, 1, 2]
    broken = events([*history, {"ts": 40, "value": b'{"u": {"id": '}])
    assert latest.keep(broken).num_rows == 4
    schema = schema_of(columns(1, 1))
    with pytest.raises(InputError, match="offset 3"):
        rows_to_arrow(latest.keep(broken), schema)


def test_a_key_of_two_columns_groups_by_both():
    def two(a: int, b: int, value: int) -> dict:
        return {
            "a": {"t": 8, "f": KEY_FLAGS, "v": a},
            "b": {"t": 8, "f": KEY_FLAGS, "v": b},
            "v": {"t": 8, "f": VALUE_FLAGS, "v": value},
        }

    history = [
        {"ts": 10, "value": {"u": two(1, 1, 1)}},
        {"ts": 11, "value": {"u": two(1, 2, 2)}},  # shares a with the first, not b: another key
        {"ts": 12, "value": {"u": two(2, 1, 3)}},  # shares b with the first: another key
        {"ts": 13, "value": {"u": two(1, 1, 4)}},  # supersedes the first
        {"ts": 14, "value": {"d": two(2, 1, 0)}},  # supersedes the third
    ]
    kept = LatestPerKey(("a", "b")).keep(events(history))
    assert kept.column("offset").to_pylist() == [1, 3, 4]


def test_of_two_events_equal_in_ts_op_and_line_the_first_is_kept():
    """Two topic partitions read by one task can hold events at the same offset and index."""
    history = [
        {"ts": 10, "value": {"u": columns(1, 1)}},
        {"ts": 10, "value": {"u": columns(1, 2)}},
    ]
    table = events(history)
    same_line = table.set_column(2, "offset", pa.array([5, 5], pa.int64()))
    same_line = same_line.set_column(1, "partition", pa.array([0, 1], pa.int32()))
    kept = LatestPerKey(("id",)).keep(same_line)
    assert kept.column("partition").to_pylist() == [0]


def test_a_task_types_only_what_its_later_events_leave():
    """`typed_open_task` (what one Spark task of the Kafka source runs): the superseded update is neither
    typed nor counted, the kept rows carry their line, and a zero date in a kept row is counted."""
    from backfill.changes.collapse import LINE
    from backfill.codec import DecodeStats
    from backfill.sources.kafka.source import typed_open_task

    def row(key: int, value: int, day: str) -> dict:
        return {**columns(key, value), "d": {"t": 10, "f": VALUE_FLAGS, "v": day}}

    table = events(
        [
            {"ts": 10, "value": {"u": row(1, 1, "0000-00-00")}},
            {"ts": 11, "value": {"u": row(2, 5, "2024-02-29")}},
            {"ts": 12, "value": {"u": row(1, 2, "2024-03-01")}},
        ]
    )
    schema = schema_of(row(1, 1, "2024-01-01"))
    stats = DecodeStats()
    typed = pa.concat_tables(typed_open_task(table, schema, "UTC", ("id",), stats))
    assert [(r["id"], r["v"], str(r["d"]), r[LINE]) for r in typed.to_pylist()] == [
        (2, 5, "2024-02-29", 1 << 20),
        (1, 2, "2024-03-01", 2 << 20),
    ]
    assert (stats.rows, stats.zero_dates) == (2, 0)
    stats = DecodeStats()
    list(typed_open_task(table.slice(0, 2), schema, "UTC", ("id",), stats))
    assert (stats.rows, stats.zero_dates) == (2, 1)
