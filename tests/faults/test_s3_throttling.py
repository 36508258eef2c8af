"""S3 throttling and server errors (issue 52): `503 SlowDown` and `500 InternalError` answers.

An HTTP fault proxy (tests/httpfaults.py) in front of S3Proxy answers some requests with S3's XML error
instead of forwarding them; the captures and the warehouse are reached only through it. S3A retries a
throttled call (`[object_store] throttle_retries`, `throttle_wait`; S3A's own defaults when unset): a run
under a share of such answers finishes, exactly once; throttling that never ends stops the run with exit
2 naming the endpoint, and the rerun without it reaches the simulator's state, exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backfill.cli import main
from tests.expected import warehouse_differences
from tests.faults.conftest import APP_ID, Workload
from tests.faults.harness import report_outcome, s3_job, versions, whole_tagged_commits
from tests.httpfaults import INTERNAL_ERROR, SLOW_DOWN, S3FaultProxy, Throttle

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def fault_proxy(local_s3) -> Iterator[S3FaultProxy]:
    proxy = S3FaultProxy(local_s3.port).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def job(
    spark, local_s3, fault_proxy, workload: Workload, tmp_path: Path, monkeypatch
) -> tuple[Path, str, Path]:
    fault_proxy.throttle(None)
    bucket = f"throttled-{tmp_path.name.lower().replace('_', '-')[-40:]}"
    return s3_job(spark, local_s3, workload.sim, tmp_path, monkeypatch, bucket, fault_proxy.port, None)


def assert_rerun_is_exactly_once(
    spark, config: Path, warehouse: str, local: Path, workload: Workload
) -> None:
    assert whole_tagged_commits(local, APP_ID) == []
    assert main(["run", "--config", str(config)]) == 0
    assert warehouse_differences(spark, warehouse, workload.sim, workload.last_scan) == []
    before = versions(local)
    assert main(["run", "--config", str(config)]) == 0
    assert versions(local) == before, "a rerun adds no Delta version"
    assert whole_tagged_commits(local, APP_ID) == []


@pytest.mark.drill
@pytest.mark.timeout(1800)  # three runs on S3 with a quarter of the calls retried: slow on a loaded machine
@pytest.mark.parametrize("answer", [SLOW_DOWN, INTERNAL_ERROR], ids=["503-SlowDown", "500-InternalError"])
def test_a_share_of_throttled_or_failed_requests_is_retried(
    spark, job, fault_proxy: S3FaultProxy, workload: Workload, answer, capsys
) -> None:
    config, warehouse, local = job
    fault_proxy.answered.clear()
    fault_proxy.throttle(Throttle(answer=answer, share=0.25))
    try:
        code = main(["run", "--config", str(config)])
    finally:
        fault_proxy.throttle(None)
    err = capsys.readouterr().err
    report_outcome(capsys, code, err)
    assert sum(fault_proxy.answered.values()) > 0, "the proxy answered no request with the error"
    assert code == 0, err
    assert warehouse_differences(spark, warehouse, workload.sim, workload.last_scan) == []
    with capsys.disabled():
        print(f"errors answered and retried: {dict(fault_proxy.answered)}")
    assert_rerun_is_exactly_once(spark, config, warehouse, local, workload)


@pytest.mark.drill  # three runs on S3: minutes on a loaded machine (the message: tests/unit/test_objectstore.py)
def test_throttling_that_never_ends_stops_with_exit_2_naming_the_endpoint(
    spark, job, fault_proxy: S3FaultProxy, workload: Workload, capsys
) -> None:
    """Every request answered 503 SlowDown from the start: after `throttle_retries` the run stops (exit 2,
    naming the endpoint and the throttling) within seconds; nothing is committed; the rerun is exactly once."""
    config, warehouse, local = job
    fault_proxy.answered.clear()
    fault_proxy.throttle(Throttle(answer=SLOW_DOWN, share=1.0))
    started = time.monotonic()
    try:
        code = main(["run", "--config", str(config)])
    finally:
        fault_proxy.throttle(None)
    took = time.monotonic() - started
    err = capsys.readouterr().err
    report_outcome(capsys, code, err)
    assert code == 2, err
    assert f"127.0.0.1:{fault_proxy.port}" in err and "SlowDown" in err, err
    assert "Traceback" not in err, err
    assert took < 120, f"{took:.0f} s"
    assert sum(fault_proxy.answered.values()) > 1
    assert_rerun_is_exactly_once(spark, config, warehouse, local, workload)
