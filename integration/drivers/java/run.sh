#!/usr/bin/env bash
# MariaDB Connector/J (Debian's libmariadb-java) through shardgate: compiles
# ConnectorJConformance.java against the jar with javac (no Maven, no
# network) and runs it; the arguments go to the program.
#
#   integration/drivers/java/run.sh --port 6033 [--master-a 3307 --master-b 3308] [--seed N]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JAR="${MARIADB_JAVA_CLIENT_JAR:-/usr/share/java/mariadb-java-client.jar}"
[ -f "$JAR" ] || { echo "$JAR is missing: run integration/drivers/setup.sh (libmariadb-java)" >&2; exit 2; }
command -v javac >/dev/null 2>&1 || { echo "javac is missing: run integration/drivers/setup.sh (default-jdk-headless)" >&2; exit 2; }
OUT="$(mktemp -d "${TMPDIR:-/tmp}/shardgate-connectorj.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
javac -encoding UTF-8 -Xlint:all -Werror -cp "$JAR" -d "$OUT" "$HERE/ConnectorJConformance.java"
exec java -Dfile.encoding=UTF-8 -cp "$JAR:$OUT" ConnectorJConformance "$@"
