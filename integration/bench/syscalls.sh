#!/usr/bin/env bash
# System calls per point lookup of the relay process: HAProxy (a plain TCP
# relay, `mode tcp`, `nbthread 1`) vs shardgate (release build), one client
# thread, text and prepared, counted with `strace -f -c` attached to the
# relay process only (all its threads) over a fixed number of lookups.
#
#   integration/bench/syscalls.sh                      # 20,000 lookups per mode, text and prepared
#   BENCH_EVENTS=5000 integration/bench/syscalls.sh
#   BENCH_PROTOCOLS=text BENCH_REPORT=/tmp/syscalls.md integration/bench/syscalls.sh
#
# What it does (the relay.sh set-up, integration/bench/lib.sh):
#   1. seeds the rows and writes the ID file, builds (BENCH_BUILD=1) and
#      starts a release shardgate and an HAProxy in front of master A; installs
#      strace (apt) if missing;
#   2. for each protocol, for each mode (direct, haproxy, shardgate): a warm-up
#      of BENCH_WARMUP_EVENTS lookups (shardgate learns the statement's shape),
#      then BENCH_EVENTS lookups with sysbench --threads=1 --events=N (the
#      same rows, same --rand-seed, point_select.lua; every lookup must return
#      one row), the relay process under `strace -f -c -p PID` for exactly
#      that run (direct: nothing to trace, the run checks the lookups only);
#   3. prints, per protocol, each system call's calls (and failed calls, e.g.
#      EAGAIN reads) per lookup for HAProxy and shardgate, grouped by kind
#      (reads, writes, epoll, futex, other), as markdown (BENCH_REPORT=FILE
#      also writes it to FILE).
#
# strace slows the traced process a lot: the counts are exact, the times
# in the run are not (measure latency with relay.sh, BENCH_THREADS=1). The
# client's connect and login (and, prepared, its one prepare) are in the
# counts too: with 20,000 lookups they add under 0.01 per lookup.
#
# Environment (defaults in brackets), besides lib.sh's (BENCH_BUILD, BENCH_REV,
# SHARDGATE_BIN, BENCH_SHARDS, BENCH_ROWS, MASTER_PORT, ...):
#   BENCH_EVENTS [20000]  lookups per traced run
#   BENCH_WARMUP_EVENTS [2000]  lookups before it (not traced)
#   BENCH_PROTOCOLS ["text ps"]
#   BENCH_REPORT=FILE     also write the markdown report to FILE
#   BENCH_KEEP=1          keep the work directory (strace outputs)
set -euo pipefail

EVENTS=${BENCH_EVENTS:-20000}
WARMUP_EVENTS=${BENCH_WARMUP_EVENTS:-2000}
BENCH_PROTOCOLS=${BENCH_PROTOCOLS:-"text ps"}
unset BENCH_EVENTS
LOG_TAG=syscalls
# shellcheck source=integration/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for proto in $BENCH_PROTOCOLS; do
  [[ "$proto" == text || "$proto" == ps ]] || die "BENCH_PROTOCOLS: '$proto' is neither text nor ps"
done
((EVENTS > 0)) || die "BENCH_EVENTS must be a positive number"

ensure_sysbench
command -v strace >/dev/null || { log "installing strace"; apt_install strace || die "cannot install strace"; }
seed_rows
build_proxy
start_proxy
check_proxy_rows
start_haproxy

STRACE_PID=
stop_strace() {
  [[ -n "$STRACE_PID" ]] || return 0
  kill -INT "$STRACE_PID" 2>/dev/null || true
  wait "$STRACE_PID" 2>/dev/null || true
  STRACE_PID=
}
on_exit() {
  local rc=$?
  stop_strace
  (exit "$rc") || cleanup # cleanup reads the status from $?
  cleanup
}
trap on_exit EXIT

# events_run MODE EVENTS OUTFILE: one client thread, EVENTS lookups; checks
# that sysbench ran exactly that many, each returning one row.
events_run() {
  local mode=$1 events=$2 out=$3 qps p50 p95 errs sbcpu queries reports
  BENCH_EVENTS=$events run_sysbench "$mode" 1 0 "$out"
  read -r qps p50 p95 errs sbcpu queries reports < <(parse_run "$out")
  ((reports == 1)) || die "sysbench did not report its row checks ($out)"
  ((errs == 0)) || die "$errs lookups did not return exactly one row ($out)"
  ((queries == events)) || die "sysbench ran $queries lookups, not $events ($out)"
}

# strace_table FILE: "syscall calls errors" lines of an `strace -c` summary.
strace_table() {
  awk '
    /^-+/ || /^%/ || /total$/ { next }
    NF == 6 { print $6, $4, $5; next }
    NF == 5 { print $5, $4, 0 }' "$1"
}

