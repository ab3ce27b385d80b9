#!/usr/bin/env bash
# Point lookups by global 64-bit ID: through shardgate vs straight to the master.
#
#   integration/bench/point_select.sh            # full run (3 pairs x 20 s, 8 and 32 threads)
#   QUICK=1 integration/bench/point_select.sh    # smoke run (1 pair x 5 s)
#   BENCH_PERF=1 integration/bench/point_select.sh   # + perf profile of the proxy
#   BENCH_PS=1 integration/bench/point_select.sh     # prepared statements (COM_STMT_EXECUTE)
#
# Needs the local fleet (integration/fleet.sh start; shard databases created by
# `shardgate fleet init`). What it does:
#   1. seeds BENCH_SHARDS shards on master A (shards 0, 32, 64, ... with the
#      default step), BENCH_ROWS rows each in dbNNNNN.pins with ~100-byte data
#      starting 'bench:', straight on the master (rows from an earlier run are
#      reused), and writes the ID file ("global_id shard local_id" per row);
#   2. starts a release proxy (a copy of target/release/shardgate) on free
#      ports with a copy of config/shardgate.yaml whose listen addresses are
#      rewritten (config/ is left alone) and stops it on exit;
#   3. for each thread count, runs sysbench with point_select.lua in pairs of
#      alternating direct/proxy runs (same rows, same --rand-seed), and reports
#      QPS, p50/p95 latency (from sysbench's histogram), the proxy/direct QPS
#      ratio per pair and its median, the CPU time per query of the proxy, the
#      master's mariadbd, sysbench and the machine's softirq (loopback TCP), and
#      the CPU other processes used meanwhile (the machine is shared: noise);
#   With BENCH_PS=1 every lookup is a server-side prepared statement executed
#      with the ID bound as a BIGINT (sysbench --db-ps-mode=auto; a fallback to
#      emulated prepares fails the run): through the proxy
#      `SELECT data FROM pins WHERE id = ?` prepared once per thread, direct
#      `SELECT data FROM dbNNNNN.pins WHERE local_id = ?` prepared per shard per
#      thread on first use (see point_select.lua). The master's Com_stmt_execute
#      and Com_select counters are read around every run: a direct run must
#      show one COM_STMT_EXECUTE per lookup. Before the runs, a sample of rows
#      is read through the proxy with mysql-connector-python's prepared cursor
#      (integration/.venv, if present) and compared with the master;
#   4. with BENCH_PERF=1, profiles the proxy (perf record/stat) during one more
#      proxy run and summarises where its CPU goes (perf_categories.awk).
#
# Environment (defaults in brackets):
#   BENCH_THREADS ["8 32"]  BENCH_PAIRS [3]  BENCH_TIME [20] seconds per run
#   BENCH_WARMUP [5] seconds per mode before each thread count (0: none)
#   QUICK=1                 BENCH_PAIRS=1 BENCH_TIME=5 BENCH_WARMUP=2
#   BENCH_SHARDS [64]  BENCH_SHARD_STEP [32]  BENCH_ROWS [500]
#   BENCH_DIRECT_ONLY=1     skip the proxy (tests the harness's direct half)
#   BENCH_PS=1              prepared statements instead of text queries (see above)
#   BENCH_BUILD [1]         run `cargo build --release` first (0: use the binary as is)
#   BENCH_REV=COMMIT        instead, build COMMIT (e.g. HEAD) from a clean `git archive`
#                           export, so others' uncommitted edits in the shared tree are
#                           not measured (target dir BENCH_TARGET_DIR
#                           [/tmp/shardgate-bench-target], first seeded from target/release)
#   SHARDGATE_BIN           binary to run [target/release/shardgate]
#   BENCH_PERF=1            after the pairs, profile the proxy with perf during one
#                           extra proxy run at the last thread count (BENCH_PERF_TIME [10] s)
#   BENCH_REPORT=FILE       also write the markdown report to FILE
#   BENCH_KEEP=1            keep the work directory (logs, sysbench output, perf data)
#   MASTER_PORT [3307]  BACKEND_USER [shard]  BACKEND_PASSWORD [shardpw]
#   APP_USER [app]  APP_PASSWORD [app]  CONFIG [config/shardgate.yaml]
#   BENCH_SEED [20240601]   sysbench --rand-seed (same in both modes)
#   BENCH_QUIET_BUSY [25] BENCH_QUIET_WAIT [120]  before each run, wait up to
#                           WAIT s for the CPUs to be under BUSY % busy (shared machine)
# Shared functions (seeding, proxy start, sysbench runs, CPU accounting): lib.sh.
set -euo pipefail

