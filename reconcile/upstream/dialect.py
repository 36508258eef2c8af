"""The upstream seam: a SQL dialect is one small object, registered by name.

A dialect writes every statement reconcile sends to an upstream server: identifier quoting, the
canonical row encoding as SQL (`reconcile.encoding` has the spec), the chunk checksum, the key-range
predicate, the statements that open a consistent snapshot (or read at a ts), and the catalog queries.
`upstream.sql` runs what a dialect writes over a DB-API connection; the chunk and bisection algorithm
(`reconcile.chunks`, `reconcile.engine`) sees key ranges and checksums only, never SQL text.

Three entries: `mysql` (the MySQL family; `reconcile.upstream.mysql`), `mariadb` and `tidb`, each one
file that subclasses it and registers it (`mysql.register`). A new upstream is one more such file, named
in `_BUILT_IN`. `detect` picks a dialect from the server's `SELECT VERSION()`: the most specific one that
claims it. The SQL text they share (the key-range predicate) is `reconcile.upstream.sqltext`.
"""

from __future__ import annotations

import importlib

from reconcile.upstream.mysql import REGISTRY, MySQL

_BUILT_IN = ("reconcile.upstream.mysql", "reconcile.upstream.mariadb", "reconcile.upstream.tidb")


def _load() -> None:
    for module in _BUILT_IN:
        importlib.import_module(module)


def names() -> tuple[str, ...]:
    _load()
    return tuple(REGISTRY)


def dialect_named(name: str, version: str = "") -> MySQL:
    """The dialect registered as `name`, for a server reporting `version`."""
    _load()
    if name not in REGISTRY:
        raise ValueError(f"no upstream dialect {name!r} (known: {', '.join(REGISTRY)})")
    dialect: MySQL = REGISTRY[name](version)
    return dialect


def detect(version: str) -> MySQL:
    """The dialect for a server that reports `version`: the last registered one that claims it."""
    _load()
    for cls in reversed(list(REGISTRY.values())):
        if cls.claims(version):
            found: MySQL = cls(version)
            return found
    raise ValueError(f"no upstream dialect understands server version {version!r}")
