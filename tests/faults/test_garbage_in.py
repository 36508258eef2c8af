"""Garbage in (issue 17 §3): a seeded mutator over every input. Each damaged input must end in exit 2 with
a message naming the file (and line or key where there is one) and every table unchanged, or, where the
damage leaves a valid input, be applied exactly as the undamaged input — never a traceback, a hang, exit 0
with wrong data, or a changed target.

One capture (kv-scan) or sink folder (TiCDC storage) already landed; the next one is damaged. The calls are
in-process (`backfill.cli.main`, the shared session): each case costs a small Spark run, not a JVM.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backfill.cli import main
from backfill.codec import record_key
from backfill.sources.ticdc.open_protocol import RESOLVED, Where, frame, split_frames
from tests.captures import Capture, users_table
from tests.faults.harness import table_rows
from tests.storage_sink import SinkFolder, canal_line, csv_line
from tidbsim import SimulationConfig, load_index, simulate
from tidbsim.kafka import Changefeed, KafkaMessage, changefeed_messages, publish

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.drill]

SEED = 17
USERS, OTHER = users_table(100, "users"), users_table(200, "other")
OUTCOMES: Counter[tuple[str, str]] = Counter()

MANIFEST_FIELDS = ("format", "version", "checkpoint_ts", "current_ts", "regions", "regions.0.region_id",
                   "regions.0.start_key", "regions.0.end_key")  # fmt: skip
TABLE_INFO_FIELDS = ("id", "name", "cols", "cols.0.type", "cols.1.id", "cols.2.type.Tp", "pk_is_handle")
WRONG_TYPES: tuple[object, ...] = ("x", -1, 1.5, True, None, [], {})


def _path_set(doc: dict, dotted: str, value: object, *, remove: bool) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    key = int(last) if isinstance(doc, list) else last
    if remove:
        del doc[key]
    else:
        doc[key] = value


def _json_cases(fields: tuple[str, ...], count: int, salt: int) -> list[tuple[str, object, bool]]:
    """(field, wrong value, remove it): every field missing once, plus `count` seeded wrong-type cases."""
    rng = random.Random(SEED + salt)
    return [(f, None, True) for f in fields] + [
        (rng.choice(fields), rng.choice(WRONG_TYPES), False) for _ in range(count)
    ]


# ------------------------------------------------------------------------------------------- kv-scan


def _second_capture(root: Path) -> Capture:
    s2 = Capture(root, "s2", checkpoint_ts=180, current_ts=300, tables=[("app", USERS), ("app", OTHER)])
    for i in range(6):
        s2.put(1, USERS, i, {2: f"u{i}", 3: i}, 210 + i, 211 + i)
    s2.put(1, OTHER, 2, {2: "ok", 3: 3}, 220, 221).delete(1, 100, 1, 230, 231)
    return s2.init_and_resolve(290)


@pytest.fixture(scope="module")
def kv(spark, tmp_path_factory) -> tuple[Path, Path, dict[str, list[str]]]:
    """(captures with s1 and a good s2, a warehouse with s1 landed, the rows after the good s2)."""
    base = tmp_path_factory.mktemp("garbage-kv")
    root, start = base / "scans", base / "start"
    s1 = Capture(root, "s1", checkpoint_ts=100, current_ts=200, tables=[("app", USERS), ("app", OTHER)])
    s1.put(1, USERS, 1, {2: "a", 3: 1}, 110, 111).put(1, OTHER, 1, {2: "b", 3: 2}, 110, 111)
    s1.init_and_resolve(190).write()
    assert main(["run", "--config", str(_config(base, root, start))]) == 0
    _second_capture(root).write()
    reference = base / "reference"
    shutil.copytree(start, reference)
    assert main(["run", "--config", str(_config(base, root, reference))]) == 0
    return root, start, table_rows(spark, reference)


def _config(folder: Path, source: Path, warehouse: Path, lines: str = "") -> Path:
    conf = folder / f"{warehouse.name}.toml"
    conf.write_text(f'[job]\nname = "garbage"\n[source]\npath = "{source}"\n{lines}'
                    f'[target]\nwarehouse = "{warehouse}"\n')  # fmt: skip
    return conf


def _log_files(warehouse: Path) -> list[str]:
    return sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("_delta_log/*"))


def _judge(
    spark, capsys, kind: str, source: Path, start: Path, reference: dict[str, list[str]], tmp_path: Path,
    needles: tuple[str, ...], lines: str = "",
) -> None:  # fmt: skip
    """Run the damaged input; exit 2 naming the place with the target unchanged, or exit 0 with the rows of
    the undamaged input."""
    warehouse = tmp_path / "wh"
    shutil.copytree(start, warehouse)
    before = _log_files(warehouse)
    code = main(["run", "--config", str(_config(tmp_path, source, warehouse, lines)), "--quiet"])
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "Traceback" not in captured.err
    if code == 2:
        for needle in needles:
            assert needle in err, err
        assert _log_files(warehouse) == before, "a failed run changed the target"
        OUTCOMES[(kind, "exit 2, named")] += 1
    else:
        assert code == 0, err
        assert table_rows(spark, warehouse) == reference, "exit 0 with wrong data"
        OUTCOMES[(kind, "valid, applied")] += 1


def _damaged_capture(kv, tmp_path: Path, damage: Callable[[Path], None]) -> Path:
    root = tmp_path / "scans"
    shutil.copytree(kv[0], root)
    damage(root / "s2")
    return root


def _cut(size: int, count: int, salt: int) -> list[int]:
    rng = random.Random(SEED + salt)
    return sorted(rng.randrange(1, size) for _ in range(count))


PARQUET_SIZE = 4096  # an upper bound for picking cut points; each is taken modulo the real size


@pytest.mark.parametrize("cut", _cut(PARQUET_SIZE, 3, 1))
def test_truncated_events_parquet(spark, kv, tmp_path, capsys, cut: int) -> None:
    def damage(scan: Path) -> None:
        events = scan / "events" / "part-0.parquet"
        data = events.read_bytes()
        events.write_bytes(data[: cut % len(data)])

    root = _damaged_capture(kv, tmp_path, damage)
    _judge(spark, capsys, "parquet truncated", root, kv[1], kv[2], tmp_path, ("part-0.parquet",))


FLIPS = list(zip(_cut(PARQUET_SIZE, 5, 2), random.Random(SEED).choices(range(8), k=5), strict=True))


@pytest.mark.parametrize("flip", FLIPS)
def test_bit_flipped_events_parquet(spark, kv, tmp_path, capsys, flip: tuple[int, int]) -> None:
    offset, bit = flip

    def damage(scan: Path) -> None:
        events = scan / "events" / "part-0.parquet"
        data = bytearray(events.read_bytes())
        data[offset % len(data)] ^= 1 << bit
        events.write_bytes(bytes(data))

    root = _damaged_capture(kv, tmp_path, damage)
    _judge(spark, capsys, "parquet bit flip", root, kv[1], kv[2], tmp_path, ("s2",))


@pytest.mark.parametrize(("field", "value", "remove"), _json_cases(MANIFEST_FIELDS, 4, 3))
def test_manifest_field_missing_or_wrong_type(spark, kv, tmp_path, capsys, field, value, remove) -> None:
    def damage(scan: Path) -> None:
        doc = json.loads((scan / "manifest.json").read_text())
        _path_set(doc, field, value, remove=remove)
        (scan / "manifest.json").write_text(json.dumps(doc))

    root = _damaged_capture(kv, tmp_path, damage)
    _judge(spark, capsys, "manifest field", root, kv[1], kv[2], tmp_path, ("s2", "manifest.json"))


@pytest.mark.parametrize(("field", "value", "remove"), _json_cases(TABLE_INFO_FIELDS, 3, 4))
def test_table_info_field_missing_or_wrong_type(spark, kv, tmp_path, capsys, field, value, remove) -> None:
    def damage(scan: Path) -> None:
        tables = scan / "schema" / "tables.jsonl"
        docs = [json.loads(line) for line in tables.read_text().splitlines()]
        _path_set(docs[0]["table_info"], field, value, remove=remove)
        tables.write_text("".join(json.dumps(d) + "\n" for d in docs))

    root = _damaged_capture(kv, tmp_path, damage)
    _judge(spark, capsys, "table info field", root, kv[1], kv[2], tmp_path, ("app.users",))


def _rewrite_events(scan: Path, change: Callable[[list[dict]], None]) -> None:
    events = scan / "events" / "part-0.parquet"
    table = pq.read_table(events)
    rows = table.to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), events)


def _puts(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["op_type"] == "PUT"]


EVENT_DAMAGE: dict[str, Callable[[list[dict]], None]] = {
    "random value bytes": lambda rows: _puts(rows)[2].update(value=random.Random(SEED).randbytes(12)),
    "random value tail": lambda rows: _puts(rows)[3].update(value=_puts(rows)[3]["value"][:-2] + b"\xff\x00"),
    "key of another table": lambda rows: _puts(rows)[1].update(key=record_key(999, 1)),
    "commit ts before start ts": lambda rows: _puts(rows)[0].update(commit_ts=_puts(rows)[0]["start_ts"] - 5),
    "resolved ts going back": lambda rows: rows.append(
        {**rows[-1], "seq": rows[-1]["seq"] + 1, "resolved_ts": 150}
    ),
}


# what the message must name: the table and the row's handle, or the region and key of the event
EVENT_PLACE = {
    "random value bytes": ("app.users", "handle 2"),
    "random value tail": ("app.users", "handle 3"),
    "key of another table": ("999",),
    "commit ts before start ts": ("region 1", "key"),
    "resolved ts going back": ("region 1", "150"),
}


@pytest.mark.parametrize("damage_name", sorted(EVENT_DAMAGE))
def test_event_rows_with_bad_values(spark, kv, tmp_path, capsys, damage_name: str) -> None:
    root = _damaged_capture(kv, tmp_path, lambda scan: _rewrite_events(scan, EVENT_DAMAGE[damage_name]))
    _judge(spark, capsys, "event values", root, kv[1], kv[2], tmp_path, EVENT_PLACE[damage_name])


def test_captures_listed_out_of_order_are_chained_by_ts(spark, kv, tmp_path, capsys) -> None:
    """A capture whose folder name sorts first is still chained by its ts: valid, applied as usual."""
    root = tmp_path / "scans"
    shutil.copytree(kv[0], root)
    (root / "s2").rename(root / "a-late")
    _judge(spark, capsys, "captures out of order", root, kv[1], kv[2], tmp_path, ())


# ------------------------------------------------------------------------------- TiCDC storage sink

STORAGE_LINES = {
    "csv": '[source.storage]\nprotocol = "csv"\n',
    "canal-json": '[source.storage]\nprotocol = "canal-json"\n',
}
SOURCE_KIND = 'kind = "ticdc-storage"\n'


def _storage_line(protocol: str, op: str, ts: int, handle: int) -> str:
    if protocol == "csv":
        return csv_line(op, "users", ts, handle, f"n{handle}", handle)
    kind = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}[op]
    return canal_line(kind, "users", ts, {"id": handle, "name": f"n{handle}", "score": handle})


@pytest.fixture(scope="module", params=["csv", "canal-json"])
def sink(request, spark, tmp_path_factory) -> tuple[str, Path, Path, dict[str, list[str]]]:
    """(protocol, a sink folder with a landed first file and two more, the landed warehouse, the rows after
    the two more files)."""
    protocol = request.param
    base = tmp_path_factory.mktemp(f"garbage-{protocol}")
    folder = SinkFolder(base / "sink", ".csv" if protocol == "csv" else ".json")
    folder.schema("users", 100)
    folder.data("users", 100, 1, "".join(_storage_line(protocol, "I", 110 + i, i) for i in range(3)))
    folder.checkpoint(150)
    start = base / "start"
    lines = SOURCE_KIND + STORAGE_LINES[protocol]
    assert main(["run", "--config", str(_config(base, base / "sink", start, lines))]) == 0
    folder.data("users", 100, 2, "".join(_storage_line(protocol, "I", 160 + i, 10 + i) for i in range(4)))
    folder.data("users", 100, 3, "".join(_storage_line(protocol, "I", 180 + i, 20 + i) for i in range(2)))
    folder.checkpoint(250)
    reference = base / "reference"
    shutil.copytree(start, reference)
    assert main(["run", "--config", str(_config(base, base / "sink", reference, lines))]) == 0
    return protocol, base / "sink", start, table_rows(spark, reference)


@pytest.mark.parametrize("cut", _cut(200, 3, 5))
def test_storage_file_cut_mid_line(spark, sink, tmp_path, capsys, cut: int) -> None:
    """A data file that is not the newest of its folder, cut at a seeded point (never at a line end)."""
    protocol, folder, start, reference = sink
    root = tmp_path / "sink"
    shutil.copytree(folder, root)
    damaged = next((root / "app" / "users" / "100").glob("CDC000002.*"))
    data = damaged.read_bytes()
    at = cut % len(data)
    while at < len(data) and data[at - 1 : at] == b"\n":
        at += 1
    damaged.write_bytes(data[:at])
    lines = SOURCE_KIND + STORAGE_LINES[protocol]
    _judge(
        spark, capsys, f"{protocol} cut mid-line", root, start, reference, tmp_path, (damaged.name,), lines
    )


def _storage_copy(sink, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the sink folder and its users/100 data folder."""
    root = tmp_path / "sink"
    shutil.copytree(sink[1], root)
    return root, root / "app" / "users" / "100"