started=$(date -u '+%Y-%m-%d %H:%M UTC')
revision=$(describe_revision)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for proto in $BENCH_PROTOCOLS; do
  BENCH_PS=0
  if [[ "$proto" == ps ]]; then
    BENCH_PS=1
    check_proxy_rows
  fi
  for mode in direct haproxy proxy; do
    log "$proto $mode: warm-up, $WARMUP_EVENTS lookups"
    events_run "$mode" "$WARMUP_EVENTS" "$WORK/warmup-$proto-$mode.txt"
    relay=$(relay_pid "$mode")
    if [[ -z "$relay" ]]; then
      log "$proto $mode: $EVENTS lookups (nothing to trace)"
      events_run "$mode" "$EVENTS" "$WORK/sysbench-$proto-$mode.txt"
      continue
    fi
    trace="$WORK/strace-$proto-$mode.txt"
    strace -f -c -p "$relay" -o "$trace" 2>"$WORK/strace-$proto-$mode.log" &
    STRACE_PID=$!
    # Attached once strace has said so for every thread of the relay.
    threads=$(ls "/proc/$relay/task" | wc -l)
    for _ in $(seq 100); do
      (($(grep -c 'attached' "$WORK/strace-$proto-$mode.log" || true) >= threads)) && break
      sleep 0.1
    done
    log "$proto $mode: $EVENTS lookups, pid $relay ($threads thread(s)) under strace -f -c"
    events_run "$mode" "$EVENTS" "$WORK/sysbench-$proto-$mode.txt"
    stop_strace
    [[ -s "$trace" ]] || die "strace wrote no summary ($WORK/strace-$proto-$mode.log)"
    strace_table "$trace" >"$WORK/calls-$proto-$mode.txt"
  done
done

# ---------------------------------------------------------------- report
# kind SYSCALL: the group a system call is counted in.
per_lookup_table() {
  local proto=$1
  awk -v N="$EVENTS" '
    function kind(s) {
      if (s ~ /^(read|readv|recvfrom|recvmsg|recvmmsg)$/) return "1 reads"
      if (s ~ /^(write|writev|sendto|sendmsg|sendmmsg)$/) return "2 writes"
      if (s ~ /^epoll/) return "3 epoll"
      if (s == "futex") return "4 futex"
      return "5 other"
    }
    FNR == 1 { f++ }
    { c[f, $1] += $2; e[f, $1] += $3; seen[$1] = 1; k = kind($1); kc[f, k] += $2; ke[f, k] += $3; kinds[k] = 1; tc[f] += $2 }
    # Failed calls shown from 0.001 per lookup on.
    function cell(calls, errors) {
      return errors / N >= 0.0005 ? sprintf("%.3f (%.3f failed)", calls / N, errors / N) : sprintf("%.3f", calls / N)
    }
    END {
      print "| system call | HAProxy per lookup | shardgate per lookup |"
      print "|---|---|---|"
      n = asorti(kinds, ks)
      for (i = 1; i <= n; i++) {
        k = ks[i]
        m = 0
        for (s in seen) if (kind(s) == k) names[++m] = s
        asort(names)
        for (j = 1; j <= m; j++) {
          s = names[j]
          # Calls made fewer than once per 2,000 lookups (start-up, login) are left out.
          if (c[1, s] / N < 0.0005 && c[2, s] / N < 0.0005) continue
          printf "| %s | %s | %s |\n", s, cell(c[1, s], e[1, s]), cell(c[2, s], e[2, s])
        }
        delete names
        printf "| **%s** | **%s** | **%s** |\n", substr(k, 3), cell(kc[1, k], ke[1, k]), cell(kc[2, k], ke[2, k])
      }
      printf "| **all** | **%.3f** | **%.3f** |\n", tc[1] / N, tc[2] / N
    }' "$WORK/calls-$proto-haproxy.txt" "$WORK/calls-$proto-proxy.txt"
}

report() {
  echo "Command: \`BENCH_EVENTS=$EVENTS BENCH_PROTOCOLS=\"$BENCH_PROTOCOLS\" integration/bench/syscalls.sh\`"
  echo
  echo "Started $started (load average $load_before); $(describe_machine); $(haproxy -v | awk 'NR == 1 {print "HAProxy " $3}') (mode tcp, nbthread 1); $(strace -V | head -1); shardgate built from $revision, $(ls "/proc/$PROXY_PID/task" | wc -l) thread(s)."
  echo "$EVENTS point lookups per traced run, one client thread (sysbench), after $WARMUP_EVENTS untraced ones; calls per lookup of the relay process (\`strace -f -c -p PID\`), failed calls (EAGAIN etc.) in brackets; system calls made fewer than once per 2,000 lookups are left out of the rows (not of the totals)."
  for proto in $BENCH_PROTOCOLS; do
    echo
    echo "### $([[ "$proto" == ps ]] && echo 'prepared statements (COM_STMT_EXECUTE)' || echo 'text queries (COM_QUERY)')"
    echo
    per_lookup_table "$proto"
  done
}
report | tee "$WORK/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$WORK/report.md" "$BENCH_REPORT"
