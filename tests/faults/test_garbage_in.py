"""Garbage in (issue 17 §3): a seeded mutator over every input. Each damaged input must end in exit 2 with
a message naming the file (and line or key where there is one) and every table unchanged, or, where the
damage leaves a valid input, be applied exactly as the undamaged input — never a traceback, a hang, exit 0
with wrong data, or a changed target.

One capture (kv-scan) or sink folder (TiCDC storage) already landed; the next one is damaged. The calls are
in-process (`backfill.cli.main`, the shared session): each case costs a small Spark run, not a JVM.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backfill.cli import main
from backfill.codec import record_key
from tests.captures import Capture, users_table
from tests.faults.harness import table_rows
from tests.storage_sink import SinkFolder, canal_line, csv_line

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


@pytest.fixture(scope="module", autouse=True)
def tally() -> object:
    """Print the classes and cases tried, with their outcomes (the drill's figures)."""
    yield
    if OUTCOMES:
        print("\ngarbage in: class, outcome, cases")
        for (kind, outcome), n in sorted(OUTCOMES.items()):
            print(f"  {kind:28} {outcome:16} {n}")
        print(f"  {len({k for k, _ in OUTCOMES})} classes, {sum(OUTCOMES.values())} cases")