def _storage_judge(
    spark, capsys, kind: str, sink, root: Path, tmp_path: Path, needles: tuple[str, ...]
) -> None:
    protocol, _, start, reference = sink
    lines = SOURCE_KIND + STORAGE_LINES[protocol]
    _judge(spark, capsys, f"{protocol} {kind}", root, start, reference, tmp_path, needles, lines)


def _flippable(line: bytes, protocol: str) -> list[int]:
    """Byte positions of a data line whose damage cannot leave a valid line of other values: CSV's op,
    table and schema cells and every separator; canal-json's all but the `data`/`old` rows and the commit
    ts (a flipped value or ts digit is a valid line that says something else: no format can tell)."""
    if protocol == "csv":
        cells = [m.span() for m in re.finditer(rb'"[^"]*"|[^,\r\n]+', line)]
        keep = set(range(cells[2][1])) | {i for i, b in enumerate(line) if b in b",\r\n"}
        return sorted(keep)
    data, tidb = line.index(b'"data": '), line.index(b'"_tidb"')
    return [
        i for i in range(len(line)) if not data + 8 <= i < tidb - 2 and not tidb + 20 <= i < len(line) - 4
    ]


def _storage_flips(count: int, salt: int) -> list[tuple[int, int, int]]:
    rng = random.Random(SEED + salt)
    return [(rng.randrange(4), rng.randrange(1 << 16), rng.randrange(8)) for _ in range(count)]


