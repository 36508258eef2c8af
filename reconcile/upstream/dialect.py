"""The upstream seam: a SQL dialect is one small object, registered by name.

A dialect writes every statement reconcile sends to an upstream server: identifier quoting, the
canonical row encoding as SQL (`reconcile.encoding` has the spec), the chunk checksum, the key-range
predicate, the statements that open a consistent snapshot (or read at a ts), and the catalog queries.
`upstream.sql` runs what a dialect writes over a DB-API connection; the chunk and bisection algorithm
(`reconcile.chunks`, `reconcile.engine`) sees key ranges and checksums only, never SQL text.

Three entries: `mysql` (the MySQL family; `reconcile.upstream.mysql`), `mariadb` and `tidb`, each one
file that subclasses it. A new upstream is one more file with a `@register`ed class. `detect` picks a
dialect from the server's `SELECT VERSION()`: the most specific one that claims it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from reconcile.chunks import Key, KeyRange

if TYPE_CHECKING:
    from reconcile.upstream.mysql import MySQL

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]  # run one statement, return its rows
D = TypeVar("D", bound="type[MySQL]")

_REGISTRY: dict[str, type[MySQL]] = {}
_BUILT_IN = ("reconcile.upstream.mysql", "reconcile.upstream.mariadb", "reconcile.upstream.tidb")


def register(cls: D) -> D:
    """Class decorator: make a dialect known by its `name` (later registrations are more specific)."""
    _REGISTRY[cls.name] = cls
    return cls


def _load() -> None:
    for module in _BUILT_IN:
        importlib.import_module(module)


def names() -> tuple[str, ...]:
    _load()
    return tuple(_REGISTRY)


def dialect_named(name: str, version: str = "") -> MySQL:
    """The dialect registered as `name`, for a server reporting `version`."""
    _load()
    if name not in _REGISTRY:
        raise ValueError(f"no upstream dialect {name!r} (known: {', '.join(_REGISTRY)})")
    dialect: MySQL = _REGISTRY[name](version)
    return dialect


def detect(version: str) -> MySQL:
    """The dialect for a server that reports `version`: the last registered one that claims it."""
    _load()
    for cls in reversed(list(_REGISTRY.values())):
        if cls.claims(version):
            found: MySQL = cls(version)
            return found
    raise ValueError(f"no upstream dialect understands server version {version!r}")


def lexicographic_predicate(
    key_range: KeyRange, key_exprs: Sequence[str], placeholder: str
) -> tuple[str, list[Any]]:
    """SQL for `key in range` with parameters, over the given (already quoted) key expressions.

    Composite keys compare lexicographically, written out as `k1 > v1 OR (k1 = v1 AND k2 >= v2)`
    after a plain bound on the leading column, which every MySQL-compatible optimizer turns into an
    index range.
    """
    parts: list[str] = []
    params: list[Any] = []
    if key_range.lower is not None:
        sql, values = _compare(key_exprs, key_range.lower, ">", ">=", placeholder)
        parts.append(sql)
        params += values
    if key_range.upper is not None:
        sql, values = _compare(key_exprs, key_range.upper, "<", "<", placeholder)
        parts.append(sql)
        params += values
    return (" AND ".join(parts) if parts else "TRUE"), params


def _compare(
    exprs: Sequence[str], values: Key, strict: str, last: str, placeholder: str
) -> tuple[str, list[Any]]:
    if len(exprs) == 1:
        return f"{exprs[0]} {last} {placeholder}", [values[0]]
    disjuncts: list[str] = []
    params: list[Any] = []
    for i in range(len(exprs)):
        equal = [f"{exprs[j]} = {placeholder}" for j in range(i)]
        op = last if i == len(exprs) - 1 else strict
        disjuncts.append("(" + " AND ".join([*equal, f"{exprs[i]} {op} {placeholder}"]) + ")")
        params += [*values[:i], values[i]]
    lead_op = ">=" if strict == ">" else "<="
    return (
        f"({exprs[0]} {lead_op} {placeholder} AND ({' OR '.join(disjuncts)}))",
        [values[0], *params],
    )
