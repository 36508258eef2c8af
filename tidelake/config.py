"""The tidelake config: one TOML file, parsed at the edge into frozen, validated dataclasses.

`tidelake/conf/demo.toml` (package data; `conf/demo.toml` in a checkout links to it) is the embedded
default. Relative paths in a config are taken from the current directory, like any command-line path: the
demo's are under `.tidelake/` there, never inside the installed package.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeVar

from tidelake.configload import Secret, load_dataclass
from tidelake.errors import ConfigError

DEFAULT_CONFIG = Path(__file__).with_name("conf") / "demo.toml"

_T = TypeVar("_T")
_JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TABLE_PATTERN = re.compile(r"^[A-Za-z0-9_$*?\[\]-]+\.[A-Za-z0-9_$*?\[\]-]+$")
_CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_DATABASE_PREFIX = re.compile(r"^[A-Za-z0-9_]{0,32}$")
_METASTORE_URI = re.compile(r"^thrift://[^\s,/]+:\d+(,thrift://[^\s,/]+:\d+)*$")


@dataclass(frozen=True)
class JobConfig:
    """Names the job; the name is part of the Delta transaction app id, `tidelake:<name>`."""

    name: str = "tidelake"

    def __post_init__(self) -> None:
        if not _JOB_NAME.match(self.name):
            raise ValueError(f"name {self.name!r} must match {_JOB_NAME.pattern}")

    @property
    def app_id(self) -> str:
        from tidelake.conventions import app_id

        return app_id(self.name)


_SOURCE_KEYS = (
    "path",
    "kind",
    "verify_checksums",
    "initial",
)  # [source]'s own keys; the rest are the kinds' tables


class SourceKind(Protocol):
    """What the config loader needs of a source kind; the product registers them
    (`backfill/sources/registry.py`, docs/architecture.md "Adding a source"). The runtime knows none."""

    @property
    def name(self) -> str: ...  # the `source.kind` value

    @property
    def table(self) -> str | None: ...  # the `[source.<table>]` of its settings; None: it has none

    @property
    def settings(self) -> type[Any] | None: ...  # the frozen dataclass that table is parsed into

    @property
    def needs_path(self) -> bool: ...  # reads a folder: `source.path` must be set

    @property
    def starts_from_snapshot(
        self,
    ) -> bool: ...  # a TiCDC source: `[source.initial]` may give its first version


@dataclass(frozen=True)
class InitialLoadConfig:
    """`[source.initial]`: the consistent snapshot a TiCDC job's tables start from (docs/architecture.md
    "Starting from a snapshot"). `dumpling` is the folder of a Dumpling export (`--filetype csv`), any
    Hadoop file system URI; the CSV keys are Dumpling's options as the export was taken. Or, instead of
    `dumpling`, `upstream_tso`: the tables are read from `[upstream]` over JDBC at that TSO (TiDB:
    `tidb_snapshot`; MySQL/MariaDB: the TSO their present state stands for, read in one consistent
    snapshot per table)."""

    dumpling: str = ""
    csv_separator: str = ","
    csv_delimiter: str = '"'
    csv_null_value: str = "\\N"
    header: bool = True  # False: the export was taken with --no-header
    csv_backslash_escape: bool = True
    # Instead of `dumpling`: read the tables from [upstream] over JDBC at this TSO (TiDB: tidb_snapshot;
    # MySQL/MariaDB: the TSO their present state stands for, docs/architecture.md "Starting from a snapshot").
    upstream_tso: int | None = None
    # TiDB: each table read in up to this many ranges of its integer handle, in parallel (MySQL/MariaDB
    # read each table in one, inside one consistent-snapshot transaction).
    upstream_partitions: int = 8
    # Rows the JDBC driver fetches from the server at a time (memory per task against round trips).
    upstream_fetch_size: int = 10_000

    def __post_init__(self) -> None:
        if self.upstream_tso is not None:
            self._check_upstream()
            return
        if not self.dumpling:
            raise ValueError("give dumpling (an export's folder) or upstream_tso (read [upstream] at a TSO)")
        if not self.csv_separator or any(c in "\r\n" for c in self.csv_separator):
            raise ValueError(
                f"csv_separator {self.csv_separator!r} must be one or more characters, no line breaks"
            )
        if len(self.csv_delimiter) > 1 or self.csv_delimiter in ("\r", "\n", "\\"):
            raise ValueError(f"csv_delimiter {self.csv_delimiter!r} must be one character, or empty for none")

    @property
    def described(self) -> str:
        """The snapshot in a message: the export's folder, or the upstream at the TSO."""
        return self.dumpling or f"[upstream] at upstream_tso {self.upstream_tso}"

    def _check_upstream(self) -> None:
        if self.dumpling:
            raise ValueError(
                "dumpling and upstream_tso exclude each other: the tables start from one snapshot"
            )
        if self.upstream_tso is not None and self.upstream_tso < 1:
            raise ValueError(f"upstream_tso must be a TSO (a positive integer), got {self.upstream_tso}")
        if not 1 <= self.upstream_partitions <= 1024:
            raise ValueError(f"upstream_partitions must be 1..1024, got {self.upstream_partitions}")
        if self.upstream_fetch_size < 1:
            raise ValueError(f"upstream_fetch_size must be at least 1, got {self.upstream_fetch_size}")


