"""The `backfill` command: run, status, maintain, demo, decode, simulate."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from backfill.sources import load_backfill_config
from tidelake.cli import (
    IntervalOption,
    LogFormatOption,
    NotBuiltYet,
    OutputFileOption,
    QuietOption,
    VerboseOption,
    VersionOption,
    configure_output,
    configure_program,
    run_app,
)
from tidelake.config import TidelakeConfig
from tidelake.errors import ConfigError
from tidelake.output import DEFAULT_INTERVAL, emit, progress
from tidelake.spark import session_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")

app = typer.Typer(
    name="backfill",
    help=(
        "Turn TiDB change data (TiKV incremental-scan captures, TiCDC's storage sink or its Kafka topics) "
        "into Delta Lake tables."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="TOML config; default: the embedded demo config (`backfill doctor`)."
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout instead of tables.")
]


@app.callback()
def _group(version: VersionOption = False, verbose: VerboseOption = False) -> None:
    """Turn TiDB change data into Delta Lake tables (exit 0 done, 1 differences, 2 bad input or config,
    3 lost a commit race to another run of the job)."""
    configure_program(verbose)


@app.command(epilog="Example: `backfill run --config conf/prod.toml --json > report.json`")
def run(
    config: ConfigOption = None,
    as_json: JsonOption = False,
    output: OutputFileOption = None,
    until_ts: Annotated[
        int | None, typer.Option("--until-ts", help="Stop at this ts even if more is resolved.")
    ] = None,
    quiet: QuietOption = False,
    log_format: LogFormatOption = "text",
    progress_interval: IntervalOption = DEFAULT_INTERVAL,
) -> int:
    """Apply the source's complete changes past each table's checkpoint, up to the global resolved ts."""
    from backfill.run import run_backfill

    configure_output(quiet, log_format, progress_interval)
    settings = load_backfill_config(config)
    emit(
        _with_session(
            settings,
            "backfill",
            lambda spark: run_backfill(spark, settings, until_ts=until_ts),
            command="run",
        ),
        as_json,
        str(output) if output else None,
    )
    return 0


@app.command(epilog="Example: `backfill status --config conf/prod.toml --json`")
def status(config: ConfigOption = None, as_json: JsonOption = False) -> int:
    """Show each target table's checkpoint ts (and its UTC time) and its lag behind the newest ts the source holds."""
    from backfill.status import table_status

    settings = load_backfill_config(config)
    emit(_with_session(settings, "status", lambda spark: table_status(spark, settings)), as_json)
    return 0


@app.command(
    epilog="Example: `backfill snapshot --latest --sql | spark-sql` (docs/operations.md: Tables by name)"
)
def snapshot(
    config: ConfigOption = None,
    at: Annotated[
        int | None, typer.Option("--at", help="The resolved ts (TSO) every table must stand at.")
    ] = None,
    latest: Annotated[
        bool, typer.Option("--latest", help="The newest resolved ts every table of the job stood at.")
    ] = False,
    as_json: JsonOption = False,
    as_sql: Annotated[
        bool, typer.Option("--sql", help="Print `CREATE OR REPLACE VIEW ... VERSION AS OF` statements.")
    ] = False,
    register: Annotated[bool, typer.Option("--register", help="Create those views in the catalog.")] = False,
) -> int:
    """For every table of the job, the Delta version that holds exactly the state at one resolved ts;
    exit 2 naming a table that never stood at it (and the nearest ts it has)."""
    from backfill.snapshot import snapshot as take_snapshot

    if (at is None) == (not latest):
        raise typer.BadParameter("give exactly one of --at TS and --latest")
    if at is not None and at < 0:
        raise typer.BadParameter(f"--at must be a TSO (non-negative), got {at}")
    settings = load_backfill_config(config)
    result = _with_session(
        settings, "snapshot", lambda spark: take_snapshot(spark, settings, at, register=register)
    )
    if as_sql and not as_json:
        sys.stdout.write("".join(f"{statement};\n" for statement in result.sql()))
    else:
        emit(result, as_json)
    return 0


