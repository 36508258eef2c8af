"""Network faults between a backfill and its object store: S3Proxy behind Toxiproxy (issue 52).

The captures and the warehouse are in buckets that are only reached through the proxy. While a fault
holds (latency on every call, connections reset at random mid-read or mid-upload, a window in which
every connection is refused), the backfill either finishes or stops with exit 2 naming the endpoint.
Whatever it did: every commit in the tables' logs is whole and carries our tag; then a rerun without
the fault reaches exactly the simulator's expected state, and one more run adds no version.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backfill.cli import main
from tests.expected import warehouse_differences
from tests.faults.conftest import APP_ID, JOB, SPARK_LINES, Workload
from tests.faults.harness import delta_tables, report_outcome, untagged_commits
from tests.toxiproxy import Proxy
from tidelake import fs
from tidelake.config import load_config
from tidelake.objectstore import configure

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BUCKETS = itertools.count()
SECRET_ENV = "TIDELAKE_FAULTS_S3_SECRET"


@dataclass
class Store:
    """A bucket of captures and the warehouse beside them, behind `proxy`; `local` is S3Proxy's folder
    of the bucket (its filesystem backend keeps each object as a file: the Delta logs can be read)."""

    proxy: Proxy
    config: Path
    warehouse: str
    local: Path


@pytest.fixture
def store(spark, local_s3, toxiproxy, workload: Workload, tmp_path: Path, monkeypatch) -> Iterator[Store]:
    yield from open_store(spark, local_s3, toxiproxy, workload.sim, tmp_path, monkeypatch)


def open_store(spark, local_s3, toxiproxy, sim: Path, tmp_path: Path, monkeypatch) -> Iterator[Store]:
    """A new bucket holding the captures of `sim`, uploaded through the proxy before any fault (its S3A
    file system, cached by bucket, is made then with the config's endpoint and settings)."""
    bucket = f"faults-{next(BUCKETS)}"
    local_s3.make_bucket(bucket)
    proxy = toxiproxy.proxy(bucket, local_s3.port)
    monkeypatch.setenv(SECRET_ENV, local_s3.credential)
    config = tmp_path / "s3.toml"
    config.write_text(
        f'[job]\nname = "{JOB}"\n[source]\npath = "s3a://{bucket}/scans"\n'
        f'[target]\nwarehouse = "s3a://{bucket}/wh"\n{SPARK_LINES}'
        f'[object_store]\nendpoint = "http://127.0.0.1:{proxy.port}"\npath_style_access = true\n'
        f'access_key = "{local_s3.identity}"\nsecret_key = "${{{SECRET_ENV}}}"\n'
        "connect_timeout = 2\nread_timeout = 5\nretries = 3\nretry_wait = 0.2\n"
    )
    configure(spark, load_config(config).object_store)
    fs.upload(spark, str(sim / "scans"), f"s3a://{bucket}/scans")
    local = local_s3.folder / "data" / bucket
    yield Store(proxy, config, f"s3a://{bucket}/wh", local / "wh")
    toxiproxy.call("DELETE", f"/proxies/{proxy.name}")


def whole_tagged_commits(store: Store) -> list[str]:
    """Problems with the tables' logs: a commit file that does not parse (half written) or lacks our tag."""
    problems = untagged_commits(store.local, APP_ID)
    for table in delta_tables(store.local):
        for commit in sorted((table / "_delta_log").glob("*.json")):
            try:
                actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
            except ValueError:
                problems.append(f"{commit}: not whole JSON")
                continue
            if not any("commitInfo" in a for a in actions):
                problems.append(f"{commit}: no commitInfo")
    return problems


def versions(store: Store) -> dict[str, int]:
    return {
        f"{t.parent.name}.{t.name}": max(int(c.stem) for c in (t / "_delta_log").glob("*.json"))
        for t in delta_tables(store.local)
    }


def run_through(store: Store, fault: Callable[[], AbstractContextManager[None]], capsys) -> tuple[int, str]:
    """One backfill with `fault` in force: its exit code and its stderr."""
    with fault():
        code = main(["run", "--config", str(store.config)])
    err = capsys.readouterr().err
    report_outcome(capsys, code, err)
    return code, err


def assert_rerun_is_exactly_once(spark, store: Store, workload: Workload) -> None:
    assert whole_tagged_commits(store) == []
    assert main(["run", "--config", str(store.config)]) == 0
    assert warehouse_differences(spark, store.warehouse, workload.sim, workload.last_scan) == []
    before = versions(store)
    assert main(["run", "--config", str(store.config)]) == 0
    assert versions(store) == before, "a rerun adds no Delta version"
    assert whole_tagged_commits(store) == []


@pytest.mark.drill  # three backfills on S3 through the proxy: minutes on a loaded machine
def test_latency_on_every_s3_call_changes_nothing(spark, store: Store, workload: Workload, capsys) -> None:
    code, err = run_through(store, lambda: store.proxy.toxic("latency", latency=40, jitter=20), capsys)
    assert code == 0, err
    assert warehouse_differences(spark, store.warehouse, workload.sim, workload.last_scan) == []
    assert_rerun_is_exactly_once(spark, store, workload)


@pytest.mark.drill
@pytest.mark.parametrize("stream", ["downstream", "upstream"])  # mid-read (answers), mid-upload (requests)
def test_connections_reset_at_random_retry_or_stop_cleanly(
    spark, store: Store, workload: Workload, stream: str, capsys
) -> None:
    @contextmanager
    def resets() -> Iterator[None]:
        store.proxy.server.call(
            "POST", f"/proxies/{store.proxy.name}/toxics",
            {"name": "resets", "type": "reset_peer", "stream": stream, "toxicity": 0.2, "attributes": {"timeout": 0}},
        )  # fmt: skip
        try:
            yield
        finally:
            store.proxy.remove("resets")

    code, err = run_through(store, resets, capsys)
    assert code in (0, 2), err
    if code == 2:
        assert f"127.0.0.1:{store.proxy.port}" in err, err
    assert_rerun_is_exactly_once(spark, store, workload)


@pytest.mark.drill
def test_a_window_of_refused_connections_is_retried_or_stops_cleanly(
    spark, store: Store, workload: Workload, capsys
) -> None:
    @contextmanager
    def refused_window() -> Iterator[None]:
        timers = [threading.Timer(3, store.proxy.disable), threading.Timer(6, store.proxy.enable)]
        for timer in timers:
            timer.start()
        try:
            yield
        finally:
            for timer in timers:
                timer.cancel()
            store.proxy.enable()

    code, err = run_through(store, refused_window, capsys)
    assert code in (0, 2), err
    if code == 2:
        assert f"127.0.0.1:{store.proxy.port}" in err, err
    assert_rerun_is_exactly_once(spark, store, workload)


@pytest.mark.drill
@pytest.mark.parametrize("gone_for", [2.0, None])  # a short outage (S3A retries it), the store gone for good
def test_the_store_gone_as_the_first_delta_commit_starts(
    spark, store: Store, workload: Workload, gone_for: float | None, capsys, monkeypatch
) -> None:
    """Every connection refused from the moment the first table's Delta write-and-commit starts (its
    data files, then its log entry): no version is half written, and a stop names the endpoint."""
    from tidelake import delta, delta_internals

    def refused_from_the_commit(write: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:  # the moment only; the write itself is real
            if not store.proxy.server.call("GET", f"/proxies/{store.proxy.name}")["enabled"]:
                return write(*args, **kwargs)
            store.proxy.disable()
            if gone_for is not None:
                threading.Timer(gone_for, store.proxy.enable).start()
            return write(*args, **kwargs)

        return wrapped

    @contextmanager
    def from_the_first_commit() -> Iterator[None]:
        # every commit of the sink goes through one of the two
        writes = ((delta, "commit_with_txn"), (delta_internals, "commit_in_own_txn"))
        real = {(module, name): getattr(module, name) for module, name in writes}
        for (module, name), write in real.items():
            monkeypatch.setattr(module, name, refused_from_the_commit(write))
        try:
            yield
        finally:
            for (module, name), write in real.items():
                monkeypatch.setattr(module, name, write)
            store.proxy.enable()

    code, err = run_through(store, from_the_first_commit, capsys)
    assert code in (0, 2), err
    if code == 2:
        assert f"127.0.0.1:{store.proxy.port}" in err, err
    if gone_for is None:
        assert code == 2, "nothing can be committed while the store is gone"
    assert_rerun_is_exactly_once(spark, store, workload)


SOAK_RUNS = int(os.environ.get("TIDELAKE_SOAK_RUNS", "8"))


@pytest.mark.drill
def test_soak_scheduled_runs_over_a_growing_history_with_random_network_faults(
    spark, local_s3, toxiproxy, tmp_path_factory, tmp_path, monkeypatch, capsys
) -> None:
    """A bounded soak (TIDELAKE_SOAK_RUNS runs, default 8; seeded): each run is one schedule tick that
    may go one capture further (`--until-ts`), under a fault drawn at random (none, latency, resets on
    answers or requests, a refused window). After every run: only whole, tagged commits, and a run that
    finished holds exactly the simulator's state at its capture. At the end one clean run: rows lost 0."""
    from tidbsim import SimulationConfig, load_index, simulate

    sim = tmp_path_factory.mktemp("soak") / "sim"
    simulate(SimulationConfig(out=sim, seed=52, tables=2, rows=10, txns=60, scans=6))
    index = load_index(sim)
    store = next(open_store(spark, local_s3, toxiproxy, sim, tmp_path, monkeypatch))
    rng = random.Random(52)
    proxy = store.proxy

    @contextmanager
    def resets(stream: str) -> Iterator[None]:
        proxy.server.call(
            "POST", f"/proxies/{proxy.name}/toxics",
            {"name": "resets", "type": "reset_peer", "stream": stream, "toxicity": 0.2, "attributes": {"timeout": 0}},
        )  # fmt: skip
        try:
            yield
        finally:
            proxy.remove("resets")

    @contextmanager
    def refused_window() -> Iterator[None]:
        timers = [threading.Timer(rng.uniform(1, 8), proxy.disable)]
        timers.append(threading.Timer(timers[0].interval + 3, proxy.enable))
        for timer in timers:
            timer.start()
        try:
            yield
        finally:
            for timer in timers:
                timer.cancel()
            proxy.enable()

    faults: dict[str, Callable[[], AbstractContextManager[None]]] = {
        "none": nullcontext,
        "latency": lambda: proxy.toxic("latency", latency=30, jitter=30),
        "resets mid-read": lambda: resets("downstream"),
        "resets mid-upload": lambda: resets("upstream"),
        "refused window": refused_window,
    }
    injected: Counter[str] = Counter()
    exits: Counter[int] = Counter()
    for run in range(SOAK_RUNS):
        scan = index[min(run + 1, len(index)) - 1]
        kind = rng.choice(sorted(faults))
        injected[kind] += 1
        with faults[kind]():
            code = main(["run", "--config", str(store.config), "--until-ts", str(scan["resolved_ts"])])
        err = capsys.readouterr().err
        exits[code] += 1
        assert code in (0, 2), f"run {run} ({kind}): {err}"
        assert whole_tagged_commits(store) == [], f"run {run} ({kind})"
        if code == 0:
            assert warehouse_differences(spark, store.warehouse, sim, scan["scan_id"]) == [], f"run {run}"
    assert main(["run", "--config", str(store.config)]) == 0
    lost = warehouse_differences(spark, store.warehouse, sim, index[-1]["scan_id"])
    with capsys.disabled():
        print(f"\nsoak: {SOAK_RUNS} runs over {len(index)} captures; faults {dict(injected)}; "
              f"exits {dict(exits)}; differences after the last run {len(lost)}")  # fmt: skip
    assert lost == []
    proxy.server.call("DELETE", f"/proxies/{proxy.name}")