@pytest.mark.parametrize("flip", _storage_flips(3, 6))
def test_storage_bit_flip_in_a_data_line(spark, sink, tmp_path, capsys, flip: tuple[int, int, int]) -> None:
    """One bit of a line of a data file that is not the newest, outside the values (see `_flippable`)."""
    root, folder = _storage_copy(sink, tmp_path)
    damaged = next(folder.glob("CDC000002.*"))
    lines = damaged.read_bytes().splitlines(keepends=True)
    which, at, bit = flip
    line = bytearray(lines[which % len(lines)])
    positions = _flippable(bytes(line), sink[0])
    line[positions[at % len(positions)]] ^= 1 << bit
    lines[which % len(lines)] = bytes(line)
    damaged.write_bytes(b"".join(lines))
    _storage_judge(spark, capsys, "bit flip", sink, root, tmp_path, (damaged.name,))


SCHEMA_FILE_FIELDS = ("Table", "Schema", "TableVersion", "TableColumns", "TableColumnsTotal",
                      "TableColumns.0.ColumnName", "TableColumns.0.ColumnType", "TableColumns.1.ColumnType",
                      "TableColumns.0.ColumnIsPk")  # fmt: skip


@pytest.mark.parametrize(("field", "value", "remove"), _json_cases(SCHEMA_FILE_FIELDS, 3, 7))
def test_storage_schema_file_field_missing_or_wrong_type(
    spark, sink, tmp_path, capsys, field, value, remove
) -> None:
    """A field of the table's schema file missing or of a wrong type, the file renamed to the checksum of
    its damaged content (when it still parses): the damage is in the content, not a checksum mismatch."""
    from backfill.sources.ticdc.schema_file import parse_schema_file, schema_file_name

    root, _ = _storage_copy(sink, tmp_path)
    path = next((root / "app" / "users" / "meta").glob("schema_*.json"))
    doc = json.loads(path.read_text())
    _path_set(doc, field, value, remove=remove)
    text = json.dumps(doc, indent=4)
    path.unlink()
    try:
        name = schema_file_name(parse_schema_file(text, path.name))
    except Exception:  # the damage broke the content itself: keep the name
        name = path.name
    (path.parent / name).write_text(text)
    _storage_judge(spark, capsys, "schema file field", sink, root, tmp_path, ("users", "schema"))


