#!/usr/bin/env bash
# User-space instructions per point lookup of the relay: shardgate vs HAProxy,
# counted by valgrind's callgrind. An instruction count does not depend on
# what else the machine is doing, so it compares builds (and the two relays)
# on a loaded, shared machine where CPU times and QPS do not; it says nothing
# about the kernel's share (system calls, loopback TCP) or about cache misses.
#
#   integration/bench/instructions.sh                          # text and prepared, 2,000 lookups each
#   BENCH_EVENTS=5000 BENCH_PROTOCOLS=text integration/bench/instructions.sh
#   BENCH_TOP=40 integration/bench/instructions.sh             # more of shardgate's functions
#   BENCH_RELAYS=shardgate integration/bench/instructions.sh   # skip HAProxy
#
# Needs the local fleet, as relay.sh does (rows seeded by lib.sh's seed_rows).
# For each relay (shardgate: a release build, BENCH_BUILD/BENCH_REV as in
# relay.sh; haproxy: 'mode tcp', 'nbthread 1', from apt) and each protocol of
# BENCH_PROTOCOLS (text, ps):
#   1. starts the relay under `valgrind --tool=callgrind`;
#   2. runs BENCH_WARMUP_EVENTS lookups through it with one sysbench thread
#      (logins, pools, kept statements and caches warm up);
#   3. zeroes the counters (callgrind_control -z), runs BENCH_EVENTS lookups
#      (point_select.lua, the same rows and --rand-seed as relay.sh), dumps
#      the counters (callgrind_control -d);
#   4. reports the relay's instructions per lookup (all its threads), and for
#      shardgate the BENCH_TOP functions with the most instructions of their
#      own (exclusive), per lookup.
# The relay runs about 50 times slower under valgrind: a lookup takes about
# 0.5 ms, and 2,000 lookups take a few seconds.
#
# Environment (defaults in brackets):
#   BENCH_EVENTS [2000]  BENCH_WARMUP_EVENTS [500]  BENCH_PROTOCOLS ["text ps"]
#   BENCH_RELAYS ["shardgate haproxy"]  BENCH_TOP [25]
#   BENCH_REPORT=FILE    also write the markdown report to FILE
#   and lib.sh's (BENCH_BUILD, BENCH_REV, SHARDGATE_BIN, BENCH_KEEP, ...)
set -euo pipefail

BENCH_EVENTS=${BENCH_EVENTS:-2000}
BENCH_WARMUP_EVENTS=${BENCH_WARMUP_EVENTS:-500}
BENCH_PROTOCOLS=${BENCH_PROTOCOLS:-"text ps"}
BENCH_RELAYS=${BENCH_RELAYS:-"shardgate haproxy"}
BENCH_TOP=${BENCH_TOP:-25}
LOG_TAG=instructions
# shellcheck source=integration/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for proto in $BENCH_PROTOCOLS; do
  [[ "$proto" == text || "$proto" == ps ]] || die "BENCH_PROTOCOLS: '$proto' is neither text nor ps"
done
for relay in $BENCH_RELAYS; do
  [[ "$relay" == shardgate || "$relay" == haproxy ]] || die "BENCH_RELAYS: '$relay' is neither shardgate nor haproxy"
done
command -v valgrind >/dev/null || apt_install valgrind
command -v callgrind_control >/dev/null || die "callgrind_control not found (package valgrind)"

ensure_sysbench
seed_rows
build_proxy
revision=$(describe_revision)
wrapper="valgrind --tool=callgrind --dump-instr=no --callgrind-out-file=$WORK/callgrind.%p"

# The "totals:" (or "summary:") line of a callgrind dump: instructions.
dump_total() { awk '/^(totals|summary):/ {print $2; exit}' "$1"; }

