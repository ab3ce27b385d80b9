#!/usr/bin/env bash
# 50-pin multi-get by ID over all shards of both masters: through
# shardgate (one IN list) vs the application fanning out to the masters itself.
#
#   integration/bench/multi_get.sh             # full run (3 rounds x 10 s, 1 and 8 clients)
#   QUICK=1 integration/bench/multi_get.sh     # smoke run (1 round x 3 s)
#
# Needs the local fleet (integration/fleet.sh start; shard databases created by
# `shardgate fleet init`). What it does:
#   1. builds the release proxy and the release `statements` test binary
#      (the client is the ignored test `bench_multi_get_proxy_vs_direct` in
#      integration/tests/statements/multi_shard/bench.rs: mysql_async on a 2-thread tokio runtime);
#   2. starts a private copy of the release proxy on free ports with a copy of
#      config/shardgate.yaml whose listen, admin and metrics addresses are free ports (config/ is
#      left alone), and stops it on exit;
#   3. runs the client, which
#      - seeds MULTI_GET_ROWS pins with 100-byte data 'mget:...' on each of
#        MULTI_GET_SHARDS shards spread evenly over 0..4095 (both masters),
#        straight on the masters (rows of an earlier run are reused);
#      - checks that a few gets return the same rows both ways;
#      - for each client concurrency, warms both modes up, then runs
#        MULTI_GET_ROUNDS rounds of one direct and one proxy run (order
#        alternating per round, same random ID sets in both modes of a round);
#        each client loops: pick 50 distinct random pins, fetch them, check
#        that exactly those 50 rows came back;
#          proxy:  `SELECT id, data FROM pins WHERE id IN (<50 global ids>)`
#                  on a pooled connection to the proxy (app/app);
#          direct: group the IDs by shard, then one
#                  `SELECT local_id, data FROM dbNNNNN.pins WHERE local_id IN (...)`
#                  per shard on pooled connections to its master (shard/shardpw),
#                  all in parallel (a task per shard), composing the global IDs;
#        Both modes use mysql_async pools (up to MULTI_GET_POOL_MAX connections
#        per host) that keep their connections and do not reset them when they
#        are returned, as an application's pool would;
#      - reports gets/s, p50/p95/p99 of the whole get, the proxy/direct ratio,
#        CPU time per get of the proxy, both mariadbd, the client and the
#        machine's softirq, and the CPU other processes used meanwhile (noise).
#
# Environment (defaults in brackets):
#   MULTI_GET_CONCURRENCY ["1 8"]  concurrent clients (each does one get at a time)
#   MULTI_GET_ROUNDS [3]  MULTI_GET_SECONDS [10] per run  MULTI_GET_WARMUP [3] per mode
#   MULTI_GET_IDS [50]  MULTI_GET_SHARDS [4096]  MULTI_GET_ROWS [4] per shard
#   MULTI_GET_POOL_MAX [64]     client pool size per host (the proxy's pool_max_per_host is 64)
#   MULTI_GET_QUIET_BUSY [25] MULTI_GET_QUIET_WAIT [120]  before each run, wait up to
#                               WAIT s for the CPUs to be under BUSY % busy (shared machine)
#   MULTI_GET_SEED [20240601]
#   MULTI_GET_DIRECT_ONLY=1     only the direct half, no proxy (tests the harness)
#   QUICK=1                     MULTI_GET_ROUNDS=1 MULTI_GET_SECONDS=3 MULTI_GET_WARMUP=1
#   BENCH_BUILD [1]             build first (0: use target/release/shardgate as is)
#   SHARDGATE_BIN [$CARGO_TARGET_DIR or target, /release/shardgate]  CONFIG [config/shardgate.yaml]
#   BENCH_REVISION              what to call the proxy's revision in the report [git HEAD]
#   SHARDGATE_FLEET_DIR [integration/.fleet]  where the masters' mariadbd.pid files are
#   BENCH_REPORT=FILE           also write the markdown report to FILE
#   BENCH_KEEP=1                keep the work directory (proxy log, client output)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if [[ "${QUICK:-0}" == 1 ]]; then
  : "${MULTI_GET_ROUNDS:=1}" "${MULTI_GET_SECONDS:=3}" "${MULTI_GET_WARMUP:=1}"
