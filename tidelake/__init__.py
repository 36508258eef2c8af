"""Shared by the backfill and reconcile packages: config, Spark session, Delta sink, TSO, CLI output."""

__version__ = "0.1.0"
