"""Hypothesis strategies shared by the codec tests: random tables, and rows with their expected values.

(No tests here: this module only holds strategies, named test_codec_* to live beside its users.)
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
from hypothesis import strategies as st

from backfill.codec import ZERO_TIME, TableSchema
from backfill.codec.tableinfo import column_info, table_info

INT_RANGES = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}


@dataclass(frozen=True)
class ColumnSpec:
    sql_type: str
    values: st.SearchStrategy  # strategy of (value to encode, expected decoded value)


def _pair(strategy: st.SearchStrategy, expect=lambda v: v) -> st.SearchStrategy:
    return strategy.map(lambda v: (v, expect(v)))


def _int_spec(name: str, unsigned: bool) -> ColumnSpec:
    bits = INT_RANGES[name]
    if unsigned:
        lo, hi = 0, (1 << bits) - 1
        edge = st.sampled_from([lo, hi, 1])
        expect = Decimal if name == "bigint" else (lambda v: v)
    else:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        edge = st.sampled_from([lo, hi, -1, 0, 127, 128, -129, 32767, 32768, 2**31, -(2**31) - 1])
        edge = edge.filter(lambda v: lo <= v <= hi)
        expect = lambda v: v  # noqa: E731
    return ColumnSpec(
        f"{name}{' unsigned' if unsigned else ''}", _pair(st.one_of(edge, st.integers(lo, hi)), expect)
    )


def _decimal_spec(prec: int, scale: int) -> ColumnSpec:
    def build(sign: int, digits: int) -> Decimal:
        return Decimal((0 if sign > 0 else 1, tuple(int(c) for c in str(digits)), -scale))

    top = 10**prec - 1
    strategy = st.builds(
        build, st.sampled_from([1, -1]), st.one_of(st.sampled_from([0, top, 1]), st.integers(0, top))
    )

    def expect(v: Decimal):
        v = v.copy_abs() if v.is_zero() else v  # there is no negative zero DECIMAL
        return v if prec <= 38 else format(v, "f")

    return ColumnSpec(f"decimal({prec},{scale})", _pair(strategy, expect))


def _float32(v: float) -> float:
    return float(np.float32(v))


TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def _long_text() -> st.SearchStrategy:
    return st.sampled_from(["x" * 70_000, "é" * 33_000])


def _frac_micro(fsp: int) -> st.SearchStrategy:
    unit = 10 ** (6 - fsp)
    return st.integers(0, 10**fsp - 1).map(lambda k: k * unit)


def _datetime_spec(kind: str, fsp: int) -> ColumnSpec:
    def build(d: dt.datetime, micro: int) -> dt.datetime:
        d = d.replace(microsecond=micro)
        return d.replace(tzinfo=dt.UTC) if kind == "timestamp" else d

    real = st.builds(
        build,
        st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)),
        _frac_micro(fsp),
    )
    zero = st.just(ZERO_TIME).map(lambda z: (z, None))
    return ColumnSpec(f"{kind}({fsp})", st.one_of(_pair(real), zero))


def _time_spec(fsp: int) -> ColumnSpec:
    max_us = (838 * 3600 + 59 * 60 + 59) * 1_000_000
    unit = 10 ** (6 - fsp)

    def build(us: int) -> tuple[dt.timedelta, str]:
        us -= us % unit if us >= 0 else -((-us) % unit)
        td = dt.timedelta(microseconds=us)
        sign = "-" if us < 0 else ""
        a = abs(us)
        s, frac = divmod(a, 1_000_000)
        text = f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
        if fsp:
            text += "." + f"{frac:06d}"[:fsp]
        return td, text

    return ColumnSpec(
        f"time({fsp})",
        st.one_of(st.sampled_from([0, max_us, -max_us, -1, 1]), st.integers(-max_us, max_us)).map(build),
    )


ELEMS = ["a", "b", "c,d".replace(",", ""), "x y", "ü"]


def _json_values() -> st.SearchStrategy:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        TEXT,
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
        max_leaves=12,
    )


def _json_spec() -> ColumnSpec:
    # Expected: the same JSON value (compared after json.loads); text is checked separately for form.
    return ColumnSpec("json", _json_values().map(lambda v: (json.dumps(v), ("json", v))))


def _bit_spec(n: int) -> ColumnSpec:
    return ColumnSpec(
        f"bit({n})", st.integers(0, (1 << n) - 1).map(lambda v: (v, v.to_bytes((n + 7) // 8, "big")))
    )


COLUMN_SPECS: st.SearchStrategy = st.one_of(
    st.builds(_int_spec, st.sampled_from(list(INT_RANGES)), st.booleans()),
    st.integers(1, 65).flatmap(lambda p: st.integers(0, min(p, 30)).map(lambda s: _decimal_spec(p, s))),
    st.just(ColumnSpec("double", _pair(st.floats(allow_nan=False, allow_infinity=False)))),
    st.just(ColumnSpec("float", _pair(st.floats(width=32, allow_nan=False, allow_infinity=False), _float32))),
    st.just(ColumnSpec("varchar(100)", _pair(st.one_of(TEXT, st.just(""))))),
    st.just(ColumnSpec("longtext", _pair(st.one_of(TEXT, _long_text())))),
    st.just(ColumnSpec("varbinary(100)", _pair(st.binary(max_size=40)))),
    st.just(ColumnSpec("enum('a','b','cd','x y','ü')", _pair(st.sampled_from(["a", "b", "cd", "x y", "ü"])))),
    st.just(
        ColumnSpec(
            "set('a','b','cd','x y','ü')",
            st.lists(st.sampled_from(["a", "b", "cd", "x y", "ü"]), unique=True).map(
                lambda names: (
                    ",".join(names),
                    ",".join(e for e in ["a", "b", "cd", "x y", "ü"] if e in names),
                )
            ),
        )
    ),
    _json_strategy := st.just(_json_spec()),
    st.integers(1, 64).map(_bit_spec),
    st.just(ColumnSpec("date", st.one_of(_pair(st.dates()), st.just((ZERO_TIME, None))))),
    st.builds(_datetime_spec, st.sampled_from(["datetime", "timestamp"]), st.integers(0, 6)),
    st.integers(0, 6).map(_time_spec),
    st.just(ColumnSpec("year", _pair(st.one_of(st.just(0), st.integers(1901, 2155))))),
)


@dataclass
class RandomTable:
    schema: TableSchema
    specs: dict[int, ColumnSpec]  # column id -> spec


@st.composite
def random_tables(draw, min_cols: int = 1, max_cols: int = 8) -> RandomTable:
    specs = draw(st.lists(COLUMN_SPECS, min_size=min_cols, max_size=max_cols))
    ids = draw(st.lists(st.integers(1, 600), min_size=len(specs), max_size=len(specs), unique=True))
    # Nullable columns get a default so that a NULL is written (TiDB omits NULLs of all-NULL-default columns).
    cols = [
        column_info(cid, f"c{cid}", spec.sql_type, default="" if spec.sql_type != "json" else None)
        for cid, spec in zip(ids, specs, strict=True)
    ]
    info = table_info(draw(st.integers(1, 2**40)), "rand", cols)
    return RandomTable(TableSchema.from_table_info(info), dict(zip(ids, specs, strict=True)))


@st.composite
def random_rows(draw, table: RandomTable, allow_absent: bool = True) -> tuple[dict[int, Any], dict[str, Any]]:
    """(values to encode by column id, expected decoded row) — absent columns expected as NULL."""
    values: dict[int, Any] = {}
    expected: dict[str, Any] = {}
    for col in table.schema.columns:
        choice = draw(
            st.sampled_from(
                ["value", "value", "value", "null", "absent"] if allow_absent else ["value", "value", "null"]
            )
        )
        if choice == "value":
            v, e = draw(table.specs[col.id].values)
            values[col.id] = v
            expected[col.name] = e
        else:
            if choice == "null":
                values[col.id] = None
            expected[col.name] = None
    return values, expected


def assert_row_matches(row: dict[str, Any], expected: dict[str, Any]) -> None:
    for name, e in expected.items():
        got = row[name]
        if isinstance(e, tuple) and e and e[0] == "json":
            assert isinstance(got, str), (name, got)
            assert json.loads(got) == e[1], (name, got, e[1])
        elif isinstance(e, float) and isinstance(got, float):
            assert got == e or (got != got and e != e), (name, got, e)
            assert str(got) == str(e) or got == e
        else:
            assert got == e and type(got) is type(e), (name, got, e)
