"""Captures in one bucket, the warehouse in another, on a real S3 API server (S3Proxy on 127.0.0.1).

The tables on S3 must equal the simulator's expected state row for row, a rerun adds nothing, a run killed
between two tables finishes on rerun, and reconcile says equal. A TiCDC storage sink's folder in a bucket
gives the tables the same folder gives from local disk. Bad credentials and a missing bucket end in exit 2
naming the endpoint and bucket, never the secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill.cli import main
from backfill.run import run_backfill
from tests.expected import warehouse_differences
from tests.kill import killed_after_first_table, table_label
from tidbsim import SimulationConfig, load_expected, load_index, simulate
from tidbsim.config import StorageSink
from tidbsim.storage_codec import CsvOptions
from tidelake import delta, fs
from tidelake.config import load_config
from tidelake.objectstore import configure
from tidelake.s3local import LocalS3Server

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SECRET_ENV = "TIDELAKE_TEST_S3_SECRET"


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("s3-workload") / "sim"
    simulate(SimulationConfig(out=out, seed=3, tables=3, rows=30, txns=90, scans=3))
    return out


@pytest.fixture(scope="module")
def sink_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workload written as a TiCDC storage sink (CSV) too; its DDLs avoid partition DDLs, which a
    storage sink's files cannot apply (README)."""
    out = tmp_path_factory.mktemp("s3-sink-workload") / "sim"
    sink = StorageSink(protocol="csv", date_separator="day", csv=CsvOptions(output_old_value=True), seed=9)
    simulate(
        SimulationConfig(
            out=out, seed=9, tables=3, rows=30, txns=120, scans=3, ddls_per_scan=1, storage_sinks=(sink,)
        )
    )
    return out


@pytest.fixture(scope="module")
def buckets(spark, local_s3: LocalS3Server, workload: Path) -> tuple[str, str]:
    """s3a:// URIs of the captures (uploaded through the S3 API) and of an empty warehouse bucket."""
    source = local_s3.make_bucket("tidelake-captures")
    warehouses = local_s3.make_bucket("tidelake-warehouse")
    configure(spark, local_s3.object_store())
    fs.upload(spark, str(workload / "scans"), f"{source}/scans")
    return f"{source}/scans", warehouses


def write_config(
    path: Path, server: LocalS3Server, source: str, warehouse: str, workload: Path, *, sink: bool = False
) -> Path:
    """A job config reaching `server`; reconcile's upstream is the workload's expected state. `sink`: the
    source is the workload's TiCDC storage sink (CSV) instead of its captures."""
    kind = 'kind = "ticdc-storage"\n' if sink else ""
    path.write_text(
        f'[job]\nname = "s3"\n[source]\npath = "{source}"\n{kind}[target]\nwarehouse = "{warehouse}"\n'
        f'[object_store]\nendpoint = "{server.endpoint}"\npath_style_access = true\n'
        f'access_key = "{server.identity}"\nsecret_key = "${{{SECRET_ENV}}}"\n'
        f'[reconcile.upstream]\nkind = "files"\nformat = "expected"\npath = "{workload / "expected"}"\n'
        + (
            '[source.storage]\nprotocol = "csv"\ndate_separator = "day"\noutput_old_value = true\n'
            if sink
            else ""
        )
    )
    return path


def tables(spark, warehouse: str) -> dict[str, list[tuple]]:
    found = {}
    for db in fs.list_dir(spark, warehouse):
        for table in fs.list_dir(spark, db.path):
            rows = spark.read.format("delta").load(table.path).collect()
            found[f"{db.name}.{table.name}"] = sorted(map(repr, (tuple(r) for r in rows)))
    return found


def versions(spark, warehouse: str) -> dict[str, int]:
    return {
        f"{db.name}.{t.name}": delta.table_version(spark, t.path)
        for db in fs.list_dir(spark, warehouse)
        for t in fs.list_dir(spark, db.path)
    }


def test_backfill_status_rerun_and_reconcile_on_s3(
    spark, local_s3, workload, buckets, tmp_path, monkeypatch, capsys
) -> None:
    source, warehouses = buckets
    monkeypatch.setenv(SECRET_ENV, local_s3.credential)
    final = load_index(workload)[-1]
    last = final["resolved_ts"]

    conf = write_config(tmp_path / "s3.toml", local_s3, source, f"{warehouses}/wh", workload)
    assert main(["run", "--config", str(conf), "--json"]) == 0
    assert f'"resolved_ts": {last}' in capsys.readouterr().out
    assert warehouse_differences(spark, f"{warehouses}/wh", workload, final["scan_id"]) == []
    # registered by name at their s3a:// folders
    for (db, name), expected in load_expected(workload, final["scan_id"]).items():
        described = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {db}.{name}").collect()}
        assert described["Location"] == f"{warehouses}/wh/{db}/{name}"
        assert spark.sql(f"SELECT count(*) FROM {db}.{name}").first()[0] == expected.num_rows

    before = versions(spark, f"{warehouses}/wh")
    assert main(["run", "--config", str(conf)]) == 0
    assert versions(spark, f"{warehouses}/wh") == before, "a rerun adds no Delta version"

    assert main(["status", "--config", str(conf), "--json"]) == 0
    status = capsys.readouterr().out
    assert f'"checkpoint_ts": {last}' in status and "s3a://tidelake-warehouse/wh/" in status

    from reconcile.cli import main as reconcile_main

    assert reconcile_main(["run", "--config", str(conf), "--json"]) == 0
    assert local_s3.credential not in capsys.readouterr().out


