"""The simulator's TiCDC storage-sink folders: a naive reference consumer written here (after tiflow's
cmd/storage-consumer: schema files checked, ``CDC.index`` bounds each folder's files, rows above the root
``metadata`` checkpoint left for later, the last change per key wins, a PUT winning a tie) that must hold
the simulator's expected state at every scan's checkpoint, with restarts and duplicates on."""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from backfill.codec import TableSchema
from tidbsim import DDL_KINDS, SimulationConfig, load_expected, load_index, simulate
from tidbsim.changelog import CHANGELOG_PATH, read_changelog
from tidbsim.config import StorageSink
from tidbsim.expected import primary_key
from tidbsim.storage_codec import (
    CsvOptions,
    canal_value,
    csv_value,
)
from tidbsim.storage_sink import storage_sink_flushes, write_storage_sink
from tidelake.conventions import COMMIT_TS, ROWID

pytestmark = pytest.mark.unit

SCHEMA_RE = re.compile(r"meta/schema_(\d+)_(\d{10})\.json$")
DATA_RE = re.compile(r"^CDC(?:_(\w+?)_)?(\d+)\.(csv|json)$")


# ---------------------------------------------------------------- the naive consumer


def _parse_csv(text: str, o: CsvOptions) -> list[list[str | None]]:
    rows: list[list[str | None]] = []
    fields: list[str | None] = []
    i, n = 0, len(text)
    d, t = o.delimiter, o.terminator
    while i < n:
        if o.quote and text.startswith(o.quote, i):
            i += 1
            buf = []
            while True:
                j = text.index(o.quote, i)
                buf.append(text[i:j])
                i = j + 1
                if text.startswith(o.quote, i):
                    buf.append(o.quote)
                    i += 1
                    continue
                break
            fields.append("".join(buf))
        elif text.startswith(o.null, i) and (
            text.startswith(d, i + len(o.null)) or text.startswith(t, i + len(o.null))
        ):
            fields.append(None)
            i += len(o.null)
        else:
            buf = []
            while i < n and not text.startswith(d, i) and not text.startswith(t, i):
                if not o.quote and text[i] == "\\":
                    buf.append({"n": "\n", "r": "\r"}.get(text[i + 1], text[i + 1]))
                    i += 2
                else:
                    buf.append(text[i])
                    i += 1
            fields.append("".join(buf))
        if text.startswith(d, i):
            i += len(d)
        else:
            assert text.startswith(t, i), (text[i : i + 20], i)
            i += len(t)
            rows.append(fields)
            fields = []
    return rows


def _schema_files(root: Path) -> dict[tuple[str, str], dict[int, dict[str, Any]]]:
    """(db, table) -> version -> definition, each checked against its name (checksum by plain json)."""
    out: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for p in root.rglob("schema_*.json"):
        m = SCHEMA_RE.search(p.as_posix())
        assert m, p
        doc = json.loads(p.read_text(encoding="utf-8"))
        payload = {
            "Table": doc["Table"],
            "Schema": doc["Schema"],
            "Version": 0,
            "TableColumns": sorted(doc["TableColumns"] or [], key=lambda c: c["ColumnName"]),
            "TableColumnsTotal": doc["TableColumnsTotal"],
        }
        text = json.dumps(payload, indent=4, ensure_ascii=False, separators=(",", ": "))
        assert zlib.crc32(text.encode()) == int(m.group(2)), p
        assert doc["TableVersion"] == int(m.group(1)) and doc["Version"] == 1
        out[(doc["Schema"], doc["Table"])][doc["TableVersion"]] = doc
    return out


def _data_files(root: Path, ext: str) -> list[tuple[str, str, int, Path]]:
    """(db, table, version, file) of every file an index covers; files beyond it wait, missing ones named
    by a stale index (a writer that died before writing it) are skipped."""
    out = []
    for index in sorted(root.rglob("meta/CDC*.index")):
        folder = index.parent.parent
        rel = folder.relative_to(root).parts
        db, table, version = rel[0], rel[1], int(rel[2])
        named = DATA_RE.match(index.read_text().strip())
        assert named, index
        for f in sorted(folder.glob(f"CDC*{ext}")):
            m = DATA_RE.match(f.name)
            assert m, f
            if m.group(1) == named.group(1) and int(m.group(2)) <= int(named.group(2)):
                out.append((db, table, version, f))
    return out