METADATA_GARBAGE = (b"\x00\xff garbage", b'{"checkpoint-ts": "x"}', b'{"checkpoint-ts": true}',
                    b'{"checkpoint-ts": 250.5}', b'{"checkpoint-ts": -1}', b"{}", b"")  # fmt: skip


@pytest.mark.parametrize("garbage", METADATA_GARBAGE)
def test_storage_metadata_file_with_garbage(spark, sink, tmp_path, capsys, garbage: bytes) -> None:
    root, _ = _storage_copy(sink, tmp_path)
    (root / "metadata").write_bytes(garbage)
    _storage_judge(spark, capsys, "metadata garbage", sink, root, tmp_path, ("metadata",))


@pytest.mark.parametrize(
    "named",
    [
        "CDC000009",
        pytest.param(
            "CDC000002",
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "a data file missing below the newest of its folder is not noticed: file numbers are not checked "
                    "for gaps (TiCDC's file expiry and restarts may leave gaps; needs a design decision)"
                ),
            ),
        ),
        "not-a-file",
    ],
)
def test_storage_index_naming_a_missing_file(spark, sink, tmp_path, capsys, named: str) -> None:
    """CDC.index naming a file that does not exist (tiflow writes the index before the file: valid when
    the number is beyond the files; an older number or a foreign name is not what TiCDC writes)."""
    root, folder = _storage_copy(sink, tmp_path)
    extension = next(folder.glob("CDC000002.*")).suffix
    if named == "CDC000002":
        next(folder.glob("CDC000002.*")).unlink()
    (folder / "meta" / "CDC.index").write_text(f"{named}{extension}\n")
    _storage_judge(spark, capsys, "index names missing file", sink, root, tmp_path, ("CDC",))


