#!/usr/bin/env bash
# Set up tidelake on a new machine (Python 3.11, JDK 17, Maven): a virtual environment with the pinned
# packages in .venv/, and the JVM packages for spark.jars in .cache/jars/. Safe and fast to rerun.
#   dev/setup.sh          what the demo and the jobs need
#   dev/setup.sh --test   also what the tests start: the MariaDB server (Debian package mariadb-server),
#                         an Apache Kafka broker (KRaft, jars from Maven Central into .cache/kafka/) and
#                         Toxiproxy (built with `go install` into .cache/toxiproxy/)
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

# 2. JVM packages from Maven Central, each set copied once into its own folder under .cache (refetched only
#    when its pom changed). Groups that Spark ships itself are left out of spark.jars.
cache_jars() {  # cache_jars POM DIR [MAVEN_ARGS...]
  local pom=$1 dir=$2; shift 2
  local want; want=$(sha256sum "$pom" | cut -d' ' -f1)
  [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$want" ] && return 0
  echo "setup: fetching JVM packages into $dir" >&2
  rm -rf "$dir" && mkdir -p "$dir"
  # Spark's parent POM names repositories besides Maven Central: the settings send every download there.
  mvn -q -s dev/maven-settings.xml -f "$pom" dependency:copy-dependencies -DoutputDirectory="$root/$dir" \
      -DincludeScope=runtime "$@"
  echo "$want" > "$dir/.stamp"
}
jars=.cache/jars
cache_jars dev/jars/pom.xml "$jars" \
  -DexcludeGroupIds=org.scala-lang,org.antlr,io.netty,org.apache.httpcomponents,commons-codec,commons-logging,org.slf4j
# S3Proxy (a real S3 API server on 127.0.0.1) for the tests and the demo with its s3 flag; never on spark.jars.
cache_jars dev/s3proxy/pom.xml .cache/s3proxy
# 3. The Kafka broker the tests start (tests/servers.py), from its own pom: never on spark.jars.
if [ "$with_tests" = 1 ]; then cache_jars dev/kafka/pom.xml .cache/kafka; fi
# 3a. Derby's network server and client: the tests' metastore database behind a fault proxy.
if [ "$with_tests" = 1 ]; then cache_jars dev/derby/pom.xml .cache/derby; fi
# 3b. Toxiproxy, the fault proxy the network-fault tests put between tidelake and each server
#     (tests/toxiproxy.py), built once from the Go module proxy (about a minute; needs Go).
toxiproxy_version=v2.12.0
if [ "$with_tests" = 1 ] && [ "$(cat .cache/toxiproxy/.version 2>/dev/null)" != "$toxiproxy_version" ]; then
  go=$(command -v go || echo /usr/local/go/bin/go)
  [ -x "$go" ] || { echo "setup: go is not on PATH (the tests build Toxiproxy with it)" >&2; exit 2; }
  echo "setup: building Toxiproxy $toxiproxy_version into .cache/toxiproxy" >&2
  GOBIN="$root/.cache/toxiproxy" "$go" install "github.com/Shopify/toxiproxy/v2/cmd/server@$toxiproxy_version"
  echo "$toxiproxy_version" > .cache/toxiproxy/.version
fi
# 4. MariaDB for the integration tests (the test set-up starts its own server from this package), and
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
# 5. A class-data archive for the driver JVM (tidelake/classarchive.py): dev/class_archive.py writes it once
#    with a small demo (a minute or two), again only when the JDK or pyspark's jars change; every session tidelake starts maps it and
#    reaches its first job seconds sooner. Without it everything works, only slower to start. The test set-up
#    leaves it out (CI's time limit); `dev/setup.sh` without --test writes it, and the tests use it then.
if [ "$with_tests" = 0 ]; then
  .venv/bin/python dev/class_archive.py || echo "setup: warning: no class archive (see above); sessions start without one" >&2
fi
echo "setup: ready ($(ls "$jars"/*.jar | wc -l) jars in $jars)" >&2