fi
export MULTI_GET_CONCURRENCY=${MULTI_GET_CONCURRENCY:-"1 8"}
export MULTI_GET_ROUNDS=${MULTI_GET_ROUNDS:-3}
export MULTI_GET_SECONDS=${MULTI_GET_SECONDS:-10}
export MULTI_GET_WARMUP=${MULTI_GET_WARMUP:-3}
export MULTI_GET_IDS=${MULTI_GET_IDS:-50}
export MULTI_GET_SHARDS=${MULTI_GET_SHARDS:-4096}
export MULTI_GET_ROWS=${MULTI_GET_ROWS:-4}
export MULTI_GET_POOL_MAX=${MULTI_GET_POOL_MAX:-64}
export MULTI_GET_QUIET_BUSY=${MULTI_GET_QUIET_BUSY:-25}
export MULTI_GET_QUIET_WAIT=${MULTI_GET_QUIET_WAIT:-120}
export MULTI_GET_SEED=${MULTI_GET_SEED:-20240601}
export MULTI_GET_DIRECT_ONLY=${MULTI_GET_DIRECT_ONLY:-0}
BENCH_BUILD=${BENCH_BUILD:-1}
# The client reads the masters' pids from the fleet's pid files (CPU accounting).
export SHARDGATE_FLEET_DIR=${SHARDGATE_FLEET_DIR:-$ROOT/integration/.fleet}
CONFIG=${CONFIG:-$ROOT/config/shardgate.yaml}
SHARDGATE_BIN=${SHARDGATE_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/shardgate}
LOG_TAG=multi_get
# Work directory, cleanup, start_proxy (private copy on free ports): lib.sh.
# shellcheck source=integration/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for port in 3307 3308; do
  mariadb -h127.0.0.1 -P"$port" -ushard -pshardpw -N -e 'SELECT 1' >/dev/null 2>&1 ||
    die "master 127.0.0.1:$port does not answer; start the fleet: integration/fleet.sh start"
done

# ---------------------------------------------------------------- build
if [[ "$BENCH_BUILD" == 1 ]]; then
  log "cargo build --release; cargo test --release --no-run --test statements"
  (cd "$ROOT" && cargo build --release --quiet) || die "cargo build --release failed"
fi
CLIENT=$(cd "$ROOT" && cargo test --release --no-run --test statements --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*statements-[^"]*"' | tail -1 | cut -d'"' -f4) || true
[[ -n "$CLIENT" && -x "$CLIENT" ]] || die "cannot build the statements test binary (cargo test --release --no-run --test statements)"
# Private copies: a concurrent rebuild cannot swap them.
cp "$CLIENT" "$WORK/multi_get_client"

# ---------------------------------------------------------------- proxy
PROXY_PORT=0
if [[ "$MULTI_GET_DIRECT_ONLY" != 1 ]]; then
  [[ -x "$SHARDGATE_BIN" ]] || die "no proxy binary at $SHARDGATE_BIN"
  start_proxy
fi

# ---------------------------------------------------------------- run
started=$(date -u '+%Y-%m-%d %H:%M UTC')
if [[ -n "${BENCH_REVISION:-}" ]]; then
  revision=$BENCH_REVISION
else
  revision="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  dirty=$(git -C "$ROOT" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null | wc -l)
  ((dirty == 0)) || revision+=" + $dirty uncommitted file(s) under src/ or Cargo.* (shared working tree)"
fi
budget=$(awk -v c="$MULTI_GET_CONCURRENCY" -v r="$MULTI_GET_ROUNDS" -v s="$MULTI_GET_SECONDS" \
  -v w="$MULTI_GET_WARMUP" -v q="$MULTI_GET_QUIET_WAIT" \
  'BEGIN { n = split(c, a, " "); printf "%d", n * (2 * r * (s + q + 1) + 2 * (w + q + 1)) + 300 }')
log "running the client (time limit ${budget}s)"
MULTI_GET_PROXY_PORT=$PROXY_PORT MULTI_GET_PROXY_PID=$PROXY_PID MULTI_GET_CLK_TCK=$(getconf CLK_TCK) \
  timeout "$budget" "$WORK/multi_get_client" --ignored --exact multi_shard::bench_multi_get_proxy_vs_direct \
  --nocapture --test-threads=1 >"$WORK/client.out" 2>"$WORK/client.err" || {
  tail -30 "$WORK/client.err" "$WORK/client.out" >&2
  kill -0 "$PROXY_PID" 2>/dev/null || { tail -20 "$WORK/proxy.log" >&2; PROXY_PID=; }
  die "the benchmark client failed"
}
grep -q MULTI_GET_REPORT_END "$WORK/client.out" || die "no report in $WORK/client.out"

report() {
  echo "Command: \`$( [[ "${QUICK:-0}" == 1 ]] && printf 'QUICK=1 ')integration/bench/multi_get.sh\`" \
    "(MULTI_GET_CONCURRENCY=\"$MULTI_GET_CONCURRENCY\" MULTI_GET_ROUNDS=$MULTI_GET_ROUNDS MULTI_GET_SECONDS=$MULTI_GET_SECONDS MULTI_GET_WARMUP=$MULTI_GET_WARMUP)"
  echo
  echo "Started $started; $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); $(mariadb -h127.0.0.1 -P3307 -ushard -pshardpw -N -e 'SELECT VERSION()'); proxy built from $revision."
  echo
  sed -n '/MULTI_GET_REPORT_BEGIN/,/MULTI_GET_REPORT_END/p' "$WORK/client.out" | sed '1d;$d'
}
report | tee "$WORK/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$WORK/report.md" "$BENCH_REPORT"