def _cid(col: dict[str, Any]) -> str:
    """A column's identity: its id with ``output-column-id`` (stable across renames), else its name."""
    return col.get("ColumnId") or col["ColumnName"]


def _pk(definition: dict[str, Any]) -> list[str]:
    return [_cid(c) for c in definition["TableColumns"] if c.get("ColumnIsPk")]


def _rows_of(f: Path, db: str, table: str, definition: dict[str, Any], sink: StorageSink):
    """(commit ts, op, {column: text}) of one data file; an update is a D and an I."""
    ids = [_cid(c) for c in definition["TableColumns"]]
    names = [c["ColumnName"] for c in definition["TableColumns"]]
    text = f.read_bytes().decode("utf-8")  # no newline translation
    if sink.protocol == "csv":
        o = sink.csv
        rows = _parse_csv(text, o)
        if o.output_field_header:
            assert rows[0][-len(names) :] == names
            rows = rows[1:]
        meta = 3 + o.include_commit_ts + o.output_old_value
        for r in rows:
            assert (r[1], r[2]) == (table, db) and len(r) == meta + len(ids), f
            yield int(r[3]), r[0], dict(zip(ids, r[meta:], strict=True))
        return
    for line in text.split(sink.terminator)[:-1]:
        doc = json.loads(line)
        assert (doc["database"], doc["table"]) == (db, table)
        ts = doc["_tidb"]["commitTs"]
        by_id = {n: i for n, i in zip(names, ids, strict=True)}
        if doc["type"] == "UPDATE":
            yield ts, "D", {by_id[k]: v for k, v in doc["old"][0].items()}
        yield ts, "D" if doc["type"] == "DELETE" else "I", {by_id[k]: v for k, v in doc["data"][0].items()}


class _Table:
    def __init__(self, definition: dict[str, Any]) -> None:
        self.definition = definition
        self.keyed: dict[tuple, tuple[int, dict]] = {}
        self.bag: Counter = Counter()

    def reshape(self, new: dict[str, Any]) -> None:
        """ADD/DROP/MODIFY/RENAME COLUMN: columns by identity; a new identity under an old name is the
        old column converted (a DECIMAL scale change), one under a new name takes its default."""
        old_names = {_cid(c): c["ColumnName"] for c in self.definition["TableColumns"]}

        def convert(row: dict) -> dict:
            out = {}
            for c in new["TableColumns"]:
                cid = _cid(c)
                if cid in row:
                    out[cid] = row[cid]
                    continue
                same = [k for k, n in old_names.items() if n == c["ColumnName"] and k in row]
                if same:
                    v = row[same[0]]
                    if v is not None and c["ColumnType"] == "DECIMAL":
                        v = format(Decimal(v).quantize(Decimal(1).scaleb(-int(c["ColumnScale"]))), "f")
                    out[cid] = v
                else:
                    out[cid] = c.get("ColumnDefault")
            return out

        self.keyed = {k: (ts, convert(r)) for k, (ts, r) in self.keyed.items()}
        self.bag = Counter({tuple(sorted(convert(dict(r)).items())): n for r, n in self.bag.items()})
        self.definition = new


RENAME_RE = re.compile(r"RENAME TABLE `([^`]+)`\.`([^`]+)` TO `([^`]+)`\.`([^`]+)`")


