"""The settings of one run: the `[reconcile]` config with the command-line flags laid over it."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from tidelake.config import ReconcileConfig


@dataclass(frozen=True)
class RunOptions(ReconcileConfig):
    """The `[reconcile]` settings (validated by ReconcileConfig) plus what only a command line says."""

    at_ts: int | None = None
    repair: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.at_ts is not None and self.at_ts < 0:
            raise ValueError(f"--at-ts must be a TSO (non-negative), got {self.at_ts}")

    @classmethod
    def from_config(cls, config: ReconcileConfig, **flags: Any) -> RunOptions:
        """Config values, then every flag that was given (None means not given)."""
        base = cls(**{f.name: getattr(config, f.name) for f in fields(ReconcileConfig)})
        given: dict[str, Any] = {
            k: (tuple(v) if isinstance(v, list) else v) for k, v in flags.items() if v is not None
        }
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
