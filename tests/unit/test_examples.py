"""Drift guard for `examples/`: the Airflow DAG's and the cron script's commands must parse with our CLIs.

Airflow itself is too heavy for CI, so the DAG module is imported without it (its commands are plain
constants) and each command is parsed by the real click command behind `backfill`/`reconcile`, the
way the package's `__main__.py` files that spark-submit runs hand it over: an option that was renamed or
removed fails here.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import pytest
import typer

from backfill.cli import app as backfill_app
from reconcile.cli import app as reconcile_app
from tidelake.output import OutputStyle

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
APPS = {
    "backfill/__main__.py": ("backfill", backfill_app),
    "reconcile/__main__.py": ("reconcile", reconcile_app),
}


def parse(job: str, args: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """Parse `args` as the job's entrypoint would, without running anything: (subcommand, its params)."""
    assert job in APPS, f"{job} is not one of our spark-submit applications"
    assert (ROOT / job).is_file()
    prog, app = APPS[job]
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    with group.make_context(prog, list(args), resilient_parsing=False) as ctx:
        name, command, rest = group.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        assert command is not None and name is not None
        with command.make_context(name, rest, parent=ctx) as sub:
            params = dict(sub.params)
    OutputStyle(
        params.get("quiet", False), params.get("log_format", "text"), params.get("progress_interval", 1.0)
    )
    return name, params


def load_dag() -> Any:
    spec = importlib.util.spec_from_file_location("tidelake_dag", ROOT / "examples/airflow/tidelake_dag.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_airflow_dag_submits_our_entrypoints_with_valid_commands() -> None:
    dag = load_dag()
    backfill_job = str(Path(dag.BACKFILL_APPLICATION).relative_to(dag.SITE))
    reconcile_job = str(Path(dag.RECONCILE_APPLICATION).relative_to(dag.SITE))
    name, params = parse(backfill_job, dag.BACKFILL_ARGS)
    assert name == "run" and params["as_json"] and params["log_format"] == "json"
    name, params = parse(reconcile_job, dag.RECONCILE_ARGS)
    assert name == "run" and reconcile_job == "reconcile/__main__.py"
    assert dag.PYTHON["spark.pyspark.python"] == "./environment/bin/python"
    assert dag.ENVIRONMENT.endswith("#environment")
    assert params["max_diff"] == 0 and params["junit"] is not None and params["html"] is not None
    pom = (ROOT / "dev/jars/pom.xml").read_text()
    for jar in dag.JARS.split(","):  # the Delta jars dev/setup.sh fetches, at the pinned version
        artifact, version = re.fullmatch(r"(delta-[a-z]+(?:_2\.13)?)-([\d.]+)\.jar", Path(jar).name).groups()
        assert f"<version>{version}</version>" in pom and artifact.startswith("delta-")


def test_the_cron_script_submits_our_entrypoints_with_valid_commands() -> None:
    script = (ROOT / "examples/cron/tidelake-backfill.sh").read_text()
    arrays = {
        m.group(1): shlex.split(m.group(2)) for m in re.finditer(r"^(\w+_ARGS)=\((.*)\)$", script, re.M)
    }
    jobs = dict(re.findall(r"\$SITE/(\w+/__main__\.py)\" \"\$\{(\w+_ARGS)\[@\]\}\"", script))
    assert set(jobs) == set(APPS) and set(jobs.values()) == set(arrays)
    for job, array in jobs.items():
        name, params = parse(job, arrays[array])
        assert name == "run" and params["output"] is not None  # stdout holds the driver's stderr too
    assert parse("reconcile/__main__.py", arrays["RECONCILE_ARGS"])[1]["max_diff"] == 0
    assert '--archives "$VENV.tar.gz#environment"' in script


def test_the_guard_itself_catches_a_renamed_option() -> None:
    with pytest.raises(click.NoSuchOption):
        parse("reconcile/__main__.py", ["run", "--junit-xml", "x.xml"])
    with pytest.raises(ValueError, match="--log-format"):
        parse("backfill/__main__.py", ["run", "--log-format", "yaml"])
