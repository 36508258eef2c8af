"""`[source.initial]` killed while it writes the largest table straight from its decode into its commit
(`backfill/initial/load.py`): the kill leaves that table at its creation (version 0, data files no commit
lists) and no other table; the rerun loads each table once."""

from __future__ import annotations

import json

import pytest

from backfill.cli import main as backfill_main
from tests.faults.conftest import SPARK_LINES
from tests.faults.harness import kill_at, untagged_commits
from tests.spark.test_initial_load import MANY_USERS, export, job, sink
from tidelake import delta

pytestmark = [pytest.mark.drill, pytest.mark.spark]


def test_a_load_killed_while_it_writes_the_largest_table_loads_each_table_once(spark, tmp_path) -> None:
    sink(tmp_path)
    conf = job(tmp_path, export(tmp_path, users=MANY_USERS))
    conf.write_text(conf.read_text() + SPARK_LINES)
    warehouse = tmp_path / "wh"
    users, kinds = warehouse / "app" / "users", warehouse / "app" / "kinds"

    kill_at("initial.write", "backfill", "run", "--config", str(conf), "--quiet", workdir=tmp_path)
    assert delta.table_version(spark, str(users)) == 0
    assert not kinds.exists()
    assert untagged_commits(warehouse, "tidelake:snap") == []

    assert backfill_main(["run", "--config", str(conf), "--quiet"]) == 0
    got = spark.read.format("delta").load(str(users))
    assert sorted(r.id for r in got.collect()) == list(range(1, 41))
    snapshot = json.loads(delta.commit_user_metadata(spark, str(users), 1) or "{}")
    assert (snapshot["step"], snapshot["rows"]["upserted"]) == ("snapshot", 40), snapshot
    assert spark.read.format("delta").load(str(kinds)).count() == 1