@pytest.mark.drill  # long tier (`pytest --drill`): the kill and rerun are the apply stage's, proven on local disk in CI
def test_run_killed_between_tables_on_s3_finishes_once_on_rerun(
    spark, local_s3, workload, buckets, tmp_path, monkeypatch
) -> None:
    source, warehouses = buckets
    monkeypatch.setenv(SECRET_ENV, local_s3.credential)
    config = load_config(
        write_config(tmp_path / "k.toml", local_s3, source, f"{warehouses}/killed", workload)
    )

    with killed_after_first_table(monkeypatch) as finished:
        run_backfill(spark, config)
    done = versions(spark, f"{warehouses}/killed")
    (first,) = finished
    assert set(done) == {table_label(first)}, "the kill leaves exactly the table that finished its walk"

    final = load_index(workload)[-1]
    assert run_backfill(spark, config).resolved_ts == final["resolved_ts"]
    after = versions(spark, f"{warehouses}/killed")
    assert {t: after[t] for t in done} == done, "tables committed before the kill are not written again"
    assert warehouse_differences(spark, f"{warehouses}/killed", workload, final["scan_id"]) == []


def test_bad_credentials_exit_2_naming_endpoint_and_bucket_never_the_secret(
    spark, local_s3, workload, tmp_path, monkeypatch, capsys
) -> None:
    locked = local_s3.make_bucket("tidelake-locked")
    monkeypatch.setenv(SECRET_ENV, "wrong-secret-0123456789")
    conf = write_config(tmp_path / "bad.toml", local_s3, f"{locked}/scans", f"{locked}/wh", workload)
    assert main(["run", "--config", str(conf)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert local_s3.endpoint in err and "tidelake-locked" in err and "access" in err, err
    assert "wrong-secret-0123456789" not in err


def test_missing_bucket_exit_2_naming_it(spark, local_s3, workload, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(SECRET_ENV, local_s3.credential)
    conf = write_config(
        tmp_path / "nob.toml",
        local_s3,
        "s3a://tidelake-no-such-bucket/scans",
        "s3a://tidelake-no-such-bucket/wh",
        workload,
    )
    assert main(["run", "--config", str(conf)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "tidelake-no-such-bucket" in err and "does not exist" in err and local_s3.endpoint in err, err
    assert local_s3.credential not in err


@pytest.mark.drill  # long tier (`pytest --drill`): CI covers the demo on disk and the S3 paths above
def test_demo_on_a_local_s3_server(spark, tmp_path, capsys) -> None:
    """`backfill demo --s3`: the captures go to a bucket through the S3 API, the tables land there, and
    reconcile reads them back from it."""
    import json

    conf = tmp_path / "demo.toml"
    sim, wh = tmp_path / "sim", tmp_path / "wh"
    conf.write_text(
        f'[job]\nname = "demo"\n[source]\npath = "{sim / "scans"}"\n[target]\nwarehouse = "{wh}"\n'
        f'[reconcile.upstream]\nkind = "files"\nformat = "expected"\npath = "{sim / "expected"}"\n'
        f'[demo]\nout = "{sim}"\nseed = 4\ntables = 2\nrows = 20\ntxns = 40\nscans = 2\n'
    )
    assert main(["demo", "--config", str(conf), "--s3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["warehouse"] == "s3a://tidelake-demo/warehouse"
    assert report["reconcile"]["status"] == "equal"
    assert all(w["tables"] and w["tables"][0]["path"].startswith("s3a://") for w in report["windows"])
    # S3Proxy's filesystem backend keeps each object as a file: the Delta logs are in the bucket
    logs = list((wh / "s3" / "data" / "tidelake-demo" / "warehouse").glob("*/*/_delta_log/*.json"))
    assert len(logs) >= 2


@pytest.mark.drill  # long tier (`pytest --drill`): CI reads kv-scan captures through the S3 API above
def test_storage_sink_folder_in_a_bucket(
    spark, local_s3, sink_workload, buckets, tmp_path, monkeypatch
) -> None:
    """A TiCDC storage sink's folder (CSV) in a bucket, read through the S3 API, equals the same folder
    read from local disk, and reconcile against the expected state says equal."""
    from reconcile.cli import main as reconcile_main
    from tidelake.conventions import ROWID

    _, warehouses = buckets
    monkeypatch.setenv(SECRET_ENV, local_s3.credential)
    sink = local_s3.make_bucket("tidelake-sink")
    configure(spark, local_s3.object_store())  # whatever an earlier test left on the session
    fs.upload(spark, str(sink_workload / "storage" / "csv"), f"{sink}/cdc")
    local_sink, ref = str(sink_workload / "storage" / "csv"), str(tmp_path / "ref")
    local = write_config(tmp_path / "l.toml", local_s3, local_sink, ref, sink_workload, sink=True)
    remote = write_config(
        tmp_path / "r.toml", local_s3, f"{sink}/cdc", f"{warehouses}/from-sink", sink_workload, sink=True
    )
    last = load_index(sink_workload)[-1]["resolved_ts"]
    assert run_backfill(spark, load_config(local)).resolved_ts == last
    assert main(["run", "--config", str(remote)]) == 0
    assert tables(spark, f"{warehouses}/from-sink") == tables(spark, str(tmp_path / "ref"))
    before = versions(spark, f"{warehouses}/from-sink")
    assert main(["run", "--config", str(remote)]) == 0
    assert versions(spark, f"{warehouses}/from-sink") == before, "a rerun adds no Delta version"
    assert reconcile_main(["run", "--config", str(remote), "--ignore-column", ROWID]) == 0
