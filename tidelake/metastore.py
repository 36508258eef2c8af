"""The Spark settings of the metastore that tables are registered in (docs/operations.md "Tables by name").

Embedded by default: a Derby database and Spark's managed-table folder under one local folder, with
Derby's own files (derby.log) there too, never in the working directory. An external Hive metastore
(`[target] metastore_uri`) is passed through as `hive.metastore.uris`. Only for sessions tidelake makes;
a session given by spark-submit keeps its own catalog.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidelake.config import TargetConfig

DEFAULT_REMOTE_WAREHOUSE_DIR = Path(".tidelake") / "metastore"


def metastore_dir(target: TargetConfig) -> Path:
    """The embedded metastore's folder: the config's, else `metastore/` beside a local warehouse, else
    `.tidelake/metastore` (a warehouse in a bucket has no local parent)."""
    if target.metastore_dir:
        return Path(target.metastore_dir).absolute()
    warehouse = target.warehouse.removeprefix("file://").removeprefix("file:")
    if "://" in warehouse:
        return DEFAULT_REMOTE_WAREHOUSE_DIR.absolute()
    return Path(warehouse).absolute().parent / "metastore"


def metastore_settings(target: TargetConfig) -> dict[str, str]:
    """Spark conf for a Hive-enabled session catalog (empty when registration is off)."""
    if not target.register:
        return {}
    settings = {"spark.sql.catalogImplementation": "hive"}
    if target.metastore_uri:
        settings["spark.hadoop.hive.metastore.uris"] = target.metastore_uri
        return settings
    folder = metastore_dir(target)
    folder.mkdir(parents=True, exist_ok=True)
    settings |= {
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
        ),
        "spark.sql.warehouse.dir": (folder / "managed").as_uri(),
        # Hive retries opening a Derby database another process holds 10 times, 2 s apart, before it
        # fails: each of `open_metastore`'s attempts then took 20 s, past any deadline it was given.
        "spark.hadoop.hive.hmshandler.retry.attempts": "1",
    }
    return settings


def derby_java_options(target: TargetConfig) -> str:
    """JVM options that keep Derby's files (derby.log) in the metastore folder."""
    if not target.register or target.metastore_uri:
        return ""
    return f"-Dderby.system.home={metastore_dir(target)}"


def spark_sql_args(target: TargetConfig) -> list[str]:
    """The `spark-sql`/`spark-submit` flags that open the same metastore as tidelake's own sessions
    (docs/operations.md "Tables by name" shows them for the demo); add `--jars` with the Delta jars."""
    args = [
        "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
        "--conf", "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
    ]  # fmt: skip
    for key, value in metastore_settings(target).items():
        args += ["--conf", f"{key}={value}"]
    if derby_java_options(target):
        args += ["--driver-java-options", derby_java_options(target)]
    return args
