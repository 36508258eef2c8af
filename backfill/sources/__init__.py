"""Inputs of backfill: each package knows one input's layout and completeness rules (DESIGN.md, Sources)."""