@dataclass(frozen=True)
class SourceConfig:
    """Where the change data is (`[source]`). `kind` names a source kind the backfill registers (kv-scan
    captures, a TiCDC storage sink's prefix, a TiCDC Kafka topic); `path` is its folder, any Hadoop file
    system URI, for the kinds that read one. A kind's own settings (`[source.storage]`, `[source.kafka]`)
    are kept as written in `tables` until the loader is given the registered kinds
    (`load_config(..., source_kinds=...)`); it then checks every such table and parses the chosen kind's
    into `settings`, an instance of the class that kind registered (None: it has no settings)."""

    path: str = ""
    kind: str = "kv-scan"
    # Row values that carry TiDB's row checksum (v7.1+) must match it; a mismatch is a data error.
    verify_checksums: bool = True
    tables: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    settings: Any = None
    initial: InitialLoadConfig | None = None  # `[source.initial]`: the snapshot the tables start from


def parse_source_settings(
    source: SourceConfig, kinds: Mapping[str, SourceKind], environ: Mapping[str, str] | None = None
) -> SourceConfig:
    """`source` with its kind checked against the registered `kinds`, every `[source.<table>]` parsed by
    the class its kind registered, and the chosen kind's settings in `settings` (ConfigError naming the
    key otherwise)."""
    if source.kind not in kinds:
        raise ConfigError(
            f"source.kind: {source.kind!r} is not a valid choice; valid choices: {', '.join(sorted(kinds))}"
        )
    by_table = {k.table: k for k in kinds.values() if k.table is not None and k.settings is not None}
    unknown = sorted(set(source.tables) - set(by_table))
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise ConfigError(
            f"source: unknown key{plural} {', '.join(map(repr, unknown))}; "
            f"valid keys: {', '.join(sorted([*_SOURCE_KEYS, *by_table]))}"
        )
    parsed = {
        table: load_dataclass(by_table[table].settings, value, f"source.{table}", environ)  # type: ignore[arg-type]
        for table, value in source.tables.items()
    }
    kind = kinds[source.kind]
    if source.initial is not None and not kind.starts_from_snapshot:
        starting = sorted(k.name for k in kinds.values() if k.starts_from_snapshot)
        raise ConfigError(
            f"source.initial: kind = {source.kind!r} does not start from a snapshot; the kinds that do: "
            f"{', '.join(starting)}"
        )
    if kind.needs_path and not source.path:
        raise ConfigError(f"source: kind = {source.kind!r} needs a path")
    settings = None
    if kind.table is not None and kind.settings is not None:
        settings = parsed.get(kind.table)
        if settings is None:
            try:
                settings = load_dataclass(kind.settings, {}, f"source.{kind.table}", environ)
            except ConfigError:
                raise ConfigError(
                    f"source: kind = {source.kind!r} needs a [source.{kind.table}] table"
                ) from None
    return replace(source, settings=settings)