def consume(root: Path, sink: StorageSink) -> tuple[int, dict[tuple[str, str], _Table]]:
    """Replay the folder as a consumer holding everything at or below ``metadata`` would: DDLs (schema
    files with a query) at their version, changes by commit ts, the last change per key winning (a PUT
    wins a tie: an update's D+I), changes of tables without a key as a multiset, one copy per change."""
    checkpoint = json.loads((root / "metadata").read_text())["checkpoint-ts"]
    schemas = _schema_files(root)
    events: list[tuple[int, int, Any]] = []
    for (db, table), versions in schemas.items():
        for version, definition in versions.items():
            if definition["Query"] and table and version <= checkpoint:
                events.append((version, 0, ("ddl", db, table, definition)))
    for db, table, version, f in _data_files(root, sink.extension):
        definition = schemas[(db, table)][version]
        for ts, op, row in _rows_of(f, db, table, definition, sink):
            if ts <= checkpoint:
                events.append((ts, 1 if op == "D" else 2, ("row", db, table, definition, op, row)))
    events.sort(key=lambda e: (e[0], e[1]))
    tables: dict[tuple[str, str], _Table] = {}
    seen_keyless: set[tuple] = set()
    for ts, _, ev in events:
        if ev[0] == "ddl":
            _, db, name, d = ev
            kind = d["Type"]
            if kind in (3, 11):  # CREATE, TRUNCATE TABLE
                tables[(db, name)] = _Table(d)
            elif kind == 4:  # DROP TABLE
                tables.pop((db, name), None)
            elif kind == 14:  # RENAME TABLE
                m = RENAME_RE.search(d["Query"])
                assert m, d["Query"]
                t = tables.pop((m.group(1), m.group(2)), None) or _Table(d)
                t.definition = d
                tables[(db, name)] = t
            elif (db, name) in tables:
                tables[(db, name)].reshape(d)
            continue
        _, db, name, d, op, row = ev
        t = tables.setdefault((db, name), _Table(d))
        pk = _pk(d)
        if pk:
            key = tuple(row[c] for c in pk)
            if op == "D":
                t.keyed.pop(key, None)
            else:
                t.keyed[key] = (ts, row)
            continue
        change = (db, name, ts, op, tuple(sorted(row.items())))
        if change not in seen_keyless:  # a transaction's lines written again after a restart
            seen_keyless.add(change)
            t.bag[change[4]] += -1 if op == "D" else 1
    return checkpoint, tables


def _texts(schema_cols, row: dict[str, Any], sink: StorageSink) -> dict[str, str | None]:
    if sink.protocol == "csv":
        return {c.name: csv_value(c, row[c.name], sink.csv, sink.time_zone) for c in schema_cols}
    return {c.name: canal_value(c, row[c.name], sink.time_zone) for c in schema_cols}


def assert_expected_state(sim: Path, root: Path, sink: StorageSink, scan_id: str) -> None:
    """Every table as expected; a table without a key only where updates carry the old row (a CSV ``U``
    row alone cannot be applied to a multiset)."""
    keyless_applicable = sink.protocol != "csv" or sink.csv.output_old_value
    _, tables = consume(root, sink)
    expected = load_expected(sim, scan_id)
    assert {k for k, t in tables.items() if t.keyed or +t.bag} <= set(expected), scan_id
    for (db, name), table in expected.items():
        t = tables.get((db, name))
        got_def = t.definition if t is not None else None
        cols = _columns_of(sim, db, name, table)
        want = [_texts(cols, r, sink) for r in table.to_pylist()]
        names = {_cid(c): c["ColumnName"] for c in got_def["TableColumns"]} if got_def else {}
        if primary_key(table) == (ROWID,):
            if not keyless_applicable:
                continue
            got = Counter()
            if t is not None:
                for r, n in (+t.bag).items():
                    got[tuple(sorted((names[k], v) for k, v in r))] = n
            assert got == Counter(tuple(sorted(w.items())) for w in want), (db, name, scan_id)
            continue
        pk = primary_key(table)
        got_rows = {}
        if t is not None:
            for _, (ts, r) in t.keyed.items():
                named = {names[k]: v for k, v in r.items()}
                got_rows[tuple(named[c] for c in pk)] = (ts, named)
        want_by_key = {
            tuple(w[c] for c in pk): (r[COMMIT_TS], w) for r, w in zip(table.to_pylist(), want, strict=True)
        }
        assert set(got_rows) == set(want_by_key), (db, name, scan_id)
        for k, (ts, w) in want_by_key.items():
            assert got_rows[k] == (ts, w), (db, name, k)


