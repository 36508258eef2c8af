"""Reconcile's user-fixable errors; each exits 2 through `tidelake.cli.run_app`. Messages never hold secrets."""

from __future__ import annotations

from tidelake.errors import TidelakeError
from tidelake.errors import (
    UpstreamError as UpstreamError,  # defined in the runtime layer: backfill reads it too
)


class TableNotFound(TidelakeError):
    """A configured table is missing upstream or in the Delta warehouse."""


class SchemaMismatch(TidelakeError):
    """The Delta table's columns or types do not map to the upstream table's."""