_FILE_SIZE = re.compile(r"^\d+\s*(b|kb|mb|gb)?$", re.IGNORECASE)


@dataclass(frozen=True)
class TableLayout:
    """How our Delta tables are laid out (`[target.layout]`, per table `[target.table_layouts."db.t"]`).

    A key left out (None) takes the job's value, then the default: deletion vectors on (a MERGE marks
    rows deleted instead of rewriting their files), liquid clustering by the primary key (tables without
    one are not clustered), optimized writes on, Delta's target file size, change data feed off.
    `copy_on_write_below` (default 16mb): a MERGE into a table smaller than this rewrites the files it
    touches instead of writing deletion vectors; on small tables that is about half the Spark jobs and
    time of a MERGE, and the table's properties stay as they are ("0": deletion vectors at any size).
    `rewrite_table_below` (default 1mb): a window's changes into a keyed table smaller than this are applied
    by writing the whole table again, merged with them, in one overwrite commit instead of a MERGE: fewer
    Spark jobs and much less planning on the driver, a fifth less time a table over 200 small tables. Not
    on a table with change data feed on, whose readers would see every row change ("0": always MERGE).
    `properties` adds any other Delta table property (`delta.*`), verbatim.
    """

    deletion_vectors: bool | None = None
    cluster_by_key: bool | None = None
    optimize_write: bool | None = None
    target_file_size: str | None = None  # e.g. "128mb"
    change_data_feed: bool | None = None
    copy_on_write_below: str | None = None  # e.g. "16mb"
    rewrite_table_below: str | None = None  # e.g. "1mb"
    properties: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.target_file_size is not None and not _FILE_SIZE.match(self.target_file_size):
            raise ValueError(f"target_file_size {self.target_file_size!r} is not a size like 128mb")
        for key in ("copy_on_write_below", "rewrite_table_below"):
            size = getattr(self, key)
            if size is not None and not _FILE_SIZE.match(size):
                raise ValueError(f"{key} {size!r} is not a size like 16mb")
        for key in self.properties:
            if not re.match(r"^delta\.[A-Za-z0-9_.]+$", key):
                raise ValueError(f"properties: {key!r} is not a Delta table property (delta.<name>)")

    def over(self, base: TableLayout) -> TableLayout:
        """This layout with every key it leaves out taken from `base`."""
        return TableLayout(
            deletion_vectors=_given(self.deletion_vectors, base.deletion_vectors),
            cluster_by_key=_given(self.cluster_by_key, base.cluster_by_key),
            optimize_write=_given(self.optimize_write, base.optimize_write),
            target_file_size=_given(self.target_file_size, base.target_file_size),
            change_data_feed=_given(self.change_data_feed, base.change_data_feed),
            copy_on_write_below=_given(self.copy_on_write_below, base.copy_on_write_below),
            rewrite_table_below=_given(self.rewrite_table_below, base.rewrite_table_below),
            properties=MappingProxyType({**base.properties, **self.properties}),
        )


def _given(value: _T | None, default: _T | None) -> _T | None:
    return default if value is None else value


DEFAULT_LAYOUT = TableLayout(
    deletion_vectors=True,
    cluster_by_key=True,
    optimize_write=True,
    change_data_feed=False,
    copy_on_write_below="16mb",
    rewrite_table_below="1mb",
)


