"""What a simulation run is asked for, and what it reports back.

Frozen and validated at construction, so a bad size fails before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType

from tidbsim.storage_codec import EXTENSIONS, PROTOCOLS, CsvOptions

DDL_KINDS: tuple[str, ...] = (
    "create_table",
    "drop_table",
    "truncate_table",
    "add_column",
    "drop_column",
    "modify_column",
    "rename_column",
    "rename_table",
    "add_partition",
    "drop_partition",
    "truncate_partition",
    "reorganize_partition",
)
OPT_IN_DDL_KINDS: tuple[str, ...] = ("exchange_partition",)
"""Kinds that run only when `ddl_kinds` names them (the default workload, and the data tests built on it,
stay as they were)."""

COLLATIONS: tuple[str, ...] = ("utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_bin")
"""What `SimulationConfig.collation_tables` may name."""


FLAVORS = ("tiflow", "ticdc")
FILE_TYPES = ("csv", "sql")


@dataclass(frozen=True)
class DumplingExport:
    """A Dumpling export of the upstream at the resolved ts of scan `scan` (0: the first), written to
    ``<out>/dumpling/<name>/`` (`tidbsim.dumpling`), Dumpling's options as named."""

    name: str
    scan: int = 0
    file_type: str = "csv"  # --filetype
    header: bool = True  # False: --no-header
    compression: str | None = None  # --compress: gz, zst, snappy
    rows_per_file: int = 40

    def __post_init__(self) -> None:
        if self.file_type not in FILE_TYPES:
            raise ValueError(f"file_type must be one of {FILE_TYPES}, got {self.file_type!r}")
        if self.compression not in (None, "gz", "zst", "snappy"):
            raise ValueError(f"compression must be gz, zst or snappy, got {self.compression!r}")
        if self.scan < 0 or self.rows_per_file < 1 or not self.name or "/" in self.name:
            raise ValueError(f"a bad export: {self}")


DATE_SEPARATORS = {"none": "", "year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d"}


@dataclass(frozen=True)
class StorageSink:
    """A storage-sink changefeed's settings (TiCDC's names) and the faults to simulate."""

    protocol: str = "csv"
    flavor: str = "tiflow"
    date_separator: str = "none"
    enable_partition_separator: bool = True
    file_index_width: int = 20
    table_across_nodes: bool = False
    dispatchers_per_table: int = 1
    csv: CsvOptions = field(default_factory=CsvOptions)
    enable_tidb_extension: bool = True
    terminator: str = "\r\n"
    output_column_id: bool = False
    time_zone: str = "UTC"
    flush_rows: int = 200
    file_size: int = 64 * 1024 * 1024
    flush_interval_s: float = 5.0
    checkpoint_every: int = 1
    restarts: int = 1
    restart_new_version: bool = False
    from_creation: bool = False
    """Start the changefeed before the databases exist (CREATE DATABASE/TABLE schema files), not at the
    initial snapshot ts."""
    start_ts: int | None = None
    """`--start-ts` (e.g. a Dumpling export's TSO); None: the initial snapshot ts (or creation)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"storage protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {FLAVORS}, got {self.flavor!r}")
        if self.date_separator not in DATE_SEPARATORS:
            raise ValueError(f"date-separator must be one of {tuple(DATE_SEPARATORS)}")
        if not 6 <= self.file_index_width <= 20:
            raise ValueError("file-index-width must be within [6, 20]")
        if self.table_across_nodes and self.flavor != "ticdc":
            raise ValueError("table_across_nodes (CDC_<dispatcher>_<n> files) is the new architecture's")
        if self.dispatchers_per_table > 1 and not self.table_across_nodes:
            raise ValueError("several dispatchers per table need table_across_nodes")
        for name in ("flush_rows", "file_size", "checkpoint_every", "dispatchers_per_table"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.restarts < 0 or self.flush_interval_s <= 0:
            raise ValueError("restarts must not be negative and flush_interval_s must be positive")

    @property
    def extension(self) -> str:
        return EXTENSIONS[self.protocol]

    @property
    def column_elems(self) -> bool:
        """The new architecture's schema files list ENUM/SET elements (``ColumnElems``)."""
        return self.flavor == "ticdc"


