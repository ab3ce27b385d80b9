#!/usr/bin/env bash
# go-sql-driver/mysql's own test suite (Debian's golang-github-go-sql-driver-mysql-dev,
# which ships driver_test.go and the rest) run twice, straight against the
# master of shard 1 and through shardgate, and compared test by test.
#
#   integration/drivers/go/run_upstream.sh --port 6033 [--host 127.0.0.1] [--master-a 3307]
#       [--results DIR] [--update-differences]
#
# Both runs use the database db00001: directly as shard/shardpw on
# --master-a, through the proxy as app/app. A test that passes directly but
# fails, is skipped or does not run through the proxy fails the comparison
# unless known_differences.txt lists it with its reason; a listed test that
# now passes through the proxy fails it too (the entry is stale: remove it),
# and so does one that does not pass directly (e.g. the data account lacks
# CREATE/DROP on db00001, so the direct run is no baseline).
# --update-differences rewrites known_differences.txt to today's
# differences (reasons of entries that remain are kept, new ones get
# "TODO: explain"). Offline: GOPATH mode (GO111MODULE=off) over a copy of the
# Debian source, no downloads. The per-run `go test -json` output and each
# failing test's output are kept in --results (default: a temporary directory).
# Other options (--master-b, --mod-host) are accepted and ignored, so the
# driver conformance runner can pass its usual arguments.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="${GO_SQL_DRIVER_SRC:-/usr/share/gocode/src/github.com/go-sql-driver/mysql}"
HOST=127.0.0.1
PORT=
BACKEND_HOST=127.0.0.1
MASTER_A=3307
USER_PROXY=app
PASS_PROXY=app
USER_DIRECT=shard
PASS_DIRECT=shardpw
DBNAME=db00001
RESULTS=
UPDATE=()

die() { printf 'run_upstream: %s\n' "$*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --host) HOST="$2"; shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        --backend-host) BACKEND_HOST="$2"; shift 2 ;;
        --master-a) MASTER_A="$2"; shift 2 ;;
        --master-b|--mod-host) shift 2 ;;
        --results) RESULTS="$2"; shift 2 ;;
        --update-differences) UPDATE=(--update); shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[ -n "$PORT" ] || die "--port (the proxy's port) is required"
command -v go >/dev/null 2>&1 || die "go is missing: run integration/drivers/setup.sh (Debian's golang-go)"
[ -f "$SRC/driver_test.go" ] || die "$SRC/driver_test.go is missing: run integration/drivers/setup.sh (golang-github-go-sql-driver-mysql-dev)"
command -v mariadb >/dev/null 2>&1 || die "the mariadb client is missing: integration/fleet.sh install"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/shardgate-go-upstream.XXXXXX")"
CLEAN_AT_EXIT=0
# The tests' tables must not outlive the run (VERIFY FLEET would see them).
trap '[ "$CLEAN_AT_EXIT" -eq 0 ] || clean_db; rm -rf "$WORK"' EXIT
if [ -z "$RESULTS" ]; then
    RESULTS="$WORK/results"
fi
mkdir -p "$RESULTS"

# GOPATH mode over a private copy, so the build never writes to /usr/share.
PKG="$WORK/gopath/src/github.com/go-sql-driver/mysql"
mkdir -p "$(dirname "$PKG")"
cp -r "$SRC" "$PKG"
export GO111MODULE=off GOPATH="$WORK/gopath" GOFLAGS= GOPROXY=off GOTOOLCHAIN=local
if [ -z "${GOCACHE:-}${XDG_CACHE_HOME:-}${HOME:-}" ]; then
    export GOCACHE="$WORK/gocache"
fi
echo "go-sql-driver/mysql tests from $SRC ($(dpkg-query -W -f='${Package} ${Version}' golang-github-go-sql-driver-mysql-dev 2>/dev/null || echo 'not a Debian package')), $(go version)"
(cd "$PKG" && go test -c -o "$WORK/mysql.test" .) || die "the test binary did not build"

# Tables the tests create (and some leave behind), and their procedures
# (which the data account may not drop: then it could not create them either).
clean_db() {
    local cli=(mariadb -h"$BACKEND_HOST" -P"$MASTER_A" -u"$USER_DIRECT" -p"$PASS_DIRECT" "$DBNAME")
    "${cli[@]}" -e "DROP TABLE IF EXISTS test, testValuer" 2>"$WORK/clean.err" \
        || echo "note: could not drop the tests' tables in $DBNAME on port $MASTER_A: $(cat "$WORK/clean.err")"
    "${cli[@]}" -e "DROP PROCEDURE IF EXISTS test_signal; DROP PROCEDURE IF EXISTS test_mrss" 2>/dev/null || true
}

# run NAME USER PASS ADDR: the suite, verbose, as go test -json lines.
run() {
    local name="$1" user="$2" pass="$3" addr="$4"
    clean_db
    echo "== $name: $user@$addr/$DBNAME"
    local started=$SECONDS
    # TestConcurrent (MYSQL_TEST_CONCURRENT) opens max_connections connections: not on a shared fleet.
    (cd "$PKG" && env MYSQL_TEST_USER="$user" MYSQL_TEST_PASS="$pass" MYSQL_TEST_PROT=tcp \
        MYSQL_TEST_ADDR="$addr" MYSQL_TEST_DBNAME="$DBNAME" MYSQL_TEST_CONCURRENT= \
        "$WORK/mysql.test" -test.v -test.count=1 -test.timeout=10m 2>&1 \
        | go tool test2json -t -p github.com/go-sql-driver/mysql >"$RESULTS/$name.json") || true
    echo "   $((SECONDS - started))s"
}

CLEAN_AT_EXIT=1
run direct "$USER_DIRECT" "$PASS_DIRECT" "$BACKEND_HOST:$MASTER_A"
run proxy "$USER_PROXY" "$PASS_PROXY" "$HOST:$PORT"

python3 "$HERE/compare_upstream.py" --direct "$RESULTS/direct.json" --proxy "$RESULTS/proxy.json" \
    --known "$HERE/known_differences.txt" --out "$RESULTS" "${UPDATE[@]}"