@app.command(epilog="Example: `backfill maintain --config conf/prod.toml --table 'shop.*' --json`")
def maintain(
    config: ConfigOption = None,
    as_json: JsonOption = False,
    table: Annotated[
        list[str] | None,
        typer.Option("--table", help="db.table pattern (wildcards; repeat). Default: [target] tables."),
    ] = None,
    retention_hours: Annotated[
        float, typer.Option("--retention-hours", help="VACUUM retention; never under Delta's 168 h check.")
    ] = 168.0,
) -> int:
    """OPTIMIZE (clustering or Z-order by key), purge deletion vectors, VACUUM and checkpoint each table."""
    from backfill.maintain import maintain as maintain_tables

    settings = load_backfill_config(config)
    result = _with_session(
        settings, "maintain",
        lambda spark: maintain_tables(spark, settings, patterns=table or (), retention_hours=retention_hours),
    )  # fmt: skip
    emit(result, as_json)
    return result.exit_code


@app.command(
    epilog="Example: `backfill demo` (uses the embedded demo config; its folders are under ./.tidelake/)"
)
def demo(
    config: ConfigOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    log_format: LogFormatOption = "text",
    progress_interval: IntervalOption = DEFAULT_INTERVAL,
    s3: Annotated[
        bool,
        typer.Option("--s3", help="Captures and warehouse in buckets of a local S3 server (S3Proxy)."),
    ] = False,
) -> int:
    """Simulate a TiDB workload, back-fill it in two windows, and show what each table reached."""
    from backfill.demo import run_demo

    configure_output(quiet, log_format, progress_interval)
    settings = load_backfill_config(config)
    result = _with_session(settings, "demo", lambda spark: run_demo(spark, settings, on_s3=s3))
    emit(result, as_json)
    return result.exit_code


@app.command(
    epilog="Example: `backfill decode --table-info t.json --key 7480000000000000685f728000000000000001 "
    "--value 8000020000000102...`"
)
def decode(
    table_info: Annotated[Path, typer.Option("--table-info", help="TiDB TableInfo JSON of the row's table.")],
    key: Annotated[str, typer.Option("--key", help="Raw record key, hex.")],
    value: Annotated[str, typer.Option("--value", help="Row value (format v2 or v1), hex.")],
    as_json: JsonOption = False,
) -> int:
    """Decode one TiDB row (key + value) with a table's schema; exit 2 with the reason on bad bytes."""
    try:
        from backfill.codec.cli import decode_command
    except ImportError:
        raise NotBuiltYet("`backfill decode` is not built yet (issue: TiDB codec)") from None
    return decode_command(str(table_info), key, value, as_json)


@app.command(epilog="Example: `backfill simulate --out /tmp/sim --seed 7 --tables 4 --rows 1000 --scans 3`")
def simulate(
    out: Annotated[
        str, typer.Option("--out", help="Folder for scans/ and expected/ (must not hold them yet).")
    ],
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same workload.")] = 0,
    tables: Annotated[int, typer.Option("--tables", help="Tables at the start.")] = 4,
    rows: Annotated[int, typer.Option("--rows", help="Rows inserted per table early on.")] = 100,
    txns: Annotated[int, typer.Option("--txns", help="Random transactions after that.")] = 300,
    scans: Annotated[int, typer.Option("--scans", help="Captures (overlapping windows).")] = 3,
    ddls_per_scan: Annotated[
        int,
        typer.Option("--ddls-per-scan", help="Online DDLs per capture window, cycling through every kind."),
    ] = 2,
    mysql: Annotated[
        str | None, typer.Option("--mysql", help="mysql://user:pass@host:port/ to replay the workload into.")
    ] = None,
    storage_sink: Annotated[
        list[str] | None,
        typer.Option(
            "--storage-sink",
            help="Also write a TiCDC storage-sink folder (csv or canal-json) to <out>/storage/<protocol>/;"
            " repeat for both.",
        ),
    ] = None,
    collation_table: Annotated[
        list[str] | None,
        typer.Option(
            "--collation-table",
            help="Also a table keyed by a clustered VARCHAR under this collation (utf8mb4_general_ci,"
            " utf8mb4_unicode_ci, utf8mb4_bin), whose keys change case and accents; repeat for more.",
        ),
    ] = None,
    kafka: Annotated[
        str | None,
        typer.Option("--kafka", help="host:port of a Kafka broker to publish the changefeed's messages to."),
    ] = None,
    kafka_topic: Annotated[str, typer.Option("--kafka-topic", help="Topic (created if missing).")] = (
        "tidelake-open"
    ),
    kafka_partitions: Annotated[
        int, typer.Option("--kafka-partitions", help="Partitions of a new topic.")
    ] = 3,
    dispatcher: Annotated[
        str, typer.Option("--dispatcher", help="TiCDC partition dispatcher: default, table, index-value, ts.")
    ] = "default",
    kafka_protocol: Annotated[
        str, typer.Option("--kafka-protocol", help="open-protocol, or canal-json (with the TiDB extension).")
    ] = "open-protocol",
    as_json: JsonOption = False,
) -> int:
    """Simulate a TiDB cluster's change history as incremental-scan captures, with its expected state;
    with --kafka also publish it as a TiCDC changefeed's open-protocol (or canal-json) messages."""
    from tidbsim.cli import simulate_command
    from tidbsim.kafka import Changefeed

    try:
        feed = Changefeed(
            topic=kafka_topic, partitions=kafka_partitions, dispatcher=dispatcher, protocol=kafka_protocol
        )
    except ValueError as exc:
        raise ConfigError(f"simulate: {exc}") from None
    return simulate_command(
        out, seed=seed, tables=tables, rows=rows, txns=txns, scans=scans, ddls_per_scan=ddls_per_scan,
        mysql=mysql, storage_sinks=storage_sink or (), kafka=kafka, feed=feed, as_json=as_json,
        collation_tables=collation_table or (),
    )  # fmt: skip


