"""The captures under `source.path`: which are complete, and what their manifests say.

A capture counts only once `_SUCCESS` exists (it is written last). Manifests are checked against the
input contract in DESIGN.md; a bad one is an error naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelake import fs
from tidelake.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MANIFEST_FORMAT = "tidelake.kv-scan"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class Region:
    region_id: int
    start_key: bytes
    end_key: bytes  # b"" = unbounded


@dataclass(frozen=True)
class ScanManifest:
    scan_id: str
    uri: str
    checkpoint_ts: int
    current_ts: int
    regions: tuple[Region, ...]

    def file(self, *parts: str) -> str:
        return fs.join(self.uri, *parts)


def parse_manifest(text: str, scan_id: str, uri: str) -> ScanManifest:
    where = fs.join(uri, "manifest.json")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a JSON object")
    if doc.get("format") != MANIFEST_FORMAT or doc.get("version") != MANIFEST_VERSION:
        raise InputError(
            f"{where}: format {doc.get('format')!r} version {doc.get('version')!r} is not "
            f"{MANIFEST_FORMAT!r} version {MANIFEST_VERSION}"
        )
    checkpoint_ts = _ts(doc, "checkpoint_ts", where)
    current_ts = _ts(doc, "current_ts", where)
    if current_ts < checkpoint_ts:
        raise InputError(f"{where}: current_ts {current_ts} is before checkpoint_ts {checkpoint_ts}")
    regions = doc.get("regions")
    if not isinstance(regions, list):
        raise InputError(f"{where}: 'regions' must be a list")
    return ScanManifest(
        scan_id, uri, checkpoint_ts, current_ts, tuple(_region(r, i, where) for i, r in enumerate(regions))
    )


def _ts(doc: dict[str, Any], key: str, where: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}: {key!r} must be a non-negative integer TSO, got {value!r}")
    return value


def _region(entry: Any, index: int, where: str) -> Region:
    try:
        return Region(
            int(entry["region_id"]), bytes.fromhex(entry["start_key"]), bytes.fromhex(entry["end_key"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: regions[{index}] is not a region with hex keys ({exc})") from None


def list_scans(spark: SparkSession, source_path: str) -> list[ScanManifest]:
    """Complete captures under `source_path`, ordered by checkpoint ts then current ts then id."""
    scans = []
    for entry in fs.list_dir(spark, source_path):
        if not entry.is_dir or entry.name.startswith(("_", ".")):
            continue
        if not fs.exists(spark, fs.join(entry.path, "_SUCCESS")):
            continue  # still being written, or abandoned: never read a partial capture
        manifest_uri = fs.join(entry.path, "manifest.json")
        if not fs.exists(spark, manifest_uri):
            raise InputError(f"{manifest_uri}: capture has _SUCCESS but no manifest.json")
        scans.append(parse_manifest(fs.read_text(spark, manifest_uri), entry.name, entry.path))
    return sorted(scans, key=lambda s: (s.checkpoint_ts, s.current_ts, s.scan_id))
