"""reconcile against a real MariaDB: every type of the type map, 50k rows, each kind of difference, repair, errors.

The upstream table and its Delta copy are built from the same generated rows (MariaDB by executemany,
Delta by Spark through Arrow), once per module. JSON is stored differently on purpose (MariaDB holds
the document as written, with other spacing and key order; Delta holds TiDB's canonical text), so an
equal run also proves the JSON normalisation.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
import unicodedata
from dataclasses import dataclass
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pymysql
import pytest

from reconcile.cli import main
from reconcile.sparkside import arrow_type
from tidelake import delta

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DB = "rc_it"
ROWS = 50_000
APP = "tidelake:it"
RESOLVED_TS = 449_000_000_000_000_000
PASSWORD_IN_CONFIG = "tidelake-test-pw"  # MariaDBServer's password for user tidelake

COLUMNS: list[tuple[str, str, str]] = [  # name, MariaDB type, Delta type
    ("id", "BIGINT NOT NULL", "bigint"),
    ("c_tiny", "TINYINT", "tinyint"),
    ("c_small", "SMALLINT", "smallint"),
    ("c_medium", "MEDIUMINT", "int"),
    ("c_int", "INT", "int"),
    ("c_big", "BIGINT", "bigint"),
    ("c_utiny", "TINYINT UNSIGNED", "smallint"),
    ("c_usmall", "SMALLINT UNSIGNED", "int"),
    ("c_umedium", "MEDIUMINT UNSIGNED", "bigint"),
    ("c_uint", "INT UNSIGNED", "bigint"),
    ("c_ubig", "BIGINT UNSIGNED", "decimal(20,0)"),
    ("c_float", "FLOAT", "float"),
    ("c_double", "DOUBLE", "double"),
    ("c_dec", "DECIMAL(18,6)", "decimal(18,6)"),
    ("c_bigdec", "DECIMAL(50,10)", "string"),
    ("c_char", "CHAR(8)", "string"),
    ("c_varchar", "VARCHAR(64)", "string"),
    ("c_text", "TEXT", "string"),
    ("c_enum", "ENUM('red','green','blue')", "string"),
    ("c_set", "SET('a','b','c')", "string"),
    ("c_json", "JSON", "string"),
    ("c_binary", "BINARY(4)", "binary"),
    ("c_varbinary", "VARBINARY(16)", "binary"),
    ("c_blob", "BLOB", "binary"),
    ("c_bit", "BIT(10)", "binary"),
    ("c_date", "DATE", "date"),
    ("c_datetime", "DATETIME(6)", "timestamp_ntz"),
    ("c_timestamp", "TIMESTAMP(6) NULL", "timestamp"),
    ("c_time", "TIME(6)", "string"),
    ("c_year", "YEAR", "smallint"),
]
NAMES = [c[0] for c in COLUMNS]
WIDE = Context(prec=100)  # DECIMAL(50,10) needs more than the default 28 digits
WORDS = ["", "a,b", "x:1:y", "N", "naïve", "日本語", "emoji 😀", "tab\there", "quote'\"", "back\\slash", "ok"]


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def generate(n: int, seed: int = 11) -> list[dict[str, Any]]:
    """Rows in MariaDB terms (what is inserted); `to_delta` maps one to the Delta value domain."""
    rng = random.Random(seed)
    rows = []
    for i in range(1, n + 1):
        doc = {f"k{rng.randint(0, 5)}": rng.choice([1, 2.5, "s", None, True, [1, {"z": 0.25, "a": -3}]])}
        doc["n"] = i
        r: dict[str, Any] = {
            "id": i * 3,  # gaps, so an extra key can land between two upstream keys
            "c_tiny": rng.randint(-128, 127),
            "c_small": rng.randint(-32768, 32767),
            "c_medium": rng.randint(-(2**23), 2**23 - 1),
            "c_int": rng.randint(-(2**31), 2**31 - 1),
            "c_big": rng.randint(-(2**63), 2**63 - 1),
            "c_utiny": rng.randint(0, 255),
            "c_usmall": rng.randint(0, 65535),
            "c_umedium": rng.randint(0, 2**24 - 1),
            "c_uint": rng.randint(0, 2**32 - 1),
            "c_ubig": rng.randint(0, 2**64 - 1),
            "c_float": f32(rng.uniform(-1e6, 1e6)),
            "c_double": rng.uniform(-1e9, 1e9) * 10 ** rng.randint(-12, 12),
            "c_dec": Decimal(rng.randint(-(10**17), 10**17)).scaleb(-6, WIDE),
            "c_bigdec": Decimal(rng.randint(-(10**45), 10**45)).scaleb(-10, WIDE),
            "c_char": rng.choice(["", "abc", "é", "12345678"]),
            "c_varchar": rng.choice(WORDS) + str(rng.randint(0, 99))
            if rng.random() < 0.8
            else rng.choice(WORDS),
            "c_text": "".join(rng.choice("abcé😀 ,:") for _ in range(rng.randint(0, 60))),
            "c_enum": rng.choice(["red", "green", "blue"]),
            "c_set": rng.choice(["", "a", "a,c", "a,b,c", "b"]),
            "c_json": json.dumps(doc, indent=rng.choice([None, 1])),
            "c_binary": bytes(rng.randrange(1, 256) for _ in range(4)),
            "c_varbinary": bytes(rng.randrange(256) for _ in range(rng.randint(0, 16))),
            "c_blob": bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))),
            "c_bit": rng.randint(0, 1023),
            "c_date": dt.date(rng.randint(1000, 9999), rng.randint(1, 12), rng.randint(1, 28)),
            "c_datetime": dt.datetime(
                rng.randint(1000, 9999),
                rng.randint(1, 12),
                rng.randint(1, 28),
                rng.randint(0, 23),
                rng.randint(0, 59),
                rng.randint(0, 59),
                rng.randint(0, 999_999),
            ),
            "c_timestamp": dt.datetime(1971, 1, 1)
            + dt.timedelta(microseconds=rng.randint(0, 2_000_000_000 * 10**6)),
            "c_time": dt.timedelta(microseconds=rng.randint(-838 * 3600 * 10**6, 838 * 3600 * 10**6)),
            "c_year": rng.randint(1901, 2155),
        }
        if i % 11 == 0:  # NULLs everywhere but the key
            for name in NAMES[1:]:
                if rng.random() < 0.5:
                    r[name] = None
        rows.append(r)
    return rows


def time_text(value: dt.timedelta) -> str:
    micros = value // dt.timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    secs, frac = divmod(micros, 10**6)
    return f"{sign}{secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}.{frac:06d}"


def canonical_json(text: str) -> str:
    """The text TiDB (and so the backfill) stores: sorted keys, `, ` and `: ` separators."""
    return json.dumps(json.loads(text), sort_keys=True, separators=(", ", ": "), ensure_ascii=False)


def to_mariadb(row: dict[str, Any]) -> tuple[Any, ...]:
    out = dict(row)
    if row["c_time"] is not None:
        out["c_time"] = time_text(row["c_time"])  # pymysql mangles negative timedeltas
    return tuple(out[n] for n in NAMES)


def to_delta(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    conv = {
        "c_ubig": Decimal,
        "c_bigdec": lambda d: format(d, "f"),
        "c_json": canonical_json,
        "c_bit": lambda v: v.to_bytes(2, "big"),
        "c_timestamp": lambda v: v.replace(tzinfo=dt.UTC),
        "c_time": time_text,
    }
    for name, fn in conv.items():
        if out[name] is not None:
            out[name] = fn(out[name])
    return out


def write_delta(spark, path: str, rows: list[dict[str, Any]], *, resolved_ts: int = RESOLVED_TS) -> None:
    arrays = [pa.array([r[n] for r in rows], type=arrow_type(t)) for n, _, t in COLUMNS]
    arrays.append(pa.array([1] * len(rows), type=pa.int64()))
    table = pa.Table.from_arrays(arrays, names=[*NAMES, "_tidb_commit_ts"])
    df = spark.createDataFrame(table)
    df = df.select(*[df[n].cast(t) for n, _, t in COLUMNS], df["_tidb_commit_ts"])
    with delta.delta_transaction(spark, APP, resolved_ts, {"resolved_ts": resolved_ts, "checkpoint_ts": 1}):
        df.write.format("delta").mode("overwrite").save(path)


@dataclass
class Loaded:
    port: int
    password: str
    rows: list[dict[str, Any]]
    warehouse: Path


def connect(port: int, **kw: Any) -> pymysql.connections.Connection:
    return pymysql.connect(
        host="127.0.0.1", port=port, user="root", charset="utf8mb4", autocommit=True,
        init_command="SET time_zone = '+00:00'", **kw,
    )  # fmt: skip


@pytest.fixture(scope="module")
def loaded(mariadb, spark, tmp_path_factory) -> Loaded:
    rows = generate(ROWS)
    with connect(mariadb.port) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        defs = ", ".join(f"`{n}` {t}" for n, t, _ in COLUMNS)
        cur.execute(f"CREATE TABLE {DB}.alltypes ({defs}, PRIMARY KEY (id))")
        insert = f"INSERT INTO {DB}.alltypes VALUES ({', '.join(['%s'] * len(NAMES))})"
        for start in range(0, len(rows), 2000):
            cur.executemany(insert, [to_mariadb(r) for r in rows[start : start + 2000]])
    warehouse = tmp_path_factory.mktemp("rc_wh")
    write_delta(spark, str(warehouse / DB / "alltypes"), [to_delta(r) for r in rows])
    return Loaded(mariadb.port, mariadb.password, rows, warehouse)


def write_config(path: Path, warehouse: Path, port: int, password: str, **reconcile: Any) -> Path:
    settings = {"tables": [f"{DB}.alltypes"], "chunk_size": 5000, "sample_size": 100, "float_tolerance": 1e-6}
    settings.update(reconcile)
    lines = ["[job]", 'name = "it"', "[source]", 'path = "unused"', "[target]", f'warehouse = "{warehouse}"']
    lines.append("[reconcile]")
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    lines += ["[reconcile.upstream]", 'kind = "mariadb"', 'host = "127.0.0.1"', f"port = {port}"]
    lines += ['user = "tidelake"', f"password = {json.dumps(password)}", "connect_timeout = 3"]
    path.write_text("\n".join(lines) + "\n")
    return path


def run(capsys, config: Path, *flags: str) -> tuple[int, dict[str, Any], str]:
    code = main(["run", "--config", str(config), "--json", *flags])
    captured = capsys.readouterr()
    doc = json.loads(captured.out) if captured.out.strip() else {}
    return code, doc, captured.out + captured.err


def test_equal_tables_of_every_type_compare_equal_without_a_false_positive(loaded, tmp_path, capsys) -> None:
    config = write_config(tmp_path / "c.toml", loaded.warehouse, loaded.port, loaded.password)
    code, doc, output = run(capsys, config)
    table = doc["tables"][0]
    assert code == 0, table
    assert (table["missing"], table["extra"], table["changed"]) == (0, 0, 0)
    assert table["upstream_rows"] == table["delta_rows"] == ROWS
    assert table["strategy"] == "range" and table["chunks"] >= 10
    assert table["delta_resolved_ts"] == RESOLVED_TS
    # Only counts and checksums crossed the wire: far below the table's own size.
    assert 0 < doc["upstream_bytes"] < 0.05 * ROWS * 200
    assert loaded.password not in output


def shifted(value: dt.datetime, **delta: float) -> dt.datetime:
    return value + dt.timedelta(**delta)


def inject(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, set[str]], int, int]:
    """The Delta rows with one difference of each kind; returns (rows, changed key -> columns, missing, extra)."""
    delta_rows = [to_delta(r) for r in rows]
    by_id = {r["id"]: r for r in delta_rows}
    expected: dict[int, set[str]] = {}
    used: set[int] = set()

    def pick(ok: Any = lambda r: all(r[n] is not None for n in NAMES)) -> int:
        key = next(r["id"] for r in rows if r["id"] not in used and ok(r))
        used.add(key)
        return key

    def change(column: str, new: Any, key: int | None = None) -> int:
        key = key if key is not None else pick()
        by_id[key][column] = new(by_id[key][column])
        expected[key] = {column}
        return key

    change("c_tiny", lambda v: v ^ 1)
    change("c_small", lambda v: v ^ 1)
    change("c_medium", lambda v: v ^ 1)
    change("c_int", lambda v: v ^ 1)
    change("c_big", lambda v: v ^ 1)
    change("c_utiny", lambda v: v ^ 1)
    change("c_usmall", lambda v: v ^ 1)
    change("c_umedium", lambda v: v ^ 1)
    change("c_uint", lambda v: v ^ 1)
    change("c_ubig", lambda v: v + 1 if v < 2**64 - 1 else v - 1)
    change("c_float", lambda v: f32(v * 1.001 + 1))  # outside the tolerance
    change("c_double", lambda v: v * (1 + 1e-3) + 1)  # outside the tolerance
    change("c_dec", lambda v: v + Decimal("0.000001"))  # the last digit
    change("c_bigdec", lambda v: format(WIDE.add(Decimal(v), Decimal("1e-10")), "f"))  # the last digit
    change("c_char", lambda v: v + "x" if len(v) < 8 else v[:-1])
    change("c_text", lambda v: v + " ")
    change("c_enum", lambda v: "red" if v != "red" else "blue")
    change("c_set", lambda v: "a,b" if v != "a,b" else "c")
    change("c_json", lambda v: canonical_json(json.dumps({**json.loads(v), "n": -1})))
    change("c_binary", lambda v: bytes([v[0] ^ 1]) + v[1:])
    change("c_varbinary", lambda v: v + b"\x00")
    change("c_blob", lambda v: v[:-1] if v else b"\x01")
    change("c_bit", lambda v: bytes([v[0], v[1] ^ 1]))
    change("c_date", lambda v: v + dt.timedelta(days=1) if v.year < 9999 else v - dt.timedelta(days=1))
    change("c_datetime", lambda v: shifted(v, microseconds=1 if v.microsecond < 999_999 else -1))
    change("c_timestamp", lambda v: shifted(v, seconds=1))
    change("c_timestamp", lambda v: shifted(v, microseconds=1))
    change("c_time", lambda v: v[:-7] + (".000001" if v[-7:] != ".000001" else ".000002"))
    change("c_year", lambda v: v + 1 if v < 2155 else v - 1)
    # Unicode: the same letter, decomposed (NFD); looks alike, is different.
    change(
        "c_varchar",
        lambda v: unicodedata.normalize("NFD", v),
        pick(lambda r: "naïve" in (r["c_varchar"] or "")),
    )
    # NULL against an empty string.
    change("c_char", lambda v: None, pick(lambda r: r["c_char"] == ""))
    # Not differences: a float inside the tolerance, JSON with other spacing and key order.
    inside = pick()
    by_id[inside]["c_double"] = by_id[inside]["c_double"] * (1 + 1e-9)
    same_json = pick()
    doc = json.loads(by_id[same_json]["c_json"])
    by_id[same_json]["c_json"] = json.dumps(dict(reversed(list(doc.items()))), indent=2)
    # A missing row and an extra row (between two upstream keys).
    missing = pick()
    del by_id[missing]
    extra = dict(by_id[pick()])
    extra["id"] = extra["id"] + 1
    by_id[extra["id"]] = extra
    return sorted(by_id.values(), key=lambda r: r["id"]), expected, missing, extra["id"]


@dataclass
class Injected:
    warehouse: Path
    expected: dict[int, set[str]]
    missing: int
    extra: int


@pytest.fixture(scope="module")
def injected(loaded, spark, tmp_path_factory) -> Injected:
    """The Delta copy with one difference of each kind (the repair test then fixes this very table)."""
    delta_rows, expected, missing, extra = inject(loaded.rows)
    warehouse = tmp_path_factory.mktemp("rc_diff")
    write_delta(spark, str(warehouse / DB / "alltypes"), delta_rows)
    return Injected(warehouse, expected, missing, extra)


def test_each_injected_difference_is_found_once_with_its_column(loaded, injected, tmp_path, capsys) -> None:
    expected = injected.expected
    config = write_config(tmp_path / "c.toml", injected.warehouse, loaded.port, loaded.password)
    code, doc, output = run(capsys, config)
    table = doc["tables"][0]
    assert code == 1
    found = {s["key"]["id"]: set(s["columns"]) for s in table["samples"]["changed"]}
    assert found == expected
    assert (table["missing"], table["extra"], table["changed"]) == (1, 1, len(expected))
    assert [s["key"]["id"] for s in table["samples"]["missing"]] == [injected.missing]
    assert [s["key"]["id"] for s in table["samples"]["extra"]] == [injected.extra]
    by_column: dict[str, int] = {}
    for columns in expected.values():
        for c in columns:
            by_column[c] = by_column.get(c, 0) + 1
    assert table["changed_by_column"] == by_column
    null_vs_empty = next(
        s for s in table["samples"]["changed"] if s["columns"] == ["c_char"] and s["delta"]["c_char"] is None
    )
    assert null_vs_empty["upstream"]["c_char"] == ""
    assert loaded.password not in output


def test_repair_makes_the_table_equal_and_a_second_run_agrees(
    loaded, injected, spark, tmp_path, capsys
) -> None:
    path = injected.warehouse / DB / "alltypes"
    config = write_config(tmp_path / "c.toml", injected.warehouse, loaded.port, loaded.password)
    code, doc, _ = run(capsys, config, "--repair")
    table = doc["tables"][0]
    assert code == 0, table
    assert (table["missing"], table["extra"]) == (1, 1)  # what was found, then repaired
    assert table["repair"]["deleted"] == 1
    assert table["repair"]["upserted"] == 1 + len(injected.expected)
    assert table["repair"]["remaining"] == {"missing": 0, "extra": 0, "changed": 0}
    commit = delta.last_commit(spark, str(path), APP)
    assert commit is not None and commit.user_metadata["repair"] is True
    assert commit.user_metadata["resolved_ts"] == RESOLVED_TS
    code, doc, _ = run(capsys, config)
    assert code == 0 and doc["tables"][0]["status"] == "equal"


@pytest.fixture(scope="module")
def small_tables(loaded, spark, tmp_path_factory) -> Path:
    """A table without a primary key (duplicates) and one with a composite, case-insensitive text key."""
    with connect(loaded.port) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {DB}.nokey (a INT, b VARCHAR(10))")
        cur.executemany(f"INSERT INTO {DB}.nokey VALUES (%s, %s)", [(1, "x"), (1, "x"), (2, None), (3, "")])
        cur.execute(
            f"CREATE TABLE {DB}.composite (region VARCHAR(10) COLLATE utf8mb4_general_ci, n INT, v INT, "
            "PRIMARY KEY (region, n))"
        )
        cur.executemany(
            f"INSERT INTO {DB}.composite VALUES (%s, %s, %s)",
            [(r, n, n * 2) for r in ("Alpha", "beta", "Gamma", "delta") for n in range(300)],
        )
    warehouse = tmp_path_factory.mktemp("rc_small")
    nokey = spark.createDataFrame([(1, "x"), (2, None), (3, ""), (4, "y")], "a INT, b STRING")
    nokey.write.format("delta").save(str(warehouse / DB / "nokey"))
    rows = [
        (r, n, n * 2 + (1 if (r, n) == ("beta", 150) else 0))
        for r in ("Alpha", "beta", "Gamma", "delta")
        for n in range(300)
    ]
    spark.createDataFrame(rows, "region STRING, n INT, v INT").write.format("delta").save(
        str(warehouse / DB / "composite")
    )
    return warehouse


def test_a_table_without_a_key_compares_as_a_multiset(loaded, small_tables, tmp_path, capsys) -> None:
    config = write_config(
        tmp_path / "c.toml", small_tables, loaded.port, loaded.password, tables=[f"{DB}.nokey"]
    )
    code, doc, _ = run(capsys, config)
    table = doc["tables"][0]
    assert code == 1 and table["strategy"] == "bucket"
    assert (table["missing"], table["extra"], table["changed"]) == (
        1,
        1,
        0,
    )  # one of the two (1, 'x'); (4, 'y')
    assert table["samples"]["missing"][0]["upstream"] == {"a": 1, "b": "x"}


def test_a_composite_case_insensitive_key_is_chunked_bytewise(loaded, small_tables, tmp_path, capsys) -> None:
    config = write_config(
        tmp_path / "c.toml", small_tables, loaded.port, loaded.password, tables=[f"{DB}.composite"],
        chunk_size=100, leaf_rows=20,
    )  # fmt: skip
    code, doc, _ = run(capsys, config)
    table = doc["tables"][0]
    assert code == 1 and table["strategy"] == "range" and table["chunks"] > 5
    assert (table["missing"], table["extra"], table["changed"]) == (0, 0, 1)
    assert table["samples"]["changed"][0]["key"] == {"region": "beta", "n": 150}
    # --max-diff: exit 1 only above it.
    assert run(capsys, config, "--max-diff", "1")[0] == 0
    assert run(capsys, config, "--max-diff", "0")[0] == 1


def test_unreachable_upstream_exits_2_without_the_password(tmp_path, capsys, warehouse) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = write_config(tmp_path / "c.toml", Path(warehouse), port, "s3cret-Unreachable-pw")
    code, _, output = run(capsys, config)
    assert code == 2
    assert "cannot connect" in output and f"127.0.0.1:{port}" in output
    assert "s3cret-Unreachable-pw" not in output


def test_wrong_password_exits_2_without_the_password(loaded, tmp_path, capsys) -> None:
    config = write_config(tmp_path / "c.toml", loaded.warehouse, loaded.port, "Wr0ng-pass-word!")
    code, _, output = run(capsys, config)
    assert code == 2
    assert "access denied" in output and "'tidelake'" in output
    assert "Wr0ng-pass-word!" not in output


def test_missing_table_exits_2(loaded, tmp_path, capsys) -> None:
    config = write_config(
        tmp_path / "c.toml", loaded.warehouse, loaded.port, loaded.password, tables=[f"{DB}.nope"]
    )
    code, _, output = run(capsys, config)
    assert code == 2
    assert f"no upstream table matches '{DB}.nope'" in output
    assert loaded.password not in output


def test_a_missing_delta_table_and_a_schema_mismatch_exit_2_naming_the_problem(
    loaded, spark, tmp_path, capsys
) -> None:
    with connect(loaded.port) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {DB}.typed (id INT PRIMARY KEY, v INT UNSIGNED)")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {DB}.absent (id INT PRIMARY KEY)")
    warehouse = tmp_path / "wh"
    spark.createDataFrame([(1, 5)], "id INT, v INT").write.format("delta").save(str(warehouse / DB / "typed"))
    config = write_config(
        tmp_path / "c.toml", warehouse, loaded.port, loaded.password, tables=[f"{DB}.typed", f"{DB}.absent"]
    )
    code, doc, output = run(capsys, config)
    assert code == 2
    errors = {t["table"]: t["error"] for t in doc["tables"]}
    assert (
        "column 'v' is int(10) unsigned upstream, which maps to Delta BIGINT, but the Delta column is INT"
        in (errors[f"{DB}.typed"])
    )
    assert "no Delta table at" in errors[f"{DB}.absent"]
    assert "schema mismatch" in output and loaded.password not in output
