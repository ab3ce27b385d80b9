#!/usr/bin/env bash
# Figures for the ZooKeeper control plane (a benchmark, not a test):
#   1. `config push` returning → the last of three proxies running the new
#      version (each proxy's admin `SHOW CONFIG` version polled every 1 ms
#      on an open session), and the push call itself;
#   2. `PAUSE SHARDS` sent → answer (and the `RESUME SHARDS` between
#      rounds), with one proxy registered and with three.
#
#   integration/bench/zookeeper.sh                        # 20 rounds each
#   BENCH_ROUNDS=50 BENCH_REPORT=/tmp/zk.md integration/bench/zookeeper.sh
#
# Needs the fleet (the proxies connect to its hosts; nothing is written to
# them) and the test ZooKeeper (integration/zookeeper.sh start; the tests'
# SHARDGATE_ZK, default 127.0.0.1:2281). Builds the zookeeper_config test
# binary and shardgate in release (`cargo test --release --no-run`), then
# runs its ignored test `figures::figures`: real `shardgate serve --threads
# 1` processes from a znode of its own (/shardgate-test/figures-PID,
# removed at the end), addresses read from their registry entries. The
# markdown table, the revision and the machine's load (`uptime` before and
# after) go to stdout, and to BENCH_REPORT when set.
#
# Environment: SHARDGATE_ZK, BENCH_ROUNDS [20], BENCH_REPORT=FILE.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
ZK=${SHARDGATE_ZK:-127.0.0.1:2281}
ROUNDS=${BENCH_ROUNDS:-20}
log() { printf '[zookeeper bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

(exec 3<>"/dev/tcp/${ZK%:*}/${ZK##*:}") 2>/dev/null \
    || die "no ZooKeeper at $ZK: integration/zookeeper.sh start (or set SHARDGATE_ZK)"
(exec 3<>/dev/tcp/127.0.0.1/3307) 2>/dev/null \
    || die "no fleet on 127.0.0.1:3307: integration/fleet.sh start"

log "building (release)"
cargo test --release --test zookeeper_config --no-run >&2
revision="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src integration || echo ' + local changes')"
table=$(mktemp /tmp/shardgate-zk-bench.XXXXXX)
trap 'rm -f "$table"' EXIT
load_before=$(uptime)
log "running $ROUNDS rounds of each figure"
BENCH_ROUNDS=$ROUNDS BENCH_REPORT=$table SHARDGATE_ZK=$ZK \
    cargo test --release --test zookeeper_config figures::figures -- --ignored --exact --nocapture >&2
load_after=$(uptime)

report=$(
    printf 'Release build of %s, %s, ZooKeeper %s (tickTime 200 ms, session timeout 4 s), %s rounds.\n\n' \
        "$revision" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$ZK" "$ROUNDS"
    cat "$table"
    printf '\nLoad (uptime) before: `%s`\n\nafter: `%s`\n' "$(echo "$load_before" | sed 's/^ *//')" "$(echo "$load_after" | sed 's/^ *//')"
)
printf '%s\n' "$report"
[ -z "${BENCH_REPORT:-}" ] || printf '%s\n' "$report" >"$BENCH_REPORT"
