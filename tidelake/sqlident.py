"""SQL identifiers, quoted one way everywhere tidelake writes SQL text. Pure.

MySQL, MariaDB, TiDB and Spark SQL all take an identifier in backticks with a backtick inside doubled,
so one function serves the upstream's SQL, Spark SQL and Delta DDL; values always travel as
parameters or typed literals, never through here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

MAX_UPSTREAM_LENGTH = 64  # MySQL/TiDB/MariaDB identifier limit, in characters


def quote_ident(name: str) -> str:
    """`name` as one quoted identifier; refuses what no engine accepts (empty, NUL)."""
    if not name or "\x00" in name:
        raise ValueError(f"{name!r} is not a valid SQL identifier")
    return "`" + name.replace("`", "``") + "`"


def quote_upstream_ident(name: str) -> str:
    """An identifier for the upstream server, checked against its limits first (configs name them)."""
    if len(name) > MAX_UPSTREAM_LENGTH:
        raise ValueError(f"{name!r} is not a valid MySQL identifier (over {MAX_UPSTREAM_LENGTH} characters)")
    return quote_ident(name)


def quote_qualified(*parts: str) -> str:
    """`db`.`table` (or any dotted path) with each part quoted."""
    return ".".join(quote_ident(p) for p in parts)


def column(name: str) -> Column:
    """The Spark column of exactly this name (dots, spaces and backticks taken literally)."""
    from pyspark.sql import functions as F

    return F.col(quote_ident(name))
