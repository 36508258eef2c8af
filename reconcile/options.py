"""The settings of one run: the `[reconcile]` config with the command-line flags laid over it."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tidelake.config import ReconcileConfig


@dataclass(frozen=True)
class RunOptions:
    tables: tuple[str, ...] = ("*.*",)
    ignore_columns: tuple[str, ...] = ()
    float_tolerance: float = 1e-9
    chunk_size: int = 20_000
    max_diff: int = 0
    parallelism: int = 4
    sample_size: int = 10
    leaf_rows: int = 256
    max_chunks: int = 2000
    bisection_factor: int = 16
    at_ts: int | None = None
    repair: bool = False

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk size must be at least 1, got {self.chunk_size}")
        if self.max_diff < 0:
            raise ValueError(f"max diff must not be negative, got {self.max_diff}")
        if not 1 <= self.parallelism <= 64:
            raise ValueError(f"parallelism must be 1..64, got {self.parallelism}")
        if self.float_tolerance < 0:
            raise ValueError(f"float tolerance must not be negative, got {self.float_tolerance}")
        if not 2 <= self.bisection_factor <= 256:
            raise ValueError(f"bisection factor must be 2..256, got {self.bisection_factor}")
        if self.at_ts is not None and self.at_ts < 0:
            raise ValueError(f"--at-ts must be a TSO (non-negative), got {self.at_ts}")

    @classmethod
    def from_config(cls, config: ReconcileConfig, **flags: Any) -> RunOptions:
        """Config values, then every flag that was given (None means not given)."""
        base = cls(
            tables=config.tables,
            ignore_columns=config.ignore_columns,
            float_tolerance=config.float_tolerance,
            chunk_size=config.chunk_size,
            max_diff=config.max_diff,
            parallelism=config.parallelism,
            sample_size=config.sample_size,
            leaf_rows=config.leaf_rows,
            max_chunks=config.max_chunks,
            bisection_factor=config.bisection_factor,
        )
        given = {k: (tuple(v) if isinstance(v, list) else v) for k, v in flags.items() if v is not None}
        return replace(base, **given)


def ignored_columns(entries: Sequence[str], db: str, table: str) -> tuple[str, ...]:
    """Columns to skip for one table: `col` applies everywhere, `db.table.col` (wildcards) to matches."""
    out = []
    for entry in entries:
        parts = entry.split(".")
        if len(parts) == 1:
            out.append(entry)
        elif len(parts) == 3 and fnmatch.fnmatchcase(db, parts[0]) and fnmatch.fnmatchcase(table, parts[1]):
            out.append(parts[2])
    return tuple(out)
