"""One small simulated workload for the whole drill, as every source reads it: kv-scan captures, a
TiCDC storage sink in CSV and in canal-json, and (when a case asks for `drill_kafka`) a changefeed's
open-protocol topic on the test broker. Its second window renames and truncates tables."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.faults.harness import table_rows, untagged_commits
from tidbsim import SimulationConfig, load_index, simulate
from tidbsim.config import StorageSink
from tidbsim.storage_codec import CsvOptions

JOB = "drill"
APP_ID = f"tidelake:{JOB}"
SINKS = (
    StorageSink(
        protocol="csv", date_separator="day", csv=CsvOptions(output_old_value=True), restarts=1, seed=5
    ),
    StorageSink(protocol="canal-json", flavor="ticdc", date_separator="none", restarts=1, seed=5),
)
SOURCE_LINES = {
    "kv-scan": "",
    "csv": 'kind = "ticdc-storage"\n[source.storage]\nprotocol = "csv"\ndate_separator = "day"\n'
    "output_old_value = true\n",
    "canal-json": 'kind = "ticdc-storage"\n[source.storage]\nprotocol = "canal-json"\ndate_separator = "none"\n',
}
# Every drill config carries a secret from the environment; no output of the drill may show it (§4).
SECRET_ENV, SECRET = "TIDELAKE_DRILL_SECRET", "drill-marker-7f3a9c1e-password"
OBJECT_STORE_LINES = f'[object_store]\naccess_key = "drill"\nsecret_key = "${{{SECRET_ENV}}}"\n'
SPARK_LINES = '[spark]\nmaster = "local[2]"\nshuffle_partitions = 2\ndriver_memory = "1g"\n'


@dataclass(frozen=True)
class Workload:
    sim: Path
    first_resolved_ts: int
    last_scan: str
    # `[source]` lines per source; the `drill_kafka` fixture adds "kafka" once its topic is published
    sources: dict[str, str] = field(default_factory=lambda: dict(SOURCE_LINES))

    def source_path(self, source: str) -> Path:
        return self.sim / "scans" if source == "kv-scan" else self.sim / "storage" / source

    def _path_line(self, source: str) -> str:
        return "" if source == "kafka" else f'path = "{self.source_path(source)}"\n'  # a topic has no path

    def config(self, folder: Path, source: str, warehouse: Path, extra: str = "") -> Path:
        """A job config for `source` writing to `warehouse` (plus `extra` TOML at the end)."""
        path = folder / f"{source}-{warehouse.name}.toml"
        path.write_text(
            f'[job]\nname = "{JOB}"\n[target]\nwarehouse = "{warehouse}"\n{SPARK_LINES}{OBJECT_STORE_LINES}'
            f"[source]\n{self._path_line(source)}{self.sources[source]}{extra}"
        )
        return path


@pytest.fixture(scope="session")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    os.environ[SECRET_ENV] = SECRET  # the in-process runs read it too; subprocesses get it from `environment`
    out = tmp_path_factory.mktemp("drill") / "sim"
    simulate(
        SimulationConfig(
            out=out, seed=3, tables=2, rows=10, txns=40, scans=2, ddls_per_scan=2,
            ddl_kinds=("rename_table", "truncate_table"), storage_sinks=SINKS,
        )
    )  # fmt: skip
    index = load_index(out)
    return Workload(out, index[0]["resolved_ts"], index[-1]["scan_id"])


@pytest.fixture(scope="session")
def drill_kafka(workload: Workload, kafka_broker) -> str:
    """The workload's changefeed published to a topic of the test broker; adds the "kafka" source."""
    from tidbsim.kafka import Changefeed, changefeed_messages, publish, write_schema_folder

    topic = "drill-open"
    feed = Changefeed(topic=topic, dispatcher="index-value", partitions=3, restarts=1)
    publish(changefeed_messages(workload.sim, feed), kafka_broker.bootstrap, partitions=3)
    schema = write_schema_folder(workload.sim, workload.sim / "kafka-schema")
    workload.sources["kafka"] = (
        f'kind = "ticdc-kafka"\n[source.kafka]\nbootstrap_servers = "{kafka_broker.bootstrap}"\n'
        f'topic = "{topic}"\nschema = "{schema}"\n'
    )
    return "kafka"


@dataclass
class Prepared:
    """Per source, made once: a warehouse back-filled through the first capture (`start`), and the rows
    that one uninterrupted run over everything leaves (`reference`)."""

    spark: object
    workload: Workload
    root: Path
    done: dict[str, tuple[Path, dict[str, list[str]]]] = field(default_factory=dict)

    def _prepare(self, source: str) -> tuple[Path, dict[str, list[str]]]:
        from backfill.run import run_backfill
        from tidelake.config import load_config

        if source not in self.done:
            reference, start = self.root / f"{source}-reference", self.root / f"{source}-start"
            config = self.workload.config
            run_backfill(self.spark, load_config(config(self.root, source, reference)))
            run_backfill(
                self.spark,
                load_config(config(self.root, source, start)),
                until_ts=self.workload.first_resolved_ts,
            )
            assert untagged_commits(reference, APP_ID) == []
            self.done[source] = (start, table_rows(self.spark, reference))
        return self.done[source]

    def start(self, source: str) -> Path:
        return self._prepare(source)[0]

    def reference(self, source: str) -> dict[str, list[str]]:
        return self._prepare(source)[1]

    def reference_warehouse(self, source: str) -> Path:
        self._prepare(source)
        return self.root / f"{source}-reference"


@pytest.fixture(scope="session")
def prepared(spark, workload: Workload, tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return Prepared(spark, workload, tmp_path_factory.mktemp("drill-prepared"))