# ------------------------------------------------------------------------------------- TiCDC Kafka
#
# A small changefeed split at its first resolved ts: the messages up to and with the resolved events of
# that ts land first (on a fresh topic per case), then the rest, damaged, is appended and judged against
# one run over the undamaged rest. Offsets are counted: every case's topic is new, so a message's offset
# is the number of messages before it in its partition.

KAFKA_PARTITIONS = 2
_kafka_topics = iter(range(1 << 30))


@dataclass(frozen=True)
class Feed:
    protocol: str
    sim: Path
    base: list[KafkaMessage]  # up to the first resolved ts, landed before the damage
    rest: list[KafkaMessage]  # the next window
    reference: dict[str, list[str]]
    resolved_ts: int  # the last resolved ts of `base`


def _kafka_config(folder: Path, feed_sim: Path, bootstrap: str, protocol: str, topic: str, wh: Path) -> Path:
    schema = feed_sim / "scans" / load_index(feed_sim)[0]["scan_id"] / "schema"
    conf = folder / f"{topic}.toml"
    conf.write_text(
        f'[job]\nname = "garbage"\n[source]\nkind = "ticdc-kafka"\n[source.kafka]\n'
        f'bootstrap_servers = "{bootstrap}"\ntopic = "{topic}"\nschema = "{schema}"\nprotocol = "{protocol}"\n'
        f'timeout_seconds = 10\n[target]\nwarehouse = "{wh}"\n'
    )
    return conf


def _on_topic(messages: list[KafkaMessage], topic: str) -> list[KafkaMessage]:
    return [dataclasses.replace(m, topic=topic) for m in messages]


def _is_resolved(m: KafkaMessage, protocol: str, ts: int | None = None) -> bool:
    if protocol == "canal-json":
        doc = json.loads(m.value)
        return doc.get("type") == "TIDB_WATERMARK" and ts in (None, doc["_tidb"]["watermarkTs"])
    keys = split_frames(m.key[8:], Where("", 0, 0), "key")
    if len(keys) != 1:
        return False
    key = json.loads(keys[0])
    return key["t"] == RESOLVED and ts in (None, key["ts"])


def _land(
    bootstrap: str, feed_sim: Path, protocol: str, base: list[KafkaMessage], folder: Path
) -> tuple[str, Path]:
    """A fresh topic with `base` published and landed in a new warehouse: (topic, warehouse)."""
    topic = f"garbage-{protocol}-{next(_kafka_topics)}"
    publish(_on_topic(base, topic), bootstrap, partitions=KAFKA_PARTITIONS)
    wh = folder / f"wh-{topic}"
    conf = _kafka_config(folder, feed_sim, bootstrap, protocol, topic, wh)
    assert main(["run", "--config", str(conf), "--quiet"]) == 0
    return topic, wh


@pytest.fixture(scope="module")
def open_feed(spark, kafka_broker, tmp_path_factory) -> Feed:
    return _feed("open-protocol", spark, kafka_broker, tmp_path_factory)


@pytest.fixture(scope="module")
def canal_feed(spark, kafka_broker, tmp_path_factory) -> Feed:
    return _feed("canal-json", spark, kafka_broker, tmp_path_factory)


