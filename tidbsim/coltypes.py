"""MySQL column types the simulated tables use: TiDB FieldType, SQL text, and value generators.

Generated values are already in the codec's value domain (what ``decode_row`` gives back): FLOAT values
are exact in float32, DECIMAL values carry exactly the column's scale, DATETIME/TIMESTAMP/TIME respect the
column's fsp, JSON is canonical text, BINARY(n) is n bytes. So "what the model wrote" and "what a
consumer decodes" can be compared with ``==`` (``ZERO_TIME`` decodes to None).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

from backfill.codec import ZERO_TIME

# FieldType.Flag bits (MySQL)
NOT_NULL, PRI_KEY, UNSIGNED, ZEROFILL, BINARY, NO_DEFAULT = 1, 2, 32, 64, 128, 4096

UTC = dt.UTC
_WIDE = Context(prec=100)
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_WORDS = ("tide", "lake", "delta", "region", "scan", "tikv", "raft", "lock", "commit", "snapshot")
_UNICODE = ("é", "ß", "中", "ü", "ø", "ñ")


@dataclass(frozen=True)
class SqlType:
    """One column type. ``sql`` is valid for both TiDB and MariaDB (charset clauses added separately).

    ``gen`` picks the value generator; ``bits`` is the integer width, ``fsp`` the fractional seconds.
    """

    sql: str
    tp: int
    flen: int
    decimal: int
    flag: int
    charset: str
    collate: str
    gen: str
    elems: tuple[str, ...] = ()
    bits: int = 0

    @property
    def is_text(self) -> bool:
        return self.charset == "utf8mb4"

    @property
    def unsigned(self) -> bool:
        return bool(self.flag & UNSIGNED)

    def field_type(self, extra_flag: int = 0) -> dict[str, Any]:
        """TiDB ``FieldType`` JSON (capitalised keys)."""
        return {
            "Tp": self.tp,
            "Flag": self.flag | extra_flag,
            "Flen": self.flen,
            "Decimal": self.decimal,
            "Charset": self.charset,
            "Collate": self.collate,
            "Elems": list(self.elems) if self.elems else None,
            "ElemsIsBinaryLit": None,
            "Array": False,
        }

    def column_sql(self) -> str:
        """Type text with the charset/collation clause MariaDB needs to match TiDB's (utf8mb4_bin unless the
        type says otherwise)."""
        if self.is_text:
            return f"{self.sql} CHARACTER SET utf8mb4 COLLATE {self.collate}"
        return self.sql


def _bin(sql: str, tp: int, flen: int, dec: int, gen: str, flag: int = 0, bits: int = 0) -> SqlType:
    return SqlType(sql, tp, flen, dec, flag | BINARY, "binary", "binary", gen, bits=bits)


def _text(
    sql: str, tp: int, flen: int, gen: str, elems: tuple[str, ...] = (), collate: str = "utf8mb4_bin"
) -> SqlType:
    return SqlType(sql, tp, flen, 0, 0, "utf8mb4", collate, gen, elems)


def integer(name: str, tp: int, flen: int, bits: int, unsigned: bool = False) -> SqlType:
    sql = f"{name} UNSIGNED" if unsigned else name
    return _bin(
        sql,
        tp,
        flen - (1 if unsigned and name != "BIGINT" else 0),
        0,
        "uint" if unsigned else "int",
        UNSIGNED if unsigned else 0,
        bits,
    )


TINYINT = integer("TINYINT", 1, 4, 8)
TINYINT_U = integer("TINYINT", 1, 4, 8, True)
SMALLINT = integer("SMALLINT", 2, 6, 16)
SMALLINT_U = integer("SMALLINT", 2, 6, 16, True)
MEDIUMINT = integer("MEDIUMINT", 9, 9, 24)
MEDIUMINT_U = integer("MEDIUMINT", 9, 9, 24, True)
INT = integer("INT", 3, 11, 32)
INT_U = integer("INT", 3, 11, 32, True)
BIGINT = integer("BIGINT", 8, 20, 64)
BIGINT_U = integer("BIGINT", 8, 20, 64, True)
FLOAT = _bin("FLOAT", 4, 12, -1, "float32")
DOUBLE = _bin("DOUBLE", 5, 22, -1, "float64")
DATE = _bin("DATE", 10, 10, 0, "date")
YEAR = _bin("YEAR", 13, 4, 0, "year", UNSIGNED | ZEROFILL)
JSON = _bin("JSON", 245, 4294967295, 0, "json")
TEXT = _text("TEXT", 252, 65535, "text")
BLOB = _bin("BLOB", 252, 65535, 0, "bytes")


def decimal(p: int, s: int) -> SqlType:
    return _bin(f"DECIMAL({p},{s})", 246, p, s, "decimal" if p <= 38 else "decimal_str")


def varchar(n: int, collate: str = "utf8mb4_bin") -> SqlType:
    return _text(f"VARCHAR({n})", 15, n, "text", collate=collate)


def char(n: int) -> SqlType:
    return _text(f"CHAR({n})", 254, n, "text")


def binary(n: int) -> SqlType:
    return _bin(f"BINARY({n})", 254, n, 0, "fixed_bytes")


def varbinary(n: int) -> SqlType:
    return _bin(f"VARBINARY({n})", 15, n, 0, "bytes")


def bit(n: int) -> SqlType:
    return _bin(f"BIT({n})", 16, n, 0, "bit", UNSIGNED)


def enum(*elems: str) -> SqlType:
    quoted = ",".join(f"'{e}'" for e in elems)
    return _text(f"ENUM({quoted})", 247, -1, "enum", elems)


def set_of(*elems: str) -> SqlType:
    quoted = ",".join(f"'{e}'" for e in elems)
    return _text(f"SET({quoted})", 248, -1, "set", elems)


def _fsp_type(name: str, tp: int, base_len: int, fsp: int, gen: str) -> SqlType:
    sql = f"{name}({fsp})" if fsp else name
    return _bin(sql, tp, base_len + (fsp + 1 if fsp else 0), fsp, gen)


def datetime(fsp: int = 0) -> SqlType:
    return _fsp_type("DATETIME", 12, 19, fsp, "datetime")


def timestamp(fsp: int = 0) -> SqlType:
    return _fsp_type("TIMESTAMP", 7, 19, fsp, "timestamp")


def time(fsp: int = 0) -> SqlType:
    return _fsp_type("TIME", 11, 10, fsp, "time")


# ---------------------------------------------------------------- values


def _text_value(rng: random.Random, limit: int) -> str:
    n = rng.randint(0, max(0, min(limit, 24)))
    chars = [rng.choice(_ALNUM) for _ in range(n)]
    if n and rng.random() < 0.2:
        chars[rng.randrange(n)] = rng.choice(_UNICODE)
    if n > 6 and rng.random() < 0.3:
        word = rng.choice(_WORDS)[: n - 1]
        chars[: len(word) + 1] = [*word, "-"]
    return "".join(chars).rstrip(" ")


# Spellings that utf8mb4_general_ci and utf8mb4_unicode_ci (TiDB's and MariaDB's alike) sort as one letter.
_SPELLINGS = {
    "a": "aAàáâäÀÁÂÄ", "e": "eEéèêëÉÈÊË", "i": "iIíîÍÎ", "o": "oOóôöÓÔÖ", "u": "uUúüÚÜ", "n": "nNñÑ",
}  # fmt: skip
_BASE_LETTER = {v: k for k, vs in _SPELLINGS.items() for v in vs}
_SYLLABLES = ("ca", "fe", "re", "su", "me", "ni", "no", "lu", "ta", "ve", "ro", "di")


def name_vocabulary(size: int) -> list[str]:
    """`size` distinct lowercase ASCII names (two or three syllables), the keys of the collation tables."""
    out = [a + b for a in _SYLLABLES for b in _SYLLABLES]
    out += [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES]
    return out[:size]


def respell(name: str, rng: random.Random) -> str:
    """`name` with random case and accents: the same string under a `_ci` collation, other bytes."""
    out = []
    for ch in name:
        base = _BASE_LETTER.get(ch, ch.lower())
        choices = _SPELLINGS.get(base)
        if choices is None:
            out.append(base.upper() if rng.random() < 0.4 else base)
        else:
            out.append(rng.choice(choices[:2]) if rng.random() < 0.6 else rng.choice(choices))
    return "".join(out)


def _micro(rng: random.Random, fsp: int) -> int:
    unit = 10 ** (6 - fsp)
    return rng.randrange(0, 1_000_000, unit) if fsp else 0


def time_text(ns: int, fsp: int) -> str:
    """``[-]HH:MM:SS[.f]`` with fsp fraction digits, as MySQL prints TIME (and the codec decodes it)."""
    sign = "-" if ns < 0 else ""
    secs, frac = divmod(abs(ns), 1_000_000_000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    out = f"{sign}{h:02d}:{m:02d}:{s:02d}"
    return out + "." + f"{frac:09d}"[:fsp] if fsp else out


def json_text(obj: object) -> str:
    """Canonical JSON text as TiDB prints it: keys in byte order, ``", "`` and ``": "`` separators."""
    return json.dumps(obj, sort_keys=True, separators=(", ", ": "), ensure_ascii=False)


def random_value(t: SqlType, rng: random.Random, *, nullable: bool) -> Any:
    """A random value of ``t`` in the codec's value domain (``ZERO_TIME`` stands for a zero date)."""
    if nullable and rng.random() < 0.08:
        return None
    draw = _DRAWS.get(t.gen)
    if draw is None:
        raise ValueError(f"no generator {t.gen!r}")
    return draw(t, rng, nullable)