def _columns_of(sim: Path, db: str, name: str, table) -> list:
    """The simulator's columns of an expected table, by name (any version of the table that had it)."""
    if sim not in _COLS:
        found: dict[tuple[str, str], dict[str, Any]] = defaultdict(dict)
        for rec in read_changelog(sim / CHANGELOG_PATH):
            info = rec[3] if rec[0] == "schema" else (rec[6] if rec[0] == "ddl" else None)
            if info is not None:
                s = TableSchema.from_table_info(info, schema_name=rec[2])
                found[(rec[2], s.name)].update((c.name, c) for c in s.columns)
        _COLS[sim] = found
    cols = _COLS[sim][(db, name)]
    return [cols[n] for n in table.column_names if n not in (ROWID, COMMIT_TS)]


_COLS: dict[Path, dict[tuple[str, str], dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("storage-sim") / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=5, tables=4, rows=20, txns=160, scans=3, ddl_kinds=(), ticdc_changelog=True
        )
    )
    return out


SINKS = [
    StorageSink(protocol="csv", restarts=2, flush_rows=37),
    StorageSink(protocol="csv", enable_partition_separator=False, restarts=2, flush_rows=19, seed=8),
    StorageSink(
        protocol="csv",
        csv=CsvOptions(output_old_value=True, binary_encoding_method="hex", output_field_header=True),
        date_separator="day",
        flush_interval_s=6 * 3600,
        restart_new_version=True,
        seed=2,
    ),
    StorageSink(
        protocol="csv",
        flavor="ticdc",
        csv=CsvOptions(quote="", delimiter="|@", null="NULL", terminator="\n", output_old_value=True),
        table_across_nodes=True,
        dispatchers_per_table=2,
        enable_partition_separator=False,
        file_index_width=6,
        time_zone="Asia/Shanghai",
        restarts=3,
        flush_rows=23,
        seed=4,
    ),
    StorageSink(protocol="canal-json", restarts=2, flush_rows=41, seed=1),
    StorageSink(
        protocol="canal-json",
        flavor="ticdc",
        date_separator="month",
        flush_interval_s=12 * 86400,
        table_across_nodes=True,
        restart_new_version=True,
        terminator="\n",
        seed=7,
    ),
]


@pytest.mark.parametrize("sink", SINKS, ids=lambda s: f"{s.protocol}-{s.flavor}-{s.seed}")
def test_a_naive_consumer_reaches_the_expected_state_at_every_scan(sim, tmp_path, sink):
    scans = load_index(sim)
    by_ts = {s["resolved_ts"]: s["scan_id"] for s in scans}
    root = tmp_path / "sink"
    checked = []
    for ts in storage_sink_flushes(sim, sink, root):
        if ts in by_ts:
            assert_expected_state(sim, root, sink, by_ts[ts])
            checked.append(ts)
    assert checked == sorted(by_ts)