def _feed(protocol: str, spark, kafka_broker, tmp_path_factory) -> Feed:
    base_dir = tmp_path_factory.mktemp(f"garbage-kafka-{protocol}")
    sim = base_dir / "sim"
    simulate(
        SimulationConfig(
            out=sim, seed=3, tables=2, rows=6, txns=16, scans=2, ddl_kinds=(), ticdc_changelog=True
        )
    )
    first = load_index(sim)[0]["resolved_ts"]
    feed_ = Changefeed(topic="t", partitions=KAFKA_PARTITIONS, restarts=0, protocol=protocol)
    messages = list(changefeed_messages(sim, feed_))
    cut = max(i for i, m in enumerate(messages) if _is_resolved(m, protocol, first)) + 1
    base, rest = messages[:cut], messages[cut:]
    assert any(not _is_resolved(m, protocol) for m in rest)
    topic, wh = _land(kafka_broker.bootstrap, sim, protocol, base, base_dir)
    publish(_on_topic(rest, topic), kafka_broker.bootstrap, partitions=KAFKA_PARTITIONS)
    conf = _kafka_config(base_dir, sim, kafka_broker.bootstrap, protocol, topic, wh)
    assert main(["run", "--config", str(conf), "--quiet"]) == 0
    return Feed(protocol, sim, base, rest, table_rows(spark, wh), first)


def _offset_of(messages: list[KafkaMessage], index: int) -> int:
    partition = messages[index].partition
    return sum(1 for m in messages[:index] if m.partition == partition)


