"""Write the driver JVM's class-data archive (tidelake/classarchive.py) with a small demo; dev/setup.sh runs it.

    .venv/bin/python dev/class_archive.py                  # write it unless one is there for this JDK and jars
    .venv/bin/python dev/class_archive.py --train ARCHIVE WORK   # (the JVM that writes ARCHIVE at exit)

The archive is the shared runtime's; the workload that fills it (simulate, back-fill two windows,
reconcile) is the product's, so it is run from here and the runtime imports nothing of the product.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from backfill.demo import run_demo
from tidelake import classarchive
from tidelake.config import DemoConfig, load_config
from tidelake.spark import build_session, class_archive_dir, driver_java_options


def train(archive: Path, work: Path) -> None:
    """A small demo in a JVM that writes `archive` at exit."""
    config = load_config(None)
    config = replace(
        config,
        source=replace(config.source, path=str(work / "sim" / "scans")),
        target=replace(config.target, warehouse=str(work / "warehouse")),
        reconcile=replace(
            config.reconcile, upstream=replace(config.reconcile.upstream, path=str(work / "sim" / "expected"))
        ),
        demo=DemoConfig(out=str(work / "sim"), seed=1, tables=2, rows=200, txns=60, scans=3),
    )
    options = f"{driver_java_options(config.spark)} -XX:ArchiveClassesAtExit={archive}"
    spark_config = replace(config.spark, conf={**config.spark.conf, "spark.driver.extraJavaOptions": options})
    spark = build_session("tidelake-class-archive", spark_config, config.target)
    try:
        result = run_demo(spark, config)
    finally:
        spark.stop()
        classarchive.wait_for_jvm_exit()
    if result.exit_code != 0:
        raise RuntimeError(f"the demo that writes the class archive ended with exit {result.exit_code}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--train"]:
        train(Path(argv[1]), Path(argv[2]))
        return 0
    where = class_archive_dir()
    written = classarchive.write_archive(where, [sys.executable, str(Path(__file__).resolve()), "--train"])
    print(f"setup: class archive {'written' if written else 'up to date'} in {where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
