"""Airflow DAG: back-fill every 15 minutes, then reconcile; a difference fails the DAG run.

Both tasks `spark-submit` the installed package's `backfill/__main__.py` and `reconcile/__main__.py` (they
run the command line with the SparkSession spark-submit configured and exit with the command's status).
`reconcile` exits 1 when tables differ and 2 when it cannot compare, spark-submit passes that status on,
and SparkSubmitOperator fails the task on any non-zero status, so the DAG run fails. Progress goes to the
task log as JSON lines (`--log-format json`), the result to stdout as one JSON object, the JUnit/HTML
reports to `REPORTS`.

Set-up (docs/cluster.md): the `apache-airflow-providers-apache-spark` provider, a `spark_default`
connection to the cluster's master, and on the Airflow worker a venv with the wheel
(`python3.11 -m venv /opt/tidelake-env && /opt/tidelake-env/bin/pip install tidelake-*.whl venv-pack`),
its jars (`TIDELAKE_JARS=/opt/tidelake-env/jars /opt/tidelake-env/bin/backfill jars`) and the venv packed
for the executors (`venv-pack -p /opt/tidelake-env -o /opt/tidelake-env.tar.gz --exclude
'lib/python*/site-packages/pyspark/jars/*'`). Adjust `VENV` and `CONFIG`.
tests/unit/test_examples.py checks the commands below against the CLI (a drift guard).
"""

from __future__ import annotations

import datetime as dt

VENV = "/opt/tidelake-env"  # the venv the wheel is installed in, on the Airflow worker
SITE = f"{VENV}/lib/python3.11/site-packages"
ENVIRONMENT = f"{VENV}.tar.gz#environment"  # the venv packed for the executors
CONFIG = "/etc/tidelake/prod.toml"
REPORTS = "/var/log/tidelake/reports"
JARS = ",".join(f"{VENV}/jars/{jar}" for jar in ("delta-spark_2.13-4.0.1.jar", "delta-storage-4.0.1.jar"))
PYTHON = {
    "spark.pyspark.driver.python": f"{VENV}/bin/python",
    "spark.pyspark.python": "./environment/bin/python",
}

BACKFILL_APPLICATION = f"{SITE}/backfill/__main__.py"
BACKFILL_ARGS = ["run", "--config", CONFIG, "--json", "--log-format", "json", "--progress-interval", "60"]
RECONCILE_APPLICATION = f"{SITE}/reconcile/__main__.py"
RECONCILE_ARGS = [
    "run", "--config", CONFIG, "--json", "--max-diff", "0", "--log-format", "json",
    "--junit", f"{REPORTS}/reconcile-{{{{ ts_nodash }}}}.xml",
    "--html", f"{REPORTS}/reconcile-{{{{ ts_nodash }}}}.html",
]  # fmt: skip

try:  # the constants above stay importable without Airflow (the drift guard reads them)
    from airflow import DAG
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
except ImportError:  # pragma: no cover - only where Airflow is installed
    DAG = None

if DAG is not None:
    with DAG(
        dag_id="tidelake",
        schedule="*/15 * * * *",
        start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        catchup=False,
        max_active_runs=1,  # a run never overlaps the next: each backfill starts at the last checkpoint
        default_args={"retries": 1, "retry_delay": dt.timedelta(minutes=2)},
        tags=["tidelake"],
    ) as dag:
        backfill = SparkSubmitOperator(
            task_id="backfill",
            application=BACKFILL_APPLICATION,
            application_args=BACKFILL_ARGS,
            conn_id="spark_default",
            jars=JARS,
            archives=ENVIRONMENT,
            conf=PYTHON,
            name="tidelake-backfill",
        )
        reconcile = SparkSubmitOperator(
            task_id="reconcile",
            application=RECONCILE_APPLICATION,
            application_args=RECONCILE_ARGS,
            conn_id="spark_default",
            jars=JARS,
            archives=ENVIRONMENT,
            conf=PYTHON,
            name="tidelake-reconcile",
            retries=0,  # a difference is a finding, not a flake
        )
        backfill >> reconcile
