#!/usr/bin/env bash
# MySQL Connector/Python's own test suite (the tests/ of its PyPI sdist, the
# version the virtualenv has, fetched by fetch.sh) run twice at once, straight
# against the master of shards 1-2 and through shardgate, and compared test by
# test with integration/drivers/go/compare_upstream.py.
#
#   integration/drivers/python_upstream/run_upstream.sh --port 6033 [--host 127.0.0.1]
#       [--master-a 3307] [--results DIR] [--update-differences]
#
# The direct run uses db00002 as shard/shardpw on --master-a, the run through
# the proxy db00001 (on the same server) as app/app; separate databases let
# the two runs go in parallel. A test that passes directly but fails, is
# skipped or does not finish through the proxy fails the comparison unless
# known_differences.txt lists it with its reason; a listed test that now
# passes through the proxy fails it too (stale entry), and so does one that
# does not pass directly. --update-differences rewrites the list.
#
# The modules (MODULES below) are the ones that talk to a server through the
# classic protocol, pure Python and C extension, sync and asyncio. Left out:
# test_django and otel (need Django / OpenTelemetry), ai (MySQL HeatWave
# AI), qa/test_qa_timeout and qa/test_qa_aio_timeout (90 s of deliberate
# waits each), qa/test_qa_vector_type (MySQL 9's VECTOR type; MariaDB has
# none), qa/test_qa_ciphers (needs TLS, which neither server here offers the
# test as it expects); tests of no server (test_constants, test_conversion,
# test_protocol, test_utils, test_errors, test_errorcode, test_optionfiles)
# compare nothing. The suite's unittests.py is not used: its
# --use-external-server drops and creates a database `myconnpy`, which the
# proxy does not route. Tests that need what the data account lacks (CREATE
# ROUTINE, RELOAD, the mysql schema, creating users) fail directly and are not
# compared. Each test fails after --test-timeout (20 s) in run_suite.py.
# Other options (--master-b, --mod-host) are accepted and ignored.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
PYTHON="$ROOT/integration/.venv/bin/python"
SRC="$ROOT/integration/.venv/connector-python-src"
HOST=127.0.0.1
PORT=
BACKEND_HOST=127.0.0.1
MASTER_A=3307
RESULTS=
UPDATE=()
MODULES=(
    test_abstracts test_aio_connection test_aio_cursor test_aio_pooling test_authentication
    test_bugs test_connection test_cursor test_data_integrity test_examples test_locales
    test_mysql_datatypes test_network test_pep249 test_pooling
    cext.test_cext_api cext.test_cext_connection cext.test_cext_cursor
    qa.test_qa_aio_connection_api qa.test_qa_bug16217743 qa.test_qa_caching_sha2_password
    qa.test_qa_connection_api qa.test_qa_local_infile qa.test_qa_multi_statement
    qa.test_qa_wl16752 qa.test_qa_wl3253 qa.test_qa_wl411 qa.test_qa_wl6080 qa.test_qa_wl6148
    qa.test_qa_wl6149 qa.test_qa_wl6351 qa.test_qa_wl6455 qa.test_qa_wl6573 qa.test_qa_wl7228
    qa.test_qa_wl7292 qa.test_qa_wl7542
)

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
[ -x "$PYTHON" ] || die "$PYTHON is missing: run integration/drivers/setup.sh"
[ -f "$SRC/tests/__init__.py" ] || die "$SRC is missing: run integration/drivers/setup.sh (python_upstream/fetch.sh)"
command -v mariadb >/dev/null 2>&1 || die "the mariadb client is missing: integration/fleet.sh install"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/shardgate-py-upstream.XXXXXX")"
[ -n "$RESULTS" ] || RESULTS="$WORK/results"
mkdir -p "$RESULTS"

cli() { mariadb -h"$BACKEND_HOST" -P"$MASTER_A" -ushard -pshardpw -N -B "$@"; }
# The tables each run's database has before it: the tables the tests create
# (and some leave behind) are dropped after it (VERIFY FLEET would see them).
declare -A BEFORE
for db in db00001 db00002; do
    BEFORE[$db]="$(cli "$db" -e 'SHOW TABLES' | sort | tr '\n' ' ')"
done
clean_db() {
    local db="$1" t
    for t in $(cli "$db" -e 'SHOW TABLES' | sort); do
        case " ${BEFORE[$db]} " in *" $t "*) continue ;; esac
        cli "$db" -e "DROP TABLE IF EXISTS \`$t\`" 2>/dev/null \
            || echo "note: could not drop the test table $db.$t on port $MASTER_A"
    done
}
trap 'clean_db db00001; clean_db db00002; rm -rf "$WORK"' EXIT

echo "Connector/Python test suite from $SRC ($(sed -n 's/^Version: //p' "$SRC/PKG-INFO")), $("$PYTHON" --version)"
run() {
    local name="$1" port="$2" user="$3" pass="$4" db="$5"
    "$PYTHON" "$HERE/run_suite.py" --src "$SRC" --host "$BACKEND_HOST" --port "$port" --user "$user" \
        --password "$pass" --database "$db" --json "$RESULTS/$name.json" "${MODULES[@]}" \
        >"$RESULTS/$name.log" 2>&1 || echo "run_suite exited $?" >>"$RESULTS/$name.log"
}
started=$SECONDS
run direct "$MASTER_A" shard shardpw db00002 &
direct_pid=$!
BACKEND_HOST="$HOST" run proxy "$PORT" app app db00001 &
proxy_pid=$!
wait "$direct_pid" || true
wait "$proxy_pid" || true
for name in direct proxy; do
    echo "== $name: $(grep -v '^ ' "$RESULTS/$name.log" | grep -E 'tests in|against|exited|Error' | tr '\n' ' ')"
done
echo "   both runs: $((SECONDS - started))s"

"$PYTHON" "$ROOT/integration/drivers/go/compare_upstream.py" --direct "$RESULTS/direct.json" \
    --proxy "$RESULTS/proxy.json" --known "$HERE/known_differences.txt" --out "$RESULTS" "${UPDATE[@]}"