# count RELAY MODE PROTOCOL: one measured run; prints instructions per lookup
# and leaves the dump in $WORK/dump-RELAY-PROTOCOL.
count() {
  local relay=$1 mode=$2 proto=$3 pid dump before total
  pid=$(relay_pid "$mode")
  [[ -n "$pid" ]] || die "no $relay process"
  BENCH_PS=0
  [[ "$proto" == ps ]] && BENCH_PS=1
  BENCH_EVENTS=$BENCH_WARMUP_EVENTS run_sysbench "$mode" 1 0 "$WORK/warm-$relay-$proto.txt"
  callgrind_control -z "$pid" >/dev/null
  before=$(ls "$WORK"/callgrind.* 2>/dev/null | wc -l)
  BENCH_EVENTS=$BENCH_EVENTS run_sysbench "$mode" 1 0 "$WORK/run-$relay-$proto.txt"
  callgrind_control -d "$pid" >/dev/null
  for _ in $(seq 100); do
    (($(ls "$WORK"/callgrind.* 2>/dev/null | wc -l) > before)) && break
    sleep 0.1
  done
  dump=$(ls -t "$WORK"/callgrind."$pid".* 2>/dev/null | head -1)
  [[ -n "$dump" ]] || die "callgrind wrote no dump for $relay"
  grep -q "queries: *$BENCH_EVENTS " "$WORK/run-$relay-$proto.txt" ||
    grep -qE "^ *queries: +$BENCH_EVENTS\b" "$WORK/run-$relay-$proto.txt" ||
    die "sysbench did not run $BENCH_EVENTS lookups through $relay ($WORK/run-$relay-$proto.txt)"
  mv "$dump" "$WORK/dump-$relay-$proto"
  total=$(dump_total "$WORK/dump-$relay-$proto")
  [[ -n "$total" ]] || die "no instruction total in the $relay dump"
  awk -v t="$total" -v n="$BENCH_EVENTS" 'BEGIN { printf "%.0f\n", t / n }'
}

declare -A per_lookup
for relay in $BENCH_RELAYS; do
  if [[ "$relay" == shardgate ]]; then
    PROXY_WRAPPER=$wrapper PROXY_START_TRIES=600 start_proxy
    mode=proxy
  else
    ensure_haproxy
    HAPROXY_WRAPPER=$wrapper HAPROXY_START_TRIES=300 start_haproxy
    mode=haproxy
  fi
  for proto in $BENCH_PROTOCOLS; do
    log "$relay, $proto: $BENCH_WARMUP_EVENTS lookups to warm up, then $BENCH_EVENTS counted"
    per_lookup[$relay-$proto]=$(count "$relay" "$mode" "$proto")
    log "$relay, $proto: ${per_lookup[$relay-$proto]} instructions per lookup"
  done
  if [[ "$relay" == shardgate ]]; then
    stop_pid "$PROXY_PID"; PROXY_PID=
  else
    stop_pid "$HAPROXY_PID"; HAPROXY_PID=
  fi
done

# top_functions PROTOCOL: shardgate's functions by their own instructions, per lookup.
top_functions() {
  callgrind_annotate --inclusive=no --threshold=100 "$WORK/dump-shardgate-$1" 2>/dev/null |
    awk -v n="$BENCH_EVENTS" -v top="$BENCH_TOP" '
      /file:function/ { on = 1; next }
      on && /^ *[0-9,]+ / {
        count = $1; gsub(",", "", count)
        line = $0; sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", line)
        if (line ~ /^\*/ || line ~ /clone.S|start_thread|thread_start|call_once\{\{vtable.shim\}\}|block_on|enter_runtime|begin_short_backtrace/) next
        sub(/ \[[^]]*\]$/, "", line); sub(/^.*\.(rs|c|S):/, "", line)
        if (++k > top) next
        printf "| %.0f | `%s` |\n", count / n, substr(line, 1, 140)
      }'
}

report() {
  echo "Command: \`integration/bench/instructions.sh\` (BENCH_PROTOCOLS=\"$BENCH_PROTOCOLS\" BENCH_RELAYS=\"$BENCH_RELAYS\" BENCH_EVENTS=$BENCH_EVENTS BENCH_WARMUP_EVENTS=$BENCH_WARMUP_EVENTS)"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(valgrind --version); one sysbench thread, point lookups (point_select.lua), rand-seed $BENCH_SEED; shardgate built from $revision."
  echo
  echo "| protocol | user-space instructions per lookup: shardgate | HAProxy | shardgate / HAProxy |"
  echo "|---|---|---|---|"
  for proto in $BENCH_PROTOCOLS; do
    s=${per_lookup[shardgate-$proto]:-} h=${per_lookup[haproxy-$proto]:-}
    ratio=-
    [[ -n "$s" && -n "$h" ]] && ratio=$(awk -v s="$s" -v h="$h" 'BEGIN { printf "%.2f", s / h }')
    echo "| $([[ "$proto" == ps ]] && echo prepared || echo text) | ${s:--} | ${h:--} | $ratio |"
  done
  if [[ " $BENCH_RELAYS " == *" shardgate "* ]]; then
    for proto in $BENCH_PROTOCOLS; do
      echo
      echo "shardgate, $([[ "$proto" == ps ]] && echo prepared || echo text): the functions with the most instructions of their own, per lookup"
      echo
      echo "| instructions | function |"
      echo "|---|---|"
      top_functions "$proto"
    done
  fi
}
report | tee "$WORK/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$WORK/report.md" "$BENCH_REPORT"