# One function per generator, looked up once a value: a workload draws millions of values.
Draw = Callable[[SqlType, random.Random, bool], Any]


def _int(t: SqlType, rng: random.Random, nullable: bool) -> int:
    lo, hi = -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    r = rng.random()
    if r < 0.05:
        return lo if r < 0.025 else hi
    return rng.randint(max(lo, -100_000), min(hi, 100_000))


def _uint(t: SqlType, rng: random.Random, nullable: bool) -> int | Decimal:
    hi = (1 << t.bits) - 1
    v = hi if rng.random() < 0.05 else rng.randint(0, min(hi, 1_000_000))
    return Decimal(v) if t.bits == 64 else v


def _decimal(t: SqlType, rng: random.Random, nullable: bool) -> Decimal | str:
    p, s = t.flen, t.decimal
    digits = rng.randint(1, p)
    unscaled = rng.randint(-(10**digits - 1), 10**digits - 1)
    d = Decimal(f"{unscaled}e-{s}")  # exact, exponent -s (quantize would round to 28 digits)
    return d if t.gen == "decimal" else format(d, "f")


def _json(t: SqlType, rng: random.Random, nullable: bool) -> str:
    obj: dict[str, object] = {"id": rng.randint(-1000, 10**6), "tag": rng.choice(_WORDS)}
    if rng.random() < 0.5:
        obj["tags"] = [rng.choice(_WORDS) for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.3:
        obj["ok"] = rng.random() < 0.5
    if rng.random() < 0.2:
        obj["nested"] = {"n": None, "v": rng.randint(0, 9)}
    return json_text(obj)


def _date(t: SqlType, rng: random.Random, nullable: bool) -> Any:
    if nullable and rng.random() < 0.03:
        return ZERO_TIME
    return dt.date(1990, 1, 1) + dt.timedelta(days=rng.randint(0, 15_000))


def _datetime(t: SqlType, rng: random.Random, nullable: bool) -> Any:
    if nullable and rng.random() < 0.03:
        return ZERO_TIME
    base = dt.datetime(1995, 1, 1) + dt.timedelta(seconds=rng.randint(0, 1_000_000_000))
    return base.replace(microsecond=_micro(rng, t.decimal))


def _timestamp(t: SqlType, rng: random.Random, nullable: bool) -> dt.datetime:
    base = dt.datetime(1971, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=rng.randint(0, 2_000_000_000))
    return base.replace(microsecond=_micro(rng, t.decimal))


def _time(t: SqlType, rng: random.Random, nullable: bool) -> str:
    unit = 10 ** (9 - t.decimal)
    ns = rng.randint(-838 * 3600 + 1, 838 * 3600 - 1) * 1_000_000_000 + rng.randrange(0, 10**9, unit)
    if rng.random() < 0.5:  # mostly times of day
        ns = rng.randint(0, 86_399) * 1_000_000_000 + rng.randrange(0, 10**9, unit)
    return time_text(ns, t.decimal)


_DRAWS: dict[str, Draw] = {
    "int": _int,
    "uint": _uint,
    "float32": lambda t, rng, nullable: rng.randint(-80_000, 80_000) / 8,
    "float64": lambda t, rng, nullable: rng.randint(-(10**12), 10**12) / 64,
    "decimal": _decimal,
    "decimal_str": _decimal,
    "text": lambda t, rng, nullable: _text_value(rng, t.flen if t.flen > 0 else 24),
    "bytes": lambda t, rng, nullable: rng.randbytes(rng.randint(0, min(t.flen, 16))),
    "fixed_bytes": lambda t, rng, nullable: rng.randbytes(t.flen),
    "enum": lambda t, rng, nullable: rng.choice(t.elems),
    "set": lambda t, rng, nullable: ",".join(e for e in t.elems if rng.random() < 0.4),
    "bit": lambda t, rng, nullable: rng.getrandbits(t.flen).to_bytes((t.flen + 7) // 8, "big"),
    "json": _json,
    "date": _date,
    "datetime": _datetime,
    "timestamp": _timestamp,
    "time": _time,
    "year": lambda t, rng, nullable: rng.randint(1901, 2155),
}


def default_text(t: SqlType, value: Any) -> str | None:
    """A default value as TiDB keeps it in ColumnInfo JSON (text) and as a SQL literal's content."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") + (
            f".{value.microsecond:06d}"[: t.decimal + 1] if t.decimal else ""
        )
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def sql_literal(t: SqlType, value: Any) -> str:
    text = default_text(t, value)
    if text is None:
        return "NULL"
    if t.gen in ("int", "uint", "decimal", "decimal_str", "year", "float32", "float64"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def convert(value: Any, old: SqlType, new: SqlType) -> Any:
    """A value of ``old`` as a column changed to ``new`` holds it (MODIFY COLUMN, as TiDB and MySQL do).

    Only the changes the simulator makes are supported: integer widening, VARCHAR widening, and DECIMAL
    scale/precision growth (which rescales the value exactly).
    """
    if value is None:
        return None
    if new.gen in ("decimal", "decimal_str"):
        d = Decimal(value).quantize(Decimal(1).scaleb(-new.decimal), context=_WIDE)
        return d if new.gen == "decimal" else format(d, "f")
    if new.gen in ("int", "uint", "text"):
        return value
    raise ValueError(f"unsupported conversion {old.sql} -> {new.sql}")
