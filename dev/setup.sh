#!/usr/bin/env bash
# Set up tidelake on a new machine (Python 3.11, JDK 17, Maven): a virtual environment with the pinned
# packages in .venv/, and the JVM packages for spark.jars in .cache/jars/. Safe and fast to rerun.
#   dev/setup.sh          what the demo and the jobs need
#   dev/setup.sh --test   also what the tests start: the MariaDB server (Debian package mariadb-server) and
#                         an Apache Kafka broker (KRaft, jars from Maven Central into .cache/kafka/)
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
  mvn -q -s dev/maven-settings.xml -f dev/jars/pom.xml dependency:copy-dependencies -DoutputDirectory="$root/$jars" \
      -DincludeScope=runtime -DexcludeGroupIds=org.scala-lang,org.antlr
  echo "$jwant" > "$jstamp"
fi
# 3. The Kafka broker the tests start (tests/servers.py), from its own pom: never on spark.jars.
kafka=.cache/kafka
kstamp=$kafka/.stamp
kwant=$(sha256sum dev/kafka/pom.xml | cut -d' ' -f1)
if [ "$with_tests" = 1 ] && [ "$(cat "$kstamp" 2>/dev/null)" != "$kwant" ]; then
  echo "setup: fetching the Kafka broker into $kafka" >&2
  rm -rf "$kafka" && mkdir -p "$kafka"
  mvn -q -s dev/maven-settings.xml -f dev/kafka/pom.xml dependency:copy-dependencies \
      -DoutputDirectory="$root/$kafka" -DincludeScope=runtime
  echo "$kwant" > "$kstamp"
fi
# 4. MariaDB for the integration tests; the test set-up starts its own server from this package.
if [ "$with_tests" = 1 ] && ! command -v mariadbd >/dev/null && [ ! -x /usr/sbin/mariadbd ]; then
  echo "setup: installing mariadb-server (Debian package)" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mariadb-server >/dev/null
fi
echo "setup: ready ($(ls "$jars"/*.jar | wc -l) jars in $jars)" >&2
