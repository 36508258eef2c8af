#!/usr/bin/env bash
# Back-fill, then reconcile, from cron with spark-submit; exits non-zero (and cron mails) on a difference.
#   */15 * * * *  tidelake  /usr/local/bin/tidelake-backfill.sh >> /var/log/tidelake/cron.log 2>&1
# Runs from the installed package (docs/cluster.md): a venv with the wheel, and that venv packed for the
# executors with venv-pack; `backfill jars` fetched the jars once (it only checks them afterwards).
# flock skips a run while the previous one still works (each backfill starts at the last checkpoint).
# Progress lines every 60 s (no TTY under cron) go to the cron log: spark-submit passes the driver's stderr
# on as its stdout, so each result is written with --output and appended as one JSON line in $OUT.
# tests/unit/test_examples.py checks the argument arrays below against the CLI (a drift guard).
set -euo pipefail
VENV=${VENV:-/opt/tidelake-env}
CONF=${CONF:-/etc/tidelake/prod.toml}
MASTER=${MASTER:-spark://spark-master:7077}
OUT=${OUT:-/var/log/tidelake}
JARS=$("$VENV/bin/backfill" jars)
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python" PYSPARK_PYTHON=./environment/bin/python
SUBMIT=(spark-submit --master "$MASTER" --jars "$JARS" --archives "$VENV.tar.gz#environment")

BACKFILL_ARGS=(run --config "$CONF" --output "$OUT/backfill.json" --progress-interval 60)
RECONCILE_ARGS=(run --config "$CONF" --output "$OUT/reconcile.json" --max-diff 0 --progress-interval 60 --junit "$OUT/reconcile.xml")

exec 9>"$OUT/tidelake.lock"
flock -n 9 || { echo "tidelake: previous run still active, skipping" >&2; exit 0; }
append() { tr -d '\n' < "$OUT/$1.json" >> "$OUT/$1.jsonl" && echo >> "$OUT/$1.jsonl"; }
"${SUBMIT[@]}" "$SITE/backfill/__main__.py" "${BACKFILL_ARGS[@]}"
append backfill
status=0
"${SUBMIT[@]}" "$SITE/reconcile/__main__.py" "${RECONCILE_ARGS[@]}" || status=$?
[ "$status" -le 1 ] && append reconcile
exit "$status"
