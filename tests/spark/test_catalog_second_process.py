"""The README's promise: after a backfill, a separate Spark process (the `spark-sql` CLI, with the flags
`tidelake.metastore.spark_sql_args` gives and the README shows) finds the tables by name in the same
embedded metastore. Two JVMs of their own (the shared session keeps its own metastore), hence slow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import CHECKOUT
from tests.captures import Capture, users_table
from tidelake.config import load_config
from tidelake.jars import jar_cache
from tidelake.metastore import spark_sql_args

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.drill]  # long tier: `pytest --drill`


def test_spark_sql_in_another_process_sees_the_registered_table(tmp_path: Path) -> None:
    users = users_table()
    cap = Capture(
        tmp_path / "scans", "s1", checkpoint_ts=100, current_ts=400, tables=[("app", users)], jobs=[]
    )
    for handle in (1, 2, 3):
        cap.put(1, users, handle, {2: f"u{handle}", 3: handle}, 110 + handle, 111 + handle)
    cap.init_and_resolve(390).write()
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'[job]\nname = "cat"\n[source]\npath = "{tmp_path / "scans"}"\n'
        f'[target]\nwarehouse = "{tmp_path / "wh"}"\n[spark]\nmaster = "local[1]"\ndriver_memory = "1g"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    run = subprocess.run(
        [sys.executable, "-m", "backfill", "run", "--config", str(conf), "--json", "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "metastore" / "metastore_db").is_dir()  # beside the warehouse, not in the cwd
    assert (tmp_path / "metastore" / "derby.log").is_file() and not (tmp_path / "derby.log").exists()

    jars = ",".join(str(p) for p in sorted(jar_cache().glob("delta-*.jar")))
    venv_bin = Path(sys.executable).parent  # spark-sql finds its SPARK_HOME through the venv's python3
    query = subprocess.run(
        ["spark-sql", "--master", "local[1]", "--jars", jars, *spark_sql_args(load_config(conf).target),
         "-S", "-e", "SELECT count(*), max(name) FROM app.users"],
        cwd=tmp_path, env={**env, "PATH": f"{venv_bin}{os.pathsep}{env['PATH']}"}, capture_output=True, text=True,
        timeout=1200,
    )  # fmt: skip
    assert query.returncode == 0, query.stderr[-3000:]
    assert query.stdout.strip().splitlines()[-1].split() == ["3", "u3"]
    assert not (tmp_path / "metastore_db").exists()
