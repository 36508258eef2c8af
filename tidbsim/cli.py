"""``backfill simulate``: the command-line face of the simulator (the lead's CLI calls this)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tidbsim.config import SimulationConfig, SimulationResult, StorageSink
from tidbsim.engine import simulate
from tidbsim.kafka import Changefeed, changefeed_messages, publish
from tidelake.errors import ConfigError, TidelakeError
from tidelake.output import emit
from tidelake.tso import format_ts


class SimulationReport:
    """What ``backfill simulate`` prints: one row per scan, then the counters."""

    def __init__(
        self, result: SimulationResult, storage: Sequence[str] = (), published: dict[str, Any] | None = None
    ) -> None:
        self.result = result
        self.storage = tuple(storage)
        self.published = published

    def to_dict(self) -> dict[str, Any]:
        return self.result.to_dict() | ({"kafka": self.published} if self.published else {})

    def render(self, console: Console) -> None:
        r = self.result
        table = Table(title=f"simulated {r.events:,} events into {r.out} in {r.elapsed_s:.1f}s")
        for col in ("scan", "checkpoint ts", "current ts", "resolved ts", "events", "regions", "DDL jobs"):
            table.add_column(col, justify="right" if col in ("events", "regions", "DDL jobs") else "left")
        for s in r.scans:
            table.add_row(
                s.scan_id,
                format_ts(s.checkpoint_ts),
                format_ts(s.current_ts),
                format_ts(s.resolved_ts),
                f"{s.events:,}",
                str(s.regions),
                str(s.ddl_jobs),
            )
        console.print(table)
        for protocol in self.storage:
            console.print(f"TiCDC storage sink ({protocol}) written to {r.out / 'storage' / protocol}.")
        if r.mysql_applied:
            console.print("MariaDB/MySQL now holds the expected state of the last scan.")
        if self.published:
            p = self.published
            console.print(
                f"published {p['messages']:,} open-protocol messages to topic {p['topic']!r} "
                f"({p['partitions']} partitions, {p['dispatcher']} dispatcher) at {p['bootstrap']}"
            )


def simulate_command(
    out: str,
    *,
    seed: int = 0,
    tables: int = 4,
    rows: int = 100,
    txns: int = 300,
    scans: int = 3,
    ddls_per_scan: int = 2,
    mysql: str | None = None,
    storage_sinks: Sequence[str] = (),
    kafka: str | None = None,
    feed: Changefeed | None = None,
    as_json: bool = False,
    collation_tables: Sequence[str] = (),
) -> int:
    """Run one simulation and report it; bad sizes or an occupied folder are user errors (exit 2)."""
    try:
        config = SimulationConfig(
            out=Path(out), seed=seed, tables=tables, rows=rows, txns=txns, scans=scans,
            ddls_per_scan=ddls_per_scan, mysql_url=mysql,
            storage_sinks=tuple(StorageSink(protocol=p, seed=seed) for p in storage_sinks),
            ticdc_changelog=kafka is not None, collation_tables=tuple(collation_tables),
        )  # fmt: skip
    except ValueError as exc:
        raise ConfigError(f"simulate: {exc}") from None
    try:
        result = simulate(config)
    except FileExistsError as exc:
        raise TidelakeError(str(exc)) from None
    except OSError as exc:
        raise TidelakeError(f"simulate: {exc}") from None
    except Exception as exc:
        if type(exc).__module__.startswith(
            "pymysql"
        ):  # unreachable server, bad credentials: the user's to fix
            raise TidelakeError(
                f"simulate: MySQL/MariaDB at the --mysql URL failed: {exc.args[-1]}"
            ) from None
        raise
    published = None
    if kafka is not None:
        feed = feed or Changefeed()
        try:
            sent = publish(changefeed_messages(out, feed), kafka, partitions=feed.partitions)
        except Exception as exc:  # confluent-kafka's errors: an unreachable broker, a refused topic
            raise TidelakeError(f"simulate: publishing to Kafka at {kafka} failed: {exc}") from None
        published = {
            "bootstrap": kafka, "topic": feed.topic, "partitions": feed.partitions,
            "dispatcher": feed.dispatcher, "messages": sum(sent.values()),
        }  # fmt: skip
    emit(SimulationReport(result, storage_sinks, published), as_json)
    return 0