def _kafka_judge(
    spark, capsys, kafka_broker, kind: str, feed: Feed, tmp_path: Path,
    damage: Callable[[list[KafkaMessage]], tuple[list[KafkaMessage], int]], needles: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """Land the base on a fresh topic, append the damaged rest; exit 2 naming the topic, partition and
    offset of the damaged message (index returned by `damage`; -1 names none) and `needles`, every table
    as it was, or exit 0 with the rows of the undamaged rest."""
    topic, wh = _land(kafka_broker.bootstrap, feed.sim, feed.protocol, feed.base, tmp_path)
    capsys.readouterr()
    rest, index = damage(copy.deepcopy(feed.rest))
    publish(_on_topic(rest, topic), kafka_broker.bootstrap, partitions=KAFKA_PARTITIONS)
    before = _log_files(wh)
    conf = _kafka_config(tmp_path, feed.sim, kafka_broker.bootstrap, feed.protocol, topic, wh)
    code = main(["run", "--config", str(conf), "--quiet"])
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "Traceback" not in captured.err
    if code == 2:
        if index >= 0:
            all_messages = feed.base + rest
            at = len(feed.base) + index
            offset = _offset_of(all_messages, at)
            needles = (f"topic '{topic}' partition {all_messages[at].partition} offset {offset}", *needles)
        for needle in needles:
            assert needle in err, err
        assert _log_files(wh) == before, "a failed run changed the target"
        OUTCOMES[(f"kafka {feed.protocol} {kind}", "exit 2, named")] += 1
    else:
        assert code == 0, err
        assert table_rows(spark, wh) == feed.reference, "exit 0 with wrong data"
        OUTCOMES[(f"kafka {feed.protocol} {kind}", "valid, applied")] += 1


def _row_messages(rest: list[KafkaMessage], protocol: str) -> list[int]:
    return [i for i, m in enumerate(rest) if not _is_resolved(m, protocol) and (protocol != "canal-json" or
            not json.loads(m.value)["isDdl"])]  # fmt: skip


def _open_events(m: KafkaMessage) -> tuple[list[bytes], list[bytes]]:
    return split_frames(m.key[8:], Where("", 0, 0), "key"), split_frames(m.value, Where("", 0, 0), "value")


def _open_message(m: KafkaMessage, keys: list[bytes], values: list[bytes]) -> KafkaMessage:
    return dataclasses.replace(m, key=frame(keys, version=True), value=frame(values, version=False))


# -- open protocol

FRAMING_CUTS = [("key", c) for c in (3, 12, 23)] + [("value", c) for c in (5, 9, 40)]


@pytest.mark.kafka
@pytest.mark.parametrize(("part", "cut"), FRAMING_CUTS)
def test_kafka_open_framing_cut(
    spark, capsys, kafka_broker, open_feed, tmp_path, part: str, cut: int
) -> None:
    """A batch message whose key or value is cut inside the version header, a length prefix or a JSON."""
    feed = open_feed

    def damage(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
        i = _row_messages(rest, feed.protocol)[0]
        m = rest[i]
        data = getattr(m, part)
        rest[i] = dataclasses.replace(m, **{part: data[: cut % len(data)]})
        return rest, i

    _kafka_judge(spark, capsys, kafka_broker, "framing cut", feed, tmp_path, damage)


def _value_flips(count: int, salt: int) -> list[tuple[int, int, int, int]]:
    rng = random.Random(SEED + salt)
    return [
        (rng.randrange(4), rng.randrange(4), rng.randrange(1 << 16), rng.randrange(8)) for _ in range(count)
    ]


def _outside_values(value: bytes) -> list[int]:
    """Byte positions of a row value JSON outside the column values ("v": ...): a flipped value digit
    is a valid event that says something else, which no format can tell."""
    spans = [m.span(1) for m in re.finditer(rb'"v":("(?:[^"\\]|\\.)*"|[^,}]*)', value)]
    inside = {i for a, b in spans for i in range(a, b)}
    return [i for i in range(len(value)) if i not in inside]


@pytest.mark.kafka
@pytest.mark.parametrize("flip", _value_flips(4, 8))
def test_kafka_open_value_bit_flip(spark, capsys, kafka_broker, open_feed, tmp_path, flip) -> None:
    """One bit of a row event's value JSON outside its column values (names, types, flags, syntax)."""
    feed = open_feed
    which, event, at, bit = flip

    def damage(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
        rows = _row_messages(rest, feed.protocol)
        i = rows[which % len(rows)]
        keys, values = _open_events(rest[i])
        e = event % len(values)
        value = bytearray(values[e])
        positions = _outside_values(bytes(value))
        value[positions[at % len(positions)]] ^= 1 << bit
        values[e] = bytes(value)
        rest[i] = _open_message(rest[i], keys, values)
        return rest, i

    _kafka_judge(spark, capsys, kafka_broker, "value bit flip", feed, tmp_path, damage)


INT_CODES = {1, 2, 3, 8, 9}
WRONG_VALUES = {"text in an INT": "abc", "INT out of range": 1 << 70, "fraction in an INT": 1.5}


def _change_row(rest: list[KafkaMessage], change: Callable[[dict, dict], bool]) -> int:
    """Apply `change(key, value)` to the first row event it accepts (returns True); the message index."""
    for i in _row_messages(rest, "open-protocol"):
        keys, values = _open_events(rest[i])
        for e in range(len(keys)):
            key, value = json.loads(keys[e]), json.loads(values[e])
            if change(key, value):
                keys[e], values[e] = json.dumps(key).encode(), json.dumps(value).encode()
                rest[i] = _open_message(rest[i], keys, values)
                return i
    raise AssertionError("no row event to damage")


def _set_int(value: dict, wrong: object) -> bool:
    for col in (value.get("u") or {}).values():
        if col["t"] in INT_CODES and not col.get("h"):
            col["v"] = wrong
            return True
    return False


@pytest.mark.kafka
@pytest.mark.parametrize("case", sorted(WRONG_VALUES))
def test_kafka_open_value_of_the_wrong_type(
    spark, capsys, kafka_broker, open_feed, tmp_path, case: str
) -> None:
    feed = open_feed

    def damage(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
        return rest, _change_row(rest, lambda _key, value: _set_int(value, WRONG_VALUES[case]))

    _kafka_judge(spark, capsys, kafka_broker, "value of wrong type", feed, tmp_path, damage)


def _drop_handle(value: dict) -> bool:
    cols = value.get("u") or value.get("d") or {}
    handle = next((name for name, col in cols.items() if col.get("h")), None)
    if handle is None:
        return False
    for part in ("u", "p", "d"):
        (value.get(part) or {}).pop(handle, None)
    return True


ROW_DAMAGE: dict[str, Callable[[dict, dict], bool]] = {
    "unknown table": lambda key, _value: bool(key.update(tbl=key["tbl"] + "_ghost")) or True,
    "key column missing": lambda _key, value: _drop_handle(value),
}


@pytest.mark.kafka
@pytest.mark.parametrize("case", sorted(ROW_DAMAGE))
def test_kafka_open_row_of_unknown_table_or_without_key(
    spark, capsys, kafka_broker, open_feed, tmp_path, case: str
) -> None:
    feed = open_feed

    def damage(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
        return rest, _change_row(rest, ROW_DAMAGE[case])

    _kafka_judge(spark, capsys, kafka_broker, "unknown table / no key", feed, tmp_path, damage)


def _resent_after_resolved(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
    """A row message before the last resolved event of its partition, sent again right after that event
    (a changefeed restarted from an older checkpoint)."""
    r = max(i for i, m in enumerate(rest) if _is_resolved(m, "open-protocol"))
    row = next(
        i for i in _row_messages(rest, "open-protocol") if i < r and rest[i].partition == rest[r].partition
    )
    rest.insert(r + 1, rest[row])
    return rest, r + 1


@pytest.mark.kafka
@pytest.mark.parametrize("where", ["a row the last run applied", "after a resolved event read now"])
def test_kafka_open_changes_sent_again_after_a_resolved_event_are_skipped(
    spark, capsys, kafka_broker, open_feed, tmp_path, where: str
) -> None:
    """Rows at or below a resolved ts their partition carried before them (one the last run read, or one
    read now) are re-sends of a restarted changefeed: skipped, the tables as without them (exit 0)."""
    feed = open_feed

    def damage(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
        if where == "after a resolved event read now":
            return _resent_after_resolved(rest)
        landed = feed.base[_row_messages(feed.base, "open-protocol")[-1]]
        return [landed, *rest], 0

    kind = "re-sent after a resolved event"
    applied = OUTCOMES[(f"kafka {feed.protocol} {kind}", "valid, applied")]
    _kafka_judge(spark, capsys, kafka_broker, kind, feed, tmp_path, damage)
    assert OUTCOMES[(f"kafka {feed.protocol} {kind}", "valid, applied")] == applied + 1


GARBAGE_TS: tuple[object, ...] = ("x", -5, 1 << 70, 1.5, None)


@pytest.mark.kafka
@pytest.mark.parametrize("ts", GARBAGE_TS)
def test_kafka_open_resolved_event_with_garbage_ts(
    spark, capsys, kafka_broker, open_feed, tmp_path, ts
) -> None:
    feed = open_feed

    def damage(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
        i = next(i for i, m in enumerate(rest) if _is_resolved(m, feed.protocol))
        rest[i] = dataclasses.replace(
            rest[i], key=frame([json.dumps({"ts": ts, "t": RESOLVED}).encode()], version=True)
        )
        return rest, i

    _kafka_judge(spark, capsys, kafka_broker, "resolved garbage ts", feed, tmp_path, damage)


# -- canal-json


def _change_canal(rest: list[KafkaMessage], change: Callable[[dict], None]) -> int:
    i = _row_messages(rest, "canal-json")[0]
    doc = json.loads(rest[i].value)
    change(doc)
    rest[i] = dataclasses.replace(rest[i], value=json.dumps(doc).encode())
    return i


def _drop_key(doc: dict) -> None:
    for row in doc["data"]:
        row.pop(doc["pkNames"][0], None)


def _unknown_mysql_type(doc: dict) -> None:
    name = sorted(doc["mysqlType"])[-1]
    doc["mysqlType"][name] = "frobnicate"


CANAL_DAMAGE: dict[str, Callable[[dict], None]] = {
    "commitTs missing": lambda doc: doc["_tidb"].pop("commitTs"),
    "commitTs a string": lambda doc: doc["_tidb"].update(commitTs=str(doc["_tidb"]["commitTs"])),
    "commitTs a fraction": lambda doc: doc["_tidb"].update(commitTs=doc["_tidb"]["commitTs"] + 0.5),
    "_tidb missing": lambda doc: doc.pop("_tidb"),
    "data without the key column": _drop_key,
    "mysqlType unknown": _unknown_mysql_type,
}


@pytest.mark.kafka
@pytest.mark.parametrize("case", sorted(CANAL_DAMAGE))
def test_kafka_canal_field_damage(spark, capsys, kafka_broker, canal_feed, tmp_path, case: str) -> None:
    feed = canal_feed

    def damage(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
        return rest, _change_canal(rest, CANAL_DAMAGE[case])

    _kafka_judge(spark, capsys, kafka_broker, "field damage", feed, tmp_path, damage)


@pytest.mark.kafka
@pytest.mark.parametrize("cut", _cut(400, 3, 9))
def test_kafka_canal_cut_mid_json(spark, capsys, kafka_broker, canal_feed, tmp_path, cut: int) -> None:
    feed = canal_feed

    def damage(rest: list[KafkaMessage]) -> tuple[list[KafkaMessage], int]:
        i = _row_messages(rest, feed.protocol)[1]
        rest[i] = dataclasses.replace(rest[i], value=rest[i].value[: cut % len(rest[i].value)])
        return rest, i

    _kafka_judge(spark, capsys, kafka_broker, "cut mid-JSON", feed, tmp_path, damage)


@pytest.fixture(scope="module", autouse=True)
def tally() -> object:
    """Print the classes and cases tried, with their outcomes (the drill's figures)."""
    yield
    if OUTCOMES:
        print("\ngarbage in: class, outcome, cases")
        for (kind, outcome), n in sorted(OUTCOMES.items()):
            print(f"  {kind:28} {outcome:16} {n}")
        print(f"  {len({k for k, _ in OUTCOMES})} classes, {sum(OUTCOMES.values())} cases")