@dataclass(frozen=True)
class SimulationConfig:
    """One simulated upstream TiDB cluster and the captures taken of it.

    ``rows`` rows are inserted into every initial table early in the first window (the tables are empty
    at the first scan's checkpoint, the initial snapshot ts); ``txns`` random transactions follow, spread
    over ``scans`` capture windows. ``ddls_per_scan`` online DDLs run in each window, their kinds cycling
    through ``ddl_kinds`` in a seed-shuffled order so that every kind comes up after a few windows.
    """

    out: Path
    seed: int = 0
    tables: int = 4
    rows: int = 100
    txns: int = 300
    scans: int = 3
    mysql_url: str | None = None
    mysql_until_scan: int = 0
    """Replay into ``mysql_url`` only the history up to this scan's resolved ts (1-based; 0: all of it): the
    server then holds that scan's expected state, a snapshot at its TSO."""
    ddls_per_scan: int = 2
    ddl_kinds: tuple[str, ...] = DDL_KINDS
    region_split_keys: int = 48
    """A region holding more keys than this splits (at the next capture boundary)."""
    v1_row_fraction: float = 0.05
    """Share of row values written in the old row format v1 (clusters upgraded from old TiDB)."""
    hot_table_share: float = 0.0
    """Share of single-table transactions that go to the first table (a hot table, seed 003)."""
    open_lock_txns: int = 1
    """Long transactions per window whose locks are still open when the capture ends."""
    check_codec: bool = False
    """Cross-check every written row: the codec's decoder must see what the model says (slow)."""
    lagging_retired_regions: bool = False
    """Regions holding only physical ids that a DDL in the capture's window retired (truncate, drop, partition
    DDLs) stop resolving just below the retirement ts, and a stale writer commits on the old id after it:
    the captures a consumer that counts retired ids forever stalls on."""
    collation_tables: tuple[str, ...] = ()
    """One more initial table per collation named here (utf8mb4_general_ci, utf8mb4_unicode_ci, utf8mb4_bin),
    keyed by a clustered VARCHAR primary key under it: its record keys hold the collation's sort keys, and
    its workload changes the key's case and accents in place ('abc' -> 'ABC' is one row) and re-inserts
    deleted keys with another case."""
    ticdc_changelog: bool = False
    """Also spool the changes TiCDC would see to ``<out>/ticdc/changes.pkl`` (for the Kafka messages)."""
    storage_sinks: tuple[StorageSink, ...] = ()
    """TiCDC storage-sink changefeeds to write, each to ``<out>/storage/<protocol>/`` (implies the log)."""
    dumpling_exports: tuple[DumplingExport, ...] = ()
    """Dumpling exports of the upstream at a scan's resolved ts (the snapshot a changefeed starts from)."""
    rows_per_file: int = 1_000_000
    row_group_size: int = 65_536
    seed_rows_per_txn: int = 25
    """Rows per transaction of the first window's seeding inserts (one huge transaction: ``rows``)."""
    events: int = 0
    """About this many events in all (0: ``txns`` decides): each window's transactions are resized from
    the events per transaction the windows before it measured, so a benchmark gets its size in one run."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "ddl_kinds", tuple(self.ddl_kinds))
        object.__setattr__(self, "storage_sinks", tuple(self.storage_sinks))
        object.__setattr__(self, "dumpling_exports", tuple(self.dumpling_exports))
        object.__setattr__(self, "collation_tables", tuple(self.collation_tables))
        odd = sorted(set(self.collation_tables) - set(COLLATIONS))
        if odd or len(set(self.collation_tables)) != len(self.collation_tables):
            raise ValueError(
                f"collation_tables: each of {', '.join(COLLATIONS)} at most once, got {odd or 'repeats'}"
            )
        protocols = [s.protocol for s in self.storage_sinks]
        if len(set(protocols)) != len(protocols):
            raise ValueError(f"one storage sink per protocol, got {protocols}")
        if self.storage_sinks:
            object.__setattr__(self, "ticdc_changelog", True)
        for name in ("scans", "region_split_keys", "rows_per_file", "row_group_size", "seed_rows_per_txn"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.tables < 0 or self.tables + len(self.collation_tables) < 1:
            raise ValueError(f"tables must be at least 1 (or 0 beside collation_tables), got {self.tables}")
        if not 0 <= self.mysql_until_scan <= self.scans:
            raise ValueError(f"mysql_until_scan must be 0..scans, got {self.mysql_until_scan}")
        for name in ("rows", "txns", "ddls_per_scan", "open_lock_txns", "events"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if not 0.0 <= self.hot_table_share < 1.0:
            raise ValueError(f"hot_table_share must be within [0, 1), got {self.hot_table_share}")
        if not 0.0 <= self.v1_row_fraction <= 1.0:
            raise ValueError(f"v1_row_fraction must be within [0, 1], got {self.v1_row_fraction}")
        known = (*DDL_KINDS, *OPT_IN_DDL_KINDS)
        unknown = sorted(set(self.ddl_kinds) - set(known))
        if unknown:
            raise ValueError(f"unknown DDL kinds {unknown}; known: {', '.join(known)}")


@dataclass(frozen=True)
class ScanSummary:
    scan_id: str
    checkpoint_ts: int
    current_ts: int
    resolved_ts: int
    """Global resolved ts a correct consumer reaches after the chain up to and including this scan."""
    events: int
    regions: int
    ddl_jobs: int


@dataclass(frozen=True)
class SimulationResult:
    out: Path
    scans: tuple[ScanSummary, ...]
    events: int
    elapsed_s: float
    stats: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    mysql_applied: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "out": str(self.out),
            "events": self.events,
            "elapsed_s": round(self.elapsed_s, 3),
            "mysql_applied": self.mysql_applied,
            "scans": [asdict(s) for s in self.scans],
            "stats": dict(self.stats),
        }
