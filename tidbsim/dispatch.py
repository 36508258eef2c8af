"""TiCDC's Kafka partition dispatchers (tiflow ``cdc/sink/dmlsink/mq/dispatcher/partition/*.go``, ticdc
``downstreamadapter/sink/eventrouter/partition/*.go``).

The hash is ``pkg/hash.PositionInertia``: every ``Write(parts...)`` takes the CRC32-IEEE of the parts
concatenated and XORs it into the sum (so the order of writes does not matter); partition = sum % n.

- ``default`` and ``table``: Write(schema, table);
- ``index-value`` (``rowid`` is its old name): Write(schema, table), then Write(name, value string) for
  each handle-key column of the row (the new row; the old one for a delete);
- ``columns``: the same over the listed columns; a NULL is hashed as ``"null"`` by tiflow and skipped by
  ticdc (``flavor``);
- ``ts``: commit_ts % n.

Value strings are ``model.ColumnValueString`` of TiCDC's value (see ``ticdc_open.value_string``).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidbsim.ticdc_open import value_string

RULES = ("default", "table", "index-value", "rowid", "columns", "ts")


class PositionInertia:
    def __init__(self) -> None:
        self.sum = 0

    def write(self, *parts: bytes) -> None:
        self.sum ^= zlib.crc32(b"".join(parts)) & 0xFFFFFFFF


@dataclass(frozen=True)
class Dispatcher:
    rule: str = "default"
    columns: tuple[str, ...] = ()
    flavor: str = "tiflow"

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown partition dispatcher {self.rule!r}; known: {', '.join(RULES)}")
        if self.rule == "columns" and not self.columns:
            raise ValueError("the columns dispatcher needs column names")

    def partition(
        self,
        partitions: int,
        schema: str,
        table: str,
        commit_ts: int,
        values: Mapping[str, Any],
        handle: Sequence[str],
    ) -> int:
        """Partition of a row event; ``values`` are TiCDC's values of the row by column name."""
        if self.rule == "ts":
            return commit_ts % partitions
        h = PositionInertia()
        h.write(schema.encode(), table.encode())
        if self.rule in ("index-value", "rowid"):
            for name in handle:
                h.write(name.encode(), value_string(values.get(name)))
        elif self.rule == "columns":
            for name in self.columns:
                if name not in values:
                    raise ValueError(f"columns dispatcher: {schema}.{table} has no column {name!r}")
                v = values[name]
                if v is None and self.flavor == "ticdc":
                    continue
                h.write(name.encode(), value_string(v))
        return h.sum % partitions


__all__ = ["RULES", "Dispatcher", "PositionInertia"]
