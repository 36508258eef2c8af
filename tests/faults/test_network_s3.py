"""Network faults between a backfill and its object store: S3Proxy behind Toxiproxy (issue 52).

The captures and the warehouse are in buckets that are only reached through the proxy. While a fault
holds (latency on every call, connections reset at random mid-read or mid-upload, a window in which
every connection is refused), the backfill either finishes or stops with exit 2 naming the endpoint.
Whatever it did: every commit in the tables' logs is whole and carries our tag; then a rerun without
the fault reaches exactly the simulator's expected state, and one more run adds no version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from backfill.cli import main
from tests.expected import warehouse_differences
from tests.faults.conftest import APP_ID, Workload
from tests.faults.harness import (
    Store,
    gone_for_a_while,
    open_store,
    report_outcome,
    resets,
    versions,
    whole_tagged_commits,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture
def store(spark, local_s3, toxiproxy, workload: Workload, tmp_path: Path, monkeypatch) -> Iterator[Store]:
    yield from open_store(spark, local_s3, toxiproxy, workload.sim, tmp_path, monkeypatch)


def run_through(store: Store, fault: Callable[[], AbstractContextManager[None]], capsys) -> tuple[int, str]:
    """One backfill with `fault` in force: its exit code and its stderr."""
    with fault():
        code = main(["run", "--config", str(store.config)])
    err = capsys.readouterr().err
    report_outcome(capsys, code, err)
    return code, err


def assert_rerun_is_exactly_once(spark, store: Store, workload: Workload) -> None:
    assert whole_tagged_commits(store.local, APP_ID) == []
    assert main(["run", "--config", str(store.config)]) == 0
    assert warehouse_differences(spark, store.warehouse, workload.sim, workload.last_scan) == []
    before = versions(store.local)
    assert main(["run", "--config", str(store.config)]) == 0
    assert versions(store.local) == before, "a rerun adds no Delta version"
    assert whole_tagged_commits(store.local, APP_ID) == []


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
    code, err = run_through(store, lambda: resets(store.proxy, stream, toxicity=0.2), capsys)
    assert code in (0, 2), err
    if code == 2:
        assert f"127.0.0.1:{store.proxy.port}" in err, err
    assert_rerun_is_exactly_once(spark, store, workload)


@pytest.mark.drill
def test_a_window_of_refused_connections_is_retried_or_stops_cleanly(
    spark, store: Store, workload: Workload, capsys
) -> None:
    code, err = run_through(store, lambda: gone_for_a_while(store.proxy, after=3, lasting=3), capsys)
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