@app.command(epilog='Example: `spark-submit --jars "$(backfill jars)" ...` (docs/cluster.md)')
def jars(
    repository: Annotated[
        str, typer.Option("--repository", help="Maven repository to fetch from (a mirror of Maven Central).")
    ] = "https://repo1.maven.org/maven2",
    folder: Annotated[
        Path | None,
        typer.Option(
            "--folder", help="Where to keep them; default: the user cache ($TIDELAKE_JARS moves it)."
        ),
    ] = None,
    without_delta: Annotated[
        bool, typer.Option("--without-delta", help="Leave Delta's jars out: the Spark runtime ships Delta.")
    ] = False,
) -> int:
    """Fetch the JVM packages (delta-spark, hadoop-aws with the S3 client, the Kafka connector) by their
    Maven coordinates once into a cache folder, each checked against its locked sha256, and print the
    comma-separated list for spark-submit's --jars. Runs find them there; nothing downloads at session start."""
    from tidelake import jars as jvm_packages
    from tidelake.output import note

    target = folder if folder is not None else jvm_packages.jar_cache()
    wanted = [
        j
        for j in jvm_packages.locked_jars()
        if not (without_delta and j.artifact in jvm_packages.DELTA_ARTIFACTS)
    ]
    fetched = jvm_packages.fetch_jars(
        target, repository, wanted, on_fetch=lambda jar: note(f"fetching {jar.coordinates}", "backfill jars")
    )
    sys.stdout.write(",".join(str(p) for p in fetched) + "\n")
    return 0


@app.command(epilog="Example: `backfill doctor --json`")
def doctor(as_json: JsonOption = False) -> int:
    """Say which Python, Java, Spark, Delta and JVM packages a run would use and what is missing (exit 2),
    and how to submit a job to a cluster."""
    from backfill.doctor import diagnose

    result = diagnose()
    emit(result, as_json)
    return result.exit_code


def _with_session(
    settings: TidelakeConfig, purpose: str, work: Callable[[SparkSession], T], command: str | None = None
) -> T:
    """Run `work` with the active SparkSession, or one made (and stopped) for it, showing its progress
    (one stage named by the command; without a terminal, lines with what it does now and the running
    Spark tasks)."""
    with session_for(settings, purpose) as spark, progress("backfill", spark) as tracker:
        tracker.stage(command or purpose, 0)
        return work(spark)


def main(argv: Sequence[str] | None = None) -> int:
    return run_app(app, argv, "backfill")


def entrypoint() -> None:
    sys.exit(main())
