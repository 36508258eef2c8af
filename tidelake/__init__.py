"""Shared by the backfill and reconcile packages: config, Spark session, Delta sink, TSO, CLI output."""

# The release: pyproject.toml reads it, `backfill --version` prints it, CHANGELOG.md names it first.
__version__ = "0.2.0"