@dataclass(frozen=True)
class TargetConfig:
    """The Delta warehouse: one table per upstream table at `<warehouse>/<db>/<table>`."""

    warehouse: str
    tables: tuple[str, ...] = ("*.*",)
    # Catalog registration (docs/operations.md "Tables by name"): every table also as `<prefix><db>.<table>` in
    # `catalog`, an EXTERNAL Delta table over its folder; the metastore is embedded (Derby in
    # `metastore_dir`, default `<warehouse's parent>/metastore`) unless `metastore_uri` names one.
    register: bool = True
    catalog: str = "spark_catalog"
    database_prefix: str = ""
    metastore_uri: str | None = None
    metastore_dir: str | None = None
    layout: TableLayout = field(default_factory=TableLayout)
    table_layouts: Mapping[str, TableLayout] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for pattern in (*self.tables, *self.table_layouts):
            if not _TABLE_PATTERN.match(pattern):
                raise ValueError(f"tables: {pattern!r} is not a `db.table` pattern (wildcards * ? allowed)")
        self._check_catalog_settings()

    def _check_catalog_settings(self) -> None:
        if not _CATALOG_NAME.match(self.catalog):
            raise ValueError(f"catalog {self.catalog!r} must match {_CATALOG_NAME.pattern}")
        if not _DATABASE_PREFIX.match(self.database_prefix):
            raise ValueError(
                f"database_prefix {self.database_prefix!r} must match {_DATABASE_PREFIX.pattern}"
            )
        if self.metastore_uri is not None and not _METASTORE_URI.match(self.metastore_uri):
            raise ValueError(
                f"metastore_uri {self.metastore_uri!r} must be thrift://host:port[,thrift://...]"
            )

    def layout_of(self, database: str, table: str) -> TableLayout:
        """The table's layout: the first `table_layouts` pattern that matches it, over `layout`, over
        the defaults."""
        import fnmatch

        job = self.layout.over(DEFAULT_LAYOUT)
        for pattern, layout in self.table_layouts.items():
            if fnmatch.fnmatchcase(f"{database}.{table}", pattern):
                return layout.over(job)
        return job


@dataclass(frozen=True)
class SparkConfig:
    """Used only when tidelake creates the session itself; under spark-submit the given session wins."""

    master: str = "local[*]"
    shuffle_partitions: int = 8
    driver_memory: str = "4g"
    ui: bool = False
    # The driver JVM's JIT compilers (tidelake/spark.py, JIT_OPTIONS): "tiered" is the JVM's default (the
    # quick compiler, then the optimizing one for hot code); "quick" keeps to the quick one, which a run of
    # a minute or less on small data finishes sooner with.
    jit: Literal["tiered", "quick"] = "tiered"
    conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.shuffle_partitions < 1:
            raise ValueError(f"shuffle_partitions must be at least 1, got {self.shuffle_partitions}")
        if not re.match(r"^\d+[kmgt]?$", self.driver_memory, re.IGNORECASE):
            raise ValueError(f"driver_memory {self.driver_memory!r} is not a JVM memory size like 4g")


@dataclass(frozen=True)
class UpstreamConfig:
    """The database (or export of it) that reconcile compares the Delta tables with."""

    kind: Literal["files", "mysql", "mariadb", "tidb"] = "files"
    path: str | None = None
    format: Literal["dumpling", "parquet", "expected"] = "dumpling"
    host: str = "127.0.0.1"
    port: int = 4000
    user: str = "root"
    password: Secret = field(default_factory=lambda: Secret(""))
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    ssl_verify: bool = True
    connect_timeout: int = 10
    # Seconds one statement may wait for the server's answer (a stalled network); then the connection
    # counts as lost. A lost, reset or refused connection is retried `retries` times (a table's reads
    # start again from new connections, one snapshot), `retry_wait` seconds first, doubling each time.
    read_timeout: int = 900
    retries: int = 3
    retry_wait: float = 5.0
    # TLS even without ssl_ca/ssl_cert (the system's trusted CAs verify the server).
    ssl: bool = False
    # MySQL/MariaDB: "lock" holds LOCK TABLES ... READ for the milliseconds it takes to open every
    # connection's snapshot, so all see one state; "snapshot" takes no lock (exact on a quiet table).
    consistency: Literal["lock", "snapshot"] = "lock"

    def __post_init__(self) -> None:
        if self.kind == "files" and not self.path:
            raise ValueError("path is required when kind = 'files'")
        if not 0 < self.port < 65536:
            raise ValueError(f"port {self.port} is not a TCP port")
        if self.connect_timeout < 1:
            raise ValueError(f"connect_timeout must be at least 1 second, got {self.connect_timeout}")
        if self.read_timeout < 1:
            raise ValueError(f"read_timeout must be at least 1 second, got {self.read_timeout}")
        if not 0 <= self.retries <= 20:
            raise ValueError(f"retries must be 0..20, got {self.retries}")
        if not 0 <= self.retry_wait <= 600:
            raise ValueError(f"retry_wait must be 0..600 seconds, got {self.retry_wait}")

    def __repr__(self) -> str:  # never show the password, even in a traceback
        return f"UpstreamConfig(kind={self.kind!r}, host={self.host!r}, port={self.port}, user={self.user!r})"