if [[ "${QUICK:-0}" == 1 ]]; then
  : "${BENCH_PAIRS:=1}" "${BENCH_TIME:=5}" "${BENCH_WARMUP:=2}"
fi
BENCH_THREADS=${BENCH_THREADS:-"8 32"}
BENCH_PAIRS=${BENCH_PAIRS:-3}
BENCH_TIME=${BENCH_TIME:-20}
BENCH_WARMUP=${BENCH_WARMUP:-5}
BENCH_DIRECT_ONLY=${BENCH_DIRECT_ONLY:-0}
BENCH_PERF=${BENCH_PERF:-0}
BENCH_PERF_TIME=${BENCH_PERF_TIME:-10}
LOG_TAG=bench
# shellcheck source=integration/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_sysbench
seed_rows
if [[ "$BENCH_DIRECT_ONLY" != 1 ]]; then
  build_proxy
  start_proxy
  check_proxy_rows
fi

# ---------------------------------------------------------------- runs
modes=(direct proxy)
[[ "$BENCH_DIRECT_ONLY" == 1 ]] && modes=(direct)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
revision="none (BENCH_DIRECT_ONLY=1)"
[[ -z "$PROXY_PORT" ]] || revision=$(describe_revision)
for threads in $BENCH_THREADS; do
  if ((BENCH_WARMUP > 0)); then
    for mode in "${modes[@]}"; do
      log "warm-up $mode, $threads threads, ${BENCH_WARMUP}s"
      run_sysbench "$mode" "$threads" "$BENCH_WARMUP" "$WORK/warmup-$threads-$mode.txt"
    done
  fi
  for ((pair = 1; pair <= BENCH_PAIRS; pair++)); do
    # Alternate which mode goes first so drift favours neither.
    if ((pair % 2)); then order=("${modes[@]}"); else order=(); for ((i = ${#modes[@]} - 1; i >= 0; i--)); do order+=("${modes[i]}"); done; fi
    for mode in "${order[@]}"; do measure "$mode" "$threads" "$pair"; done
  done
done

# ---------------------------------------------------------------- profile
PERF_TXT=
if [[ "$BENCH_PERF" == 1 && "$BENCH_DIRECT_ONLY" != 1 ]]; then
  command -v perf >/dev/null || { apt-get install -y linux-perf >/dev/null 2>&1 || die "perf is missing (apt-get install linux-perf)"; }
  threads=${BENCH_THREADS##* }
  log "perf: profiling the proxy for ${BENCH_PERF_TIME}s under $threads threads"
  perf record -F 999 -e cpu-clock --call-graph dwarf,16384 -p "$PROXY_PID" -o "$WORK/perf.data" \
    -- sleep "$((BENCH_PERF_TIME + 1))" >"$WORK/perf-record.log" 2>&1 &
  perf_pid=$!
  # Syscalls and context switches of the proxy during the same run (tracepoints).
  events=context-switches
  perf list tracepoint >"$WORK/perf-list.txt" 2>/dev/null || true
  for e in sendto recvfrom write read epoll_wait futex; do
    if grep -q "syscalls:sys_enter_$e " "$WORK/perf-list.txt"; then events+=",syscalls:sys_enter_$e"; fi
  done
  perf stat -x, -e "$events" -p "$PROXY_PID" -o "$WORK/perf-stat.csv" -- sleep "$((BENCH_PERF_TIME + 1))" &
  stat_pid=$!
  sleep 0.5
  run_sysbench proxy "$threads" "$BENCH_PERF_TIME" "$WORK/sysbench-perf.txt"
  wait "$perf_pid" || true
  wait "$stat_pid" || true
  read -r perf_qps _ _ _ _ perf_queries _ < <(parse_run "$WORK/sysbench-perf.txt")
  PERF_TXT="$WORK/perf-report.txt"
  {
    echo "proxy under perf: $perf_qps QPS ($perf_queries queries in ${BENCH_PERF_TIME} s; perf itself slows it down)"
    echo
    echo "## per query: proxy syscalls and context switches (perf stat)"
    awk -F, -v q="$perf_queries" '$1 ~ /^[0-9]+$/ { printf "%-36s %8.2f\n", $3, $1 / q }' "$WORK/perf-stat.csv"
    echo
    echo "## where the proxy's CPU goes (samples bucketed by call stack)"
    perf script -i "$WORK/perf.data" -F comm,tid,ip,sym,dso 2>/dev/null | awk -f "$HERE/perf_categories.awk" || true
    echo
    echo "## self time by symbol (top 25)"
    { perf report -i "$WORK/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null || true; } |
      grep -v '^#' | grep -v '^ *$' | sed -E 's/[ -]+$//' | head -25 || true
  } >"$PERF_TXT"
  log "perf report: $PERF_TXT"
fi

# ---------------------------------------------------------------- report
report() {
  echo "Command: \`$( [[ "$BENCH_PS" == 1 ]] && printf 'BENCH_PS=1 ')$( [[ "${QUICK:-0}" == 1 ]] && printf 'QUICK=1 ')integration/bench/point_select.sh\`" \
    "(BENCH_THREADS=\"$BENCH_THREADS\" BENCH_PAIRS=$BENCH_PAIRS BENCH_TIME=$BENCH_TIME BENCH_WARMUP=$BENCH_WARMUP)"
  echo
  echo "Started $started; $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); sysbench $(sysbench --version | awk '{print $2}'); $(master -N -e 'SELECT VERSION()'); rows: ${#shards[@]} shards x $BENCH_ROWS on $MASTER_PORT; rand-seed $BENCH_SEED; proxy built from $revision."
  echo
  for threads in $BENCH_THREADS; do
    echo "### $threads threads$( [[ "$BENCH_PS" == 1 ]] && printf ', prepared statements')"
    echo
    echo "| pair | direct QPS | proxy QPS | ratio | direct p50 / p95 (µs) | proxy p50 / p95 (µs) | added p50 (µs) | CPU µs / query, direct: mariadbd + sysbench + softirq | CPU µs / query, proxy: proxy + mariadbd + sysbench + softirq | others' CPU during, direct / proxy |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    awk -F'\t' -v T="$threads" '
      $1 == T { k = $2 SUBSEP $3; qps[k] = $4; p50[k] = $5; p95[k] = $6; pc[k] = $8; mc[k] = $9; sc[k] = $10; ic[k] = $11; ot[k] = $13; if ($2 > np) np = $2 }
      END {
        for (p = 1; p <= np; p++) {
          d = p SUBSEP "direct"; x = p SUBSEP "proxy"
          dc = sprintf("%.0f + %.0f + %.0f = %.0f", mc[d], sc[d], ic[d], mc[d] + sc[d] + ic[d])
          if (x in qps) {
            printf "| %d | %.0f | %.0f | %.3f | %d / %d | %d / %d | %+d | %s | %.0f + %.0f + %.0f + %.0f = %.0f | %d%% / %d%% |\n", p, qps[d], qps[x], qps[x] / qps[d],
              p50[d], p95[d], p50[x], p95[x], p50[x] - p50[d], dc,
              pc[x], mc[x], sc[x], ic[x], pc[x] + mc[x] + sc[x] + ic[x], ot[d], ot[x]
          } else {
            printf "| %d | %.0f | - | - | %d / %d | - | - | %s | - | %d%% / - |\n", p, qps[d], p50[d], p95[d], dc, ot[d]
          }
        }
      }' "$RUNS"
    median=$(awk -F'\t' -v T="$threads" '$1 == T && $3 == "direct" { d[$2] = $4 } $1 == T && $3 == "proxy" { x[$2] = $4 }
      END { n = 0; for (p in x) r[++n] = x[p] / d[p]; if (n == 0) { print "-"; exit }
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
            printf "%.3f", n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2 }' "$RUNS")
    echo
    if [[ "$BENCH_PS" == 1 ]]; then
      echo "Median proxy/direct QPS ratio at $threads threads: **$median** (goal >= 0.75)."
      echo
      awk -F'\t' -v T="$threads" '$1 == T { n[$3]++; e[$3] += $14; p[$3] += $15; s[$3] += $16; c[$3] += $17 }
        END { printf "Master counters per lookup (mean of the runs; global counters, so other traffic on the fleet is included): direct %.2f COM_STMT_EXECUTE, %.2f Com_select, %.0f statements prepared per run", e["direct"] / n["direct"], s["direct"] / n["direct"], c["direct"] / n["direct"]
              if ("proxy" in n) printf "; proxy %.2f COM_STMT_EXECUTE, %.2f Com_select, %.4f Com_stmt_prepare, %.0f statements prepared by the client per run", e["proxy"] / n["proxy"], s["proxy"] / n["proxy"], p["proxy"] / n["proxy"], c["proxy"] / n["proxy"]
              print "." }' "$RUNS"
    else
      echo "Median proxy/direct QPS ratio at $threads threads: **$median** (goal >= 0.80)."
    fi
    echo
  done
  if [[ -n "$PERF_TXT" ]]; then
    echo "### perf profile of the proxy (${BENCH_PERF_TIME} s, ${BENCH_THREADS##* } threads)"
    echo
    echo '```'
    cat "$PERF_TXT"
    echo '```'
  fi
}
report | tee "$WORK/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$WORK/report.md" "$BENCH_REPORT"
