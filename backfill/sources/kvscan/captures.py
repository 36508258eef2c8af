"""The captures under `source.path`: which are complete, and what their manifests say.

A capture counts only once `_SUCCESS` exists (it is written last). Manifests are checked against the
input contract (`format.parse_manifest`); a bad one is an error naming the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backfill.sources.kvscan.format import MANIFEST_FILE, SUCCESS_FILE, ScanManifest, parse_manifest
from tidelake import fs
from tidelake.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def list_scans(spark: SparkSession, source_path: str) -> list[ScanManifest]:
    """Complete captures under `source_path`, ordered by checkpoint ts then current ts then id."""
    scans = []
    for entry in fs.list_dir(spark, source_path):
        if not entry.is_dir or entry.name.startswith(("_", ".")):
            continue
        if not fs.exists(spark, fs.join(entry.path, SUCCESS_FILE)):
            continue  # still being written, or abandoned: never read a partial capture
        manifest_uri = fs.join(entry.path, MANIFEST_FILE)
        if not fs.exists(spark, manifest_uri):
            raise InputError(f"{manifest_uri}: capture has {SUCCESS_FILE} but no {MANIFEST_FILE}")
        scans.append(parse_manifest(fs.read_text(spark, manifest_uri), entry.name, entry.path))
    return sorted(scans, key=lambda s: (s.checkpoint_ts, s.current_ts, s.scan_id))