@dataclass(frozen=True)
class ReconcileConfig:
    """What reconcile compares and how strictly."""

    upstream: UpstreamConfig = field(default_factory=lambda: UpstreamConfig(kind="mysql"))
    tables: tuple[str, ...] = ("*.*",)
    ignore_columns: tuple[str, ...] = ()
    float_tolerance: float = 1e-9
    chunk_size: int = 20_000
    max_diff: int = 0
    parallelism: int = 4
    # Tables compared side by side; a SQL upstream gets up to tables_at_once x parallelism connections.
    tables_at_once: int = 4
    sample_size: int = 10
    # Bisection stops when a differing range holds at most this many upstream rows; they are row-diffed.
    leaf_rows: int = 256
    # Each bisection round cuts a differing range into this many parts (2: a binary search); more
    # parts mean fewer rounds, each a round trip to both sides.
    bisection_factor: int = 16
    # A table never gets more chunks than this (the chunk size grows instead).
    max_chunks: int = 2000

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {self.chunk_size}")
        if self.leaf_rows < 1:
            raise ValueError(f"leaf_rows must be at least 1, got {self.leaf_rows}")
        if not 2 <= self.bisection_factor <= 256:
            raise ValueError(f"bisection_factor must be 2..256, got {self.bisection_factor}")
        if not 1 <= self.max_chunks <= 100_000:
            raise ValueError(f"max_chunks must be 1..100000, got {self.max_chunks}")
        if self.sample_size < 0:
            raise ValueError(f"sample_size must not be negative, got {self.sample_size}")
        for pattern in self.tables:
            if not _TABLE_PATTERN.match(pattern):
                raise ValueError(f"tables: {pattern!r} is not a `db.table` pattern (wildcards * ? allowed)")
        if self.max_diff < 0:
            raise ValueError(f"max_diff must not be negative, got {self.max_diff}")
        if not 1 <= self.parallelism <= 64:
            raise ValueError(f"parallelism must be 1..64, got {self.parallelism}")
        if not 1 <= self.tables_at_once <= 32:
            raise ValueError(f"tables_at_once must be 1..32, got {self.tables_at_once}")
        if self.float_tolerance < 0:
            raise ValueError(f"float_tolerance must not be negative, got {self.float_tolerance}")


@dataclass(frozen=True)
class ObjectStoreConfig:
    """How `s3a://` paths (source and warehouse) reach their object store, Hadoop S3A underneath.

    Without `access_key` the default AWS provider chain finds credentials (environment variables, the
    instance or pod role). Put secrets in the config as `${ENV_VAR}`; they are never printed.
    """

    endpoint: str | None = None  # e.g. "https://s3.eu-west-1.amazonaws.com" or "http://127.0.0.1:9000"
    region: str | None = None
    path_style_access: bool = False  # MinIO, S3Proxy, Ceph: bucket in the path, not the host name
    access_key: Secret = field(default_factory=lambda: Secret(""))
    secret_key: Secret = field(default_factory=lambda: Secret(""))
    session_token: Secret = field(default_factory=lambda: Secret(""))
    # Network faults (unset: S3A's own defaults, fit for a scheduled job: connect 30 s, read 200 s,
    # 7 retries 500 ms apart and growing, each request tried 5 times by the SDK; throttling (503
    # SlowDown) is retried 20 times from 100 ms, growing). Seconds; `retries` is S3A's retry limit for a
    # failed call (500 InternalError too), `throttle_retries` for a throttled one (503 SlowDown).
    connect_timeout: int | None = None
    read_timeout: int | None = None
    retries: int | None = None
    retry_wait: float | None = None
    throttle_retries: int | None = None
    throttle_wait: float | None = None

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "retry_wait", "throttle_wait"):
            if (value := getattr(self, name)) is not None and value <= 0:
                raise ValueError(f"{name} must be more than 0 seconds, got {value}")
        for name in ("retries", "throttle_retries"):
            if (count := getattr(self, name)) is not None and not 0 <= count <= 50:
                raise ValueError(f"{name} must be 0..50, got {count}")
        if self.endpoint is not None and not re.match(r"^https?://[^/\s]+/?$", self.endpoint):
            raise ValueError(f"endpoint {self.endpoint!r} must be http(s)://host[:port]")
        if bool(self.access_key) != bool(self.secret_key):
            raise ValueError("access_key and secret_key go together: give both or neither")
        if self.session_token and not self.access_key:
            raise ValueError("session_token needs access_key and secret_key")

    def __repr__(self) -> str:  # never show a secret, even in a traceback
        return f"ObjectStoreConfig(endpoint={self.endpoint!r}, region={self.region!r})"


