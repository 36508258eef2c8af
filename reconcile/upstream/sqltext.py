"""SQL text every upstream dialect shares: the type of the statement runner and the key-range predicate.

Pure: builds strings and parameter lists; the dialects (`reconcile.upstream.mysql` and its refinements)
use it, and it knows none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reconcile.chunks import Key, KeyRange

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]  # run one statement, return its rows


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
