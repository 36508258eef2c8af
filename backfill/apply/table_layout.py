"""Delta table layout from `[target]` (`TableLayout`): table properties and clustering by key.

A new table is created with them; an existing table whose properties differ gets the changed ones in one
commit of its own (ALTER TABLE SET TBLPROPERTIES) tagged with our app id, so a layout change never rides
on a data commit. Clustering is chosen when a table is created (Delta liquid clustering by the primary key
columns where their types can be clustered); existing tables keep theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from backfill.codec import TableSchema
from tidelake import delta
from tidelake.config import TableLayout
from tidelake.sqlident import quote_ident as quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

KEY_COLUMNS_PROPERTY = "tidelake.key_columns"  # the merge key, a JSON list (for `backfill maintain`)
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
TARGET_FILE_SIZE_PROPERTY = "tidelake.target_file_size"  # bytes; OPTIMIZE's max file size in maintain
MAX_CLUSTERING_COLUMNS = 4  # Delta's limit
# Types Delta collects min/max statistics for, which clustering needs (not binary, boolean, complex).
_CLUSTERABLE = (
    "byte",
    "short",
    "integer",
    "long",
    "float",
    "double",
    "decimal",
    "string",
    "date",
    "timestamp",
)


def table_properties(layout: TableLayout) -> dict[str, str]:
    """The Delta table properties a layout asks for."""
    props = {
        "delta.enableDeletionVectors": _flag(layout.deletion_vectors),
        "delta.autoOptimize.optimizeWrite": _flag(layout.optimize_write),
        CHANGE_DATA_FEED: _flag(layout.change_data_feed),
    }
    if layout.target_file_size is not None:  # OSS Delta has no such table property: maintain reads ours
        props[TARGET_FILE_SIZE_PROPERTY] = str(file_size_bytes(layout.target_file_size))
    return {**props, **layout.properties}


def clustering_columns(schema: TableSchema, columns: StructType, layout: TableLayout) -> list[str]:
    """The primary key columns to cluster by, or none (no key, clustering off, a type Delta cannot
    cluster, more key columns than Delta allows)."""
    keys = list(schema.pk_columns) if schema.pk_kind != "rowid" else []
    if not layout.cluster_by_key or not keys or len(keys) > MAX_CLUSTERING_COLUMNS:
        return []
    types = {f.name: f.dataType.typeName() for f in columns.fields}
    if not all(types.get(k, "").startswith(_CLUSTERABLE) for k in keys):
        return []
    return keys


def apply_properties(
    spark: SparkSession, path: str, layout: TableLayout, *, app_id: str, metadata: Mapping[str, Any]
) -> dict[str, str]:
    """Set the properties that differ from the table's in one tagged commit; returns what changed."""
    current = delta.table_configuration(spark, path)
    wanted = table_properties(layout)
    changed = {k: v for k, v in wanted.items() if current.get(k, _default(k)) != v}
    if not changed:
        return {}
    settings = ", ".join(f"'{k}' = '{_literal(v)}'" for k, v in sorted(changed.items()))
    tagged = {**metadata, "app_id": app_id, "step": "properties", "properties": changed}
    spark.conf.set(delta.USER_METADATA, delta.metadata_json(tagged))
    try:
        spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({settings})")
    finally:
        spark.conf.unset(delta.USER_METADATA)
    return changed


class MergeStrategy(Enum):
    """How a window's changes go into a table that has rows, by its size (`TableLayout`'s thresholds)."""

    MERGE = "merge"  # deletion vectors where the table has them enabled
    MERGE_REWRITING_FILES = "merge rewriting files"  # under `copy_on_write_below`: touched files rewritten
    REWRITE_TABLE = "rewrite table"  # under `rewrite_table_below`, with a key: written again whole


def merge_strategy(spark: SparkSession, path: str, layout: TableLayout | None, keyed: bool) -> MergeStrategy:
    """The strategy for the table at `path`: the whole table is written again only where it has a key and
    its change data feed is off (its readers would see every row change)."""
    if layout is None:
        return MergeStrategy.MERGE
    size = delta.table_bytes(spark, path)
    if keyed and size < _size_or_zero(layout.rewrite_table_below) and not _feeds_changes(spark, path):
        return MergeStrategy.REWRITE_TABLE
    if size < _size_or_zero(layout.copy_on_write_below):
        return MergeStrategy.MERGE_REWRITING_FILES
    return MergeStrategy.MERGE


def _feeds_changes(spark: SparkSession, path: str) -> bool:
    return delta.table_configuration(spark, path).get(CHANGE_DATA_FEED, "false").lower() == "true"


def _size_or_zero(size: str | None) -> int:
    """A threshold like "16mb" in bytes; 0 (no table is smaller) when unset or "0"."""
    return file_size_bytes(size) if size else 0


def file_size_bytes(size: str) -> int:
    """`128mb` -> bytes (b, kb, mb, gb; binary multiples)."""
    text = size.replace(" ", "").lower()
    for unit, factor in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10), ("b", 1)):
        if text.endswith(unit):
            return int(text[: -len(unit)]) * factor
    return int(text)


def _flag(value: bool | None) -> str:
    return "true" if value else "false"


def _default(key: str) -> str:
    """What an absent property means: off for the flags we manage."""
    return "false" if key.startswith(("delta.enable", "delta.autoOptimize")) else ""


def _literal(value: str) -> str:
    if "'" in value or "\\" in value:
        raise ValueError(f"table property value {value!r} may not hold quotes or backslashes")
    return value
