"""spark-submit entrypoint for the backfill.

    spark-submit --master spark://host:7077 --jars .cache/jars/delta-spark_2.13-4.0.1.jar,... \\
        jobs/backfill_job.py run --config conf/prod.toml --json

The session spark-submit configured is built here, used by the package, and stopped at the end.
"""

import sys

from backfill.cli import main
from tidelake.spark import open_session

if __name__ == "__main__":
    session = open_session("tidelake-backfill")
    try:
        code = main(sys.argv[1:])
    finally:
        session.close()
    sys.exit(code)