@pytest.fixture(scope="module")
def ddl_sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every DDL kind a consumer can replay from the files alone (partition drops need the query run
    against a database, as TiCDC's own consumer does)."""
    out = tmp_path_factory.mktemp("storage-ddl-sim") / "sim"
    kinds = tuple(k for k in DDL_KINDS if k not in ("drop_partition", "truncate_partition"))
    simulate(
        SimulationConfig(
            out=out,
            seed=11,
            tables=5,
            rows=15,
            txns=200,
            scans=4,
            ddls_per_scan=3,
            ddl_kinds=kinds,
            ticdc_changelog=True,
        )
    )
    return out


DDL_SINKS = [
    StorageSink(
        protocol="csv",
        csv=CsvOptions(output_old_value=True),
        output_column_id=True,
        restart_new_version=True,
        restarts=2,
        flush_rows=29,
        from_creation=True,
        seed=3,
    ),
    StorageSink(
        protocol="csv",
        flavor="ticdc",
        csv=CsvOptions(output_old_value=True, quote=""),
        output_column_id=True,
        table_across_nodes=True,
        dispatchers_per_table=3,
        date_separator="day",
        flush_interval_s=5 * 3600,
        restarts=2,
        seed=6,
    ),
]


@pytest.mark.parametrize("sink", DDL_SINKS, ids=lambda s: f"{s.flavor}-{s.seed}")
def test_ddls_become_table_versions_a_consumer_can_replay(ddl_sim, tmp_path, sink):
    scans = load_index(ddl_sim)
    by_ts = {s["resolved_ts"]: s["scan_id"] for s in scans}
    root = tmp_path / "sink"
    for ts in storage_sink_flushes(ddl_sim, sink, root):
        if ts in by_ts:
            assert_expected_state(ddl_sim, root, sink, by_ts[ts])
    schemas = _schema_files(root)
    ddls = [
        rec
        for rec in read_changelog(ddl_sim / CHANGELOG_PATH)
        if rec[0] == "ddl" and (sink.from_creation or rec[1] > scans[0]["checkpoint_ts"])
    ]
    assert {r[5] for r in ddls} >= {3, 4, 5, 6, 11, 12, 14} | ({1} if sink.from_creation else set())
    for _, fts, db, _table, query, action, info in ddls:
        name = info["name"]["O"] if info else ""
        definition = schemas[(db, name)][fts]  # the schema file at the DDL's finished ts
        assert (definition["Query"], definition["Type"]) == (query, action)
        if info is None:
            assert definition["TableColumns"] is None and (root / db / "meta").is_dir()
    # data of a version folder was committed after the version's DDL
    for db, table, version, f in _data_files(root, sink.extension):
        for ts, _, _ in _rows_of(f, db, table, schemas[(db, table)][version], sink):
            assert ts > version, f


def _folder_facts(root: Path, sink: StorageSink) -> dict[str, int]:
    """What a consumer has to cope with in a finished folder."""
    facts = Counter()
    checkpoint = json.loads((root / "metadata").read_text())["checkpoint-ts"]
    for index in root.rglob("meta/CDC*.index"):
        folder = index.parent.parent
        named = DATA_RE.match(index.read_text().strip())
        assert named
        if not (folder / index.read_text().strip()).exists():
            facts["index_naming_a_missing_file"] += 1
        for f in folder.glob(f"CDC*{sink.extension}"):
            m = DATA_RE.match(f.name)
            if m.group(1) != named.group(1) and not (folder / f"meta/CDC_{m.group(1)}.index").exists():
                facts["file_without_index"] += 1
            elif m.group(1) == named.group(1) and int(m.group(2)) > int(named.group(2)):
                facts["file_beyond_index"] += 1
    schemas = _schema_files(root)
    lines = Counter()
    put_at = None
    for db, table, version, f in _data_files(root, sink.extension):
        for ts, op, row in _rows_of(f, db, table, schemas[(db, table)][version], sink):
            lines[(db, table, ts, op, tuple(sorted(row.items())))] += 1
            facts["rows_beyond_checkpoint"] += ts > checkpoint
            facts["delete_after_put_of_a_transaction"] += op == "D" and put_at == (f, ts)
            if op != "D":
                put_at = (f, ts)
    facts["duplicated_changes"] = sum(1 for n in lines.values() if n > 1)
    for versions in schemas.values():
        facts["empty_query_versions"] += sum(1 for d in versions.values() if not d["Query"])
    return facts


def test_restarts_leave_what_consumers_meet(sim, tmp_path):
    tiflow = StorageSink(protocol="csv", restarts=3, restart_new_version=True, flush_rows=31, seed=1)
    write_storage_sink(sim, tiflow, tmp_path / "tiflow")
    facts = _folder_facts(tmp_path / "tiflow", tiflow)
    assert facts["duplicated_changes"] > 0 and facts["rows_beyond_checkpoint"] > 0
    assert facts["index_naming_a_missing_file"] > 0  # index first, then the crash: never written
    assert facts["empty_query_versions"] > 4  # the start's versions, then the restarts'
    assert facts["delete_after_put_of_a_transaction"] == 0  # TiCDC's sorter: deletes first
    ticdc = StorageSink(
        protocol="canal-json", flavor="ticdc", restarts=3, restart_new_version=True, flush_rows=31, seed=1
    )
    write_storage_sink(sim, ticdc, tmp_path / "ticdc")
    facts = _folder_facts(tmp_path / "ticdc", ticdc)
    assert facts["duplicated_changes"] > 0 and facts["rows_beyond_checkpoint"] > 0
    assert facts["index_naming_a_missing_file"] == 0
    assert facts["file_beyond_index"] > 0  # data first, then the crash: a file its index does not name
    elems = [
        c
        for p in (tmp_path / "ticdc").rglob("schema_*.json")
        for c in json.loads(p.read_text())["TableColumns"]
        if "ColumnElems" in c
    ]
    assert elems and all(c["ColumnType"] in ("ENUM", "SET") for c in elems)  # the new architecture's files
    assert "ColumnElems" not in "".join(p.read_text() for p in (tmp_path / "tiflow").rglob("schema_*.json"))


def test_the_same_seed_writes_the_same_folder(sim, tmp_path):
    sink = StorageSink(protocol="canal-json", flavor="ticdc", table_across_nodes=True, restarts=2, seed=9)

    def digest(root: Path) -> dict[str, int]:
        return {
            p.relative_to(root).as_posix(): zlib.crc32(p.read_bytes()) for p in root.rglob("*") if p.is_file()
        }

    write_storage_sink(sim, sink, tmp_path / "a")
    write_storage_sink(sim, sink, tmp_path / "b")
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    write_storage_sink(
        sim,
        StorageSink(protocol="canal-json", flavor="ticdc", table_across_nodes=True, restarts=2, seed=10),
        tmp_path / "c",
    )
    assert digest(tmp_path / "a") != digest(tmp_path / "c")
    with pytest.raises(FileExistsError):
        write_storage_sink(sim, sink, tmp_path / "a")


def test_backfill_simulate_writes_storage_sinks_beside_the_scans(tmp_path, capsys):
    from backfill.cli import main as backfill_main

    out = tmp_path / "sim"
    args = ["simulate", "--out", str(out), "--tables", "2", "--rows", "5", "--txns", "20", "--scans", "2"]
    assert backfill_main([*args, "--storage-sink", "csv", "--storage-sink", "canal-json", "--json"]) == 0
    last = load_index(out)[-1]["resolved_ts"]
    for protocol in ("csv", "canal-json"):
        root = out / "storage" / protocol
        assert json.loads((root / "metadata").read_text()) == {"checkpoint-ts": last}
        assert list(root.rglob("meta/schema_*.json")) and list(root.rglob("meta/CDC.index"))
    assert (out / "scans").is_dir()
    assert backfill_main(["simulate", "--out", str(tmp_path / "x"), "--storage-sink", "avro"]) == 2
    assert "storage protocol must be one of" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"protocol": "avro"}, "storage protocol"),
        ({"flavor": "tidb"}, "flavor"),
        ({"date_separator": "week"}, "date-separator"),
        ({"file_index_width": 5}, "file-index-width"),
        ({"table_across_nodes": True}, "new architecture"),
        ({"flavor": "ticdc", "dispatchers_per_table": 2}, "table_across_nodes"),
        ({"csv": {"binary_encoding_method": "base32"}}, "binary-encoding-method"),
        ({"csv": {"quote": "|", "delimiter": "|"}}, "quote"),
    ],
)
def test_bad_sink_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        if "csv" in settings:
            settings = dict(settings, csv=CsvOptions(**settings["csv"]))
        StorageSink(**settings)


def test_one_storage_sink_per_protocol(tmp_path):
    with pytest.raises(ValueError, match="one storage sink per protocol"):
        SimulationConfig(out=tmp_path, storage_sinks=(StorageSink(), StorageSink(seed=1)))
    assert SimulationConfig(out=tmp_path, storage_sinks=[StorageSink()]).ticdc_changelog
