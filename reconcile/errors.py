"""Reconcile's user-fixable errors; each exits 2 through `tidelake.cli.run_app`. Messages never hold secrets."""

from __future__ import annotations

from tidelake.errors import TidelakeError
from tidelake.errors import (  # defined in the runtime layer: backfill reads them too
    UpstreamError as UpstreamError,
)
from tidelake.errors import (
    UpstreamUnavailable as UpstreamUnavailable,
)


class TableNotFound(TidelakeError):
    """A configured table is missing upstream or in the Delta warehouse."""


class SchemaMismatch(TidelakeError):
    """The Delta table's columns or types do not map to the upstream table's."""
