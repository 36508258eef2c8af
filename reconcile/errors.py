"""Reconcile's user-fixable errors; each exits 2 through `tidelake.cli.run_app`. Messages never hold secrets."""

from __future__ import annotations

from tidelake.errors import TidelakeError


class UpstreamError(TidelakeError):
    """The upstream cannot be reached or read: bad address, wrong password, TLS, GC'd snapshot."""


class UpstreamUnavailable(UpstreamError):
    """The connection to the upstream was refused, reset, lost or timed out: worth another try (the
    engine reads the table again from new connections, `retries` times, then it is an UpstreamError)."""


class TableNotFound(TidelakeError):
    """A configured table is missing upstream or in the Delta warehouse."""


class SchemaMismatch(TidelakeError):
    """The Delta table's columns or types do not map to the upstream table's."""
