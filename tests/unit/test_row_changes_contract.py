"""`RowChanges` holds what every source's changes have; what only some can do (rows already computed, rows
on the driver, decode tasks for the report) is a capability their class declares (`changes.contract`)."""

from __future__ import annotations

import pytest

from backfill.changes.contract import ComputedRows, DecodeParallelism, DriverRows, RowChanges
from backfill.changes.typed import TypedRowChanges
from backfill.sources.kvscan.source import DecodedKvChanges

pytestmark = pytest.mark.unit


def test_the_contract_is_what_every_source_has() -> None:
    public = {name for name in vars(RowChanges) if not name.startswith("_")}
    assert public == {"counts", "rows", "zero_dates", "release"}


@pytest.mark.parametrize(
    ("changes", "capabilities"),
    [
        (DecodedKvChanges, {ComputedRows, DriverRows, DecodeParallelism}),
        (TypedRowChanges, {ComputedRows, DecodeParallelism}),
    ],
)
def test_each_source_declares_its_capabilities(changes: type, capabilities: set[type]) -> None:
    declared = {c for c in (ComputedRows, DriverRows, DecodeParallelism) if issubclass(changes, c)}
    assert declared == capabilities
