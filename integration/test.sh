#!/usr/bin/env bash
# The project's test command: build, bring up the local MariaDB fleet,
# create the shard databases, run every test.
#
#   integration/test.sh [extra cargo test arguments]
#
# Steps: cargo build (debug; the tests share its compiled dependencies) ->
# integration/fleet.sh start -> integration/zookeeper.sh start (the test
# ZooKeeper on 127.0.0.1:${SHARDGATE_ZK_PORT:-2281}, exported to the tests as
# SHARDGATE_ZK=127.0.0.1:PORT) -> shardgate fleet init --config
# config/shardgate.yaml --schema config/schema.sql -> integration/drivers/setup.sh
# (the Python virtualenv, Node's mysql2 and sysbench for the driver
# conformance tests, integration/tests/drivers.rs) -> the fuzz targets for
# a short, bounded time (integration/fuzz.sh, unoptimised build, which
# takes less than half the CPU time of an optimised one; SHARDGATE_FUZZ_SECONDS
# per target, default 20; 0 skips them) -> cargo test --all-targets.
# A fuzz crash fails the run after the tests have run (the reproducer is
# in fuzz/artifacts/<target>/).
# The integration tests find the fleet on 127.0.0.1:3307-3310 and start the
# proxy themselves. Exits non-zero if any step fails.
#
# With CI=true the fleet and ZooKeeper are stopped at the end (pass or fail),
# and a fleet or ZooKeeper of another checkout still holding the ports is
# stopped first (SHARDGATE_FLEET_REPLACE=1, SHARDGATE_ZK_REPLACE=1). Otherwise
# both are left running for the next run (start and init are idempotent and
# then take about a second).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# shellcheck source=integration/lib.sh
. integration/lib.sh

CI="${CI:-false}"
if [ "$CI" = true ]; then
    export SHARDGATE_FLEET_REPLACE="${SHARDGATE_FLEET_REPLACE:-1}"
    export SHARDGATE_ZK_REPLACE="${SHARDGATE_ZK_REPLACE:-1}"
    finish() {
        local rc=$?
        section "stopping the fleet and ZooKeeper (CI=true)"
        integration/fleet.sh stop || true
        integration/zookeeper.sh stop || true
        if [ "$rc" -eq 0 ]; then
            section "PASS"
        else
            section "FAIL (exit $rc)"
            for log in "${SHARDGATE_FLEET_DIR:-integration/.fleet}"/*/error.log; do
                [ -f "$log" ] || continue
                echo "--- last lines of $log"
                tail -n 15 "$log"
            done
            log="${SHARDGATE_ZK_DIR:-integration/.zookeeper}/zookeeper.log"
            if [ -f "$log" ]; then
                echo "--- last lines of $log"
                tail -n 15 "$log"
            fi
        fi
        exit "$rc"
    }
    trap finish EXIT
fi

ensure_cargo

section "build (cargo build)"
cargo --version
cargo build --bins
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/shardgate"
[ -x "$BIN" ] || { echo "binary $BIN missing after build" >&2; exit 1; }

section "fleet: integration/fleet.sh start"
integration/fleet.sh start

ZK_PORT="${SHARDGATE_ZK_PORT:-2281}"
section "ZooKeeper: integration/zookeeper.sh start (127.0.0.1:$ZK_PORT)"
integration/zookeeper.sh start
export SHARDGATE_ZK="127.0.0.1:$ZK_PORT"

section "fleet init: shardgate fleet init --config config/shardgate.yaml --schema config/schema.sql"
"$BIN" fleet init --config config/shardgate.yaml --schema config/schema.sql

section "driver conformance setup: integration/drivers/setup.sh (venv, npm ci, sysbench, mysqlclient, Connector/J, Go)"
integration/drivers/setup.sh

FUZZ_SECONDS="${SHARDGATE_FUZZ_SECONDS:-20}"
FUZZ_STATUS=0
if [ "$FUZZ_SECONDS" != 0 ]; then
    section "fuzz: integration/fuzz.sh $FUZZ_SECONDS (each target, bounded)"
    FUZZ_BUILD="${FUZZ_BUILD:-dev}" FUZZ_KEEP_CORPUS="${FUZZ_KEEP_CORPUS:-0}" \
        integration/fuzz.sh "$FUZZ_SECONDS" || FUZZ_STATUS=$?
fi

section "tests: cargo test --all-targets $*"
cargo test --all-targets "$@"

if [ "$FUZZ_STATUS" -ne 0 ]; then
    section "fuzz targets failed (exit $FUZZ_STATUS): reproducers in fuzz/artifacts/"
    exit "$FUZZ_STATUS"
fi

if [ "$CI" != true ]; then
    section "PASS (the fleet and ZooKeeper are still running; integration/fleet.sh stop and integration/zookeeper.sh stop stop them)"
fi