@dataclass(frozen=True)
class DemoConfig:
    """The workload `backfill demo` simulates before it runs the backfill."""

    out: str = ".tidelake/demo/sim"
    seed: int = 7
    tables: int = 4
    rows: int = 2_000
    txns: int = 600
    scans: int = 3


_DEFAULT_RECONCILE_UPSTREAM = UpstreamConfig(kind="mysql")


@dataclass(frozen=True)
class TidelakeConfig:
    source: SourceConfig
    target: TargetConfig
    job: JobConfig = field(default_factory=JobConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    reconcile: ReconcileConfig = field(default_factory=ReconcileConfig)
    object_store: ObjectStoreConfig = field(default_factory=ObjectStoreConfig)
    demo: DemoConfig = field(default_factory=DemoConfig)
    # The upstream database, once for every command: backfill reads the schema of tables that predate a
    # changefeed from it, reconcile compares with it (unless [reconcile.upstream] names another).
    upstream: UpstreamConfig | None = None

    def __post_init__(self) -> None:
        initial = self.source.initial
        from_upstream = initial is not None and initial.upstream_tso is not None
        if from_upstream and (self.upstream is None or self.upstream.kind == "files"):
            raise ValueError(
                "source.initial.upstream_tso reads the [upstream] database; give [upstream] with kind = "
                "'tidb', 'mysql' or 'mariadb'"
            )
        if self.upstream is not None and self.reconcile.upstream == _DEFAULT_RECONCILE_UPSTREAM:
            object.__setattr__(self, "reconcile", replace(self.reconcile, upstream=self.upstream))


def load_config(
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    source_kinds: Mapping[str, SourceKind] | None = None,
) -> TidelakeConfig:
    """Read and validate a config file (the embedded demo config when `path` is None). With the registered
    `source_kinds` (the backfill's commands pass them) the source's kind and settings are checked and
    parsed too; without them (reconcile reads no source) its tables are kept as written."""
    file = Path(path) if path is not None else DEFAULT_CONFIG
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read config: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    try:
        return config_from_toml(data, environ, source_kinds)
    except ConfigError as exc:
        raise ConfigError(f"{file}: {exc}") from None


def config_from_toml(
    data: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    source_kinds: Mapping[str, SourceKind] | None = None,
) -> TidelakeConfig:
    """The config of a parsed TOML document (`load_config` without the file)."""
    source = data.get("source")
    tables: dict[str, Mapping[str, Any]] = {}
    if isinstance(source, Mapping):
        for key, value in source.items():
            if key in _SOURCE_KEYS:
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(
                    f"source: unknown key {key!r}; valid keys: {', '.join(sorted(_SOURCE_KEYS))} and the "
                    "settings tables of the source kinds"
                )
            tables[key] = value
        data = {**data, "source": {k: v for k, v in source.items() if k in _SOURCE_KEYS}}
    config = load_dataclass(TidelakeConfig, data, "", environ)
    config = replace(config, source=replace(config.source, tables=MappingProxyType(tables)))
    if source_kinds is not None:
        config = replace(config, source=parse_source_settings(config.source, source_kinds, environ))
    return config
