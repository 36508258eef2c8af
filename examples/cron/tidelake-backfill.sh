#!/usr/bin/env bash
# Back-fill, then reconcile, from cron with spark-submit; exits non-zero (and cron mails) on a difference.
#   */15 * * * *  tidelake  /opt/tidelake/examples/cron/tidelake-backfill.sh >> /var/log/tidelake/cron.log 2>&1
# flock skips a run while the previous one still works (each backfill starts at the last checkpoint).
# Progress lines go to stderr every 60 s (no TTY under cron); each result is one JSON line in $OUT.
# tests/unit/test_examples.py checks the argument arrays below against the CLI (a drift guard).
set -euo pipefail
TIDELAKE=${TIDELAKE:-/opt/tidelake}
CONF=${CONF:-$TIDELAKE/conf/prod.toml}
MASTER=${MASTER:-spark://spark-master:7077}
OUT=${OUT:-/var/log/tidelake}
JARS=$(ls "$TIDELAKE"/.cache/jars/*.jar | paste -sd,)

BACKFILL_ARGS=(run --config "$CONF" --json --progress-interval 60)
RECONCILE_ARGS=(run --config "$CONF" --json --max-diff 0 --progress-interval 60 --junit "$OUT/reconcile.xml")

exec 9>"$OUT/tidelake.lock"
flock -n 9 || { echo "tidelake: previous run still active, skipping" >&2; exit 0; }
cd "$TIDELAKE"
spark-submit --master "$MASTER" --jars "$JARS" jobs/backfill_job.py "${BACKFILL_ARGS[@]}" \
  | tr -d '\n' >> "$OUT/backfill.jsonl"
echo >> "$OUT/backfill.jsonl"
status=0
spark-submit --master "$MASTER" --jars "$JARS" jobs/reconcile_job.py "${RECONCILE_ARGS[@]}" \
  | tr -d '\n' >> "$OUT/reconcile.jsonl" || status=$?
echo >> "$OUT/reconcile.jsonl"
exit "$status"
