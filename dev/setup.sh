#!/usr/bin/env bash
# Set up tidelake on a new machine (Python 3.11, JDK 17, Maven): a virtual environment with the pinned
# packages in .venv/, and the JVM packages for spark.jars in .cache/jars/. Safe and fast to rerun.
#   dev/setup.sh          what the demo and the jobs need
#   dev/setup.sh --test   also the MariaDB server (Debian package mariadb-server) the integration tests start,
#                         and headless Chromium (Debian package chromium) that renders reconcile's HTML report
set -euo pipefail
with_tests=0
[ "${1:-}" = "--test" ] && with_tests=1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "setup: tidelake needs Python 3.11 ($python is $("$python" -V 2>&1))" >&2; exit 2; }
command -v java >/dev/null || { echo "setup: java (JDK 17) is not on PATH" >&2; exit 2; }
command -v mvn >/dev/null || { echo "setup: mvn (Maven) is not on PATH" >&2; exit 2; }

# 1. Python packages, reinstalled only when pyproject.toml changed.
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.tidelake-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages into .venv (first run takes a few minutes)" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[dev]"
  echo "$want" > "$stamp"
fi

# 2. JVM packages from Maven Central, copied once into .cache/jars (Spark's own jars excluded).
jars=.cache/jars
jstamp=$jars/.stamp
jwant=$(sha256sum dev/jars/pom.xml | cut -d' ' -f1)
if [ "$(cat "$jstamp" 2>/dev/null)" != "$jwant" ]; then
  echo "setup: fetching JVM packages into $jars" >&2
  rm -rf "$jars" && mkdir -p "$jars"
  mvn -q -f dev/jars/pom.xml dependency:copy-dependencies -DoutputDirectory="$root/$jars" \
      -DincludeScope=runtime -DexcludeGroupIds=org.scala-lang,org.antlr
  echo "$jwant" > "$jstamp"
fi
# 3. MariaDB for the integration tests (the test set-up starts its own server from this package), and
#    Chromium, in which a test opens reconcile's HTML report.
if [ "$with_tests" = 1 ]; then
  wanted=()
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || wanted+=(mariadb-server)
  command -v chromium >/dev/null || wanted+=(chromium)
  if [ ${#wanted[@]} -gt 0 ]; then
    echo "setup: installing ${wanted[*]} (Debian packages)" >&2
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${wanted[@]}" >/dev/null
  fi
fi
echo "setup: ready ($(ls "$jars"/*.jar | wc -l) jars in $jars)" >&2
