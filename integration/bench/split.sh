#!/usr/bin/env bash
# Copy rate of `shardgate fleet split` against `mariadb-dump | mariadb` of the
# same data: 16 databases sp00..sp15 of ROWS rows each (default 20,000) on the
# scratch server 127.0.0.1:3312, split 8-15 to the spare 127.0.0.1:3311, the
# split stopped after its verify phase. Both servers are emptied afterwards.
#
#   flock /tmp/shardgate-fleet.lock integration/bench/split.sh [ROWS]
#
# Needs the local fleet's scratch hosts: integration/fleet.sh start-host 3311
# and start-host 3312; uses target/debug/shardgate (cargo build first).
# With SHARDGATE_ZK set (integration/zookeeper.sh), it then runs the split
# under write load through three ZooKeeper-sourced proxies (the test
# split_load::split_under_write_load_..., 16 x 300 rows, --max-rows-per-second
# 3000) RUNS times (default 3) and prints its FIGURES lines: copy and verify
# rates, the cutover's pause and the writers' longest stall.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROWS="${1:-20000}"
SHARDGATE="$ROOT/target/debug/shardgate"
CONFIG="$ROOT/integration/bench/split.yaml"
STATE="$(mktemp -u /tmp/split-bench.XXXXXX.state)"
M="mariadb -h127.0.0.1 -ushardops -pshardopspw"
clean() {
    $M -P3311 -e "STOP SLAVE; RESET SLAVE ALL" 2>/dev/null || true
    for port in 3311 3312; do
        for i in $(seq -w 0 15); do $M -P"$port" -e "DROP DATABASE IF EXISTS sp$i"; done
    done
    rm -f "$STATE"
}
trap clean EXIT
clean
for i in $(seq -w 0 15); do
    $M -P3312 -e "CREATE DATABASE sp$i; CREATE TABLE sp$i.pins (local_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, data TEXT, ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP); USE sp$i; INSERT INTO pins (data) SELECT CONCAT('pin data ', seq, ' ', REPEAT('x', 80)) FROM seq_1_to_$ROWS;"
done
echo "== fleet split, copy and verify"
time "$SHARDGATE" fleet split --config "$CONFIG" --shards 8-15 --to 127.0.0.1:3311 \
    --max-rows-per-second 0 --grace 0 --state "$STATE" --stop-after verify 2>&1 | grep -E "done in"
$M -P3311 -e "STOP SLAVE; RESET SLAVE ALL"
for i in $(seq -w 0 15); do $M -P3311 -e "DROP DATABASE IF EXISTS sp$i"; done
echo "== mariadb-dump --single-transaction | mariadb, the same 16 databases"
DBS=$(seq -f "sp%02g" 0 15 | tr '\n' ' ')
# shellcheck disable=SC2086
time (mariadb-dump -h127.0.0.1 -P3312 -ushardops -pshardopspw --single-transaction --gtid \
    --master-data=2 --databases $DBS | $M -P3311)
if [ -n "${SHARDGATE_ZK:-}" ]; then
    echo "== fleet split under write load through three ZooKeeper-sourced proxies"
    for _ in $(seq "${RUNS:-3}"); do
        (cd "$ROOT" && cargo test --test exclusive \
            split_load::split_under_write_load_through_three_zookeeper_proxies_loses_no_write \
            -- --nocapture 2>&1 | grep -E "^FIGURES|^test result")
    done
fi
