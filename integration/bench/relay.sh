#!/usr/bin/env bash
# Point lookups by global ID: direct to the master vs through HAProxy (a plain
# TCP relay) vs through shardgate, side by side, text and prepared.
#
#   integration/bench/relay.sh                      # full run (text and prepared, 1/8/32 threads, 3 rounds x 20 s)
#   QUICK=1 integration/bench/relay.sh              # smoke run (1 round x 5 s)
#   BENCH_PROTOCOLS=ps integration/bench/relay.sh   # prepared statements only
#   BENCH_REPORT=/tmp/relay.md BENCH_REV=HEAD integration/bench/relay.sh
#
# Needs the local fleet (integration/fleet.sh start; shard databases created by
# `shardgate fleet init`). What it does:
#   1. seeds BENCH_SHARDS x BENCH_ROWS pins on master A (3307) and writes the ID
#      file, as point_select.sh does (lib.sh: seed_rows);
#   2. builds and starts a release shardgate on free ports (lib.sh:
#      build_proxy/start_proxy, BENCH_REV builds a commit from a clean export)
#      and checks that it returns the master's rows;
#   3. installs HAProxy from apt if missing (Debian 12: 2.6) and starts its own
#      instance, never the system service: `haproxy -f WORK/haproxy.cfg -db`,
#      `nbthread 1`, `mode tcp`, on a free loopback port, in front of master A;
#      it is stopped on exit with shardgate;
#   4. for each protocol of BENCH_PROTOCOLS (text: COM_QUERY; ps: server-side
#      prepared statements, sysbench --db-ps-mode=auto, a fallback to emulated
#      prepares fails the run) and each thread count, warms every mode up,
#      then runs BENCH_ROUNDS rounds of the three modes, the order rotated each
#      round (direct, haproxy, shardgate; haproxy, shardgate, direct; ...),
#      with the same rows and --rand-seed in every run (point_select.lua):
#        direct     SELECT data FROM dbNNNNN.pins WHERE local_id = ?   on 3307
#        haproxy    the same statements, through HAProxy (it does no routing)
#        shardgate  SELECT data FROM pins WHERE id = ?   (global 64-bit ID)
#      Every run must return exactly one row per lookup;
#   5. prints per round, and writes as markdown (BENCH_REPORT=FILE):
#      QPS; p50/p95 latency (sysbench's histogram); the ratios shardgate/HAProxy
#      and shardgate/direct and their medians over the rounds; the CPU time per
#      statement of the relay (haproxy or shardgate, from /proc/PID/stat), of
#      the master's mariadbd, of sysbench and the machine's irq+softirq
#      (loopback TCP); the CPU other processes used meanwhile (noise); and a
#      summary table (medians) with the p50 latency each relay adds over direct.
#
# Environment (defaults in brackets):
#   BENCH_THREADS ["1 8 32"]  BENCH_ROUNDS [3]  BENCH_TIME [20] seconds per run
#   BENCH_PROTOCOLS ["text ps"]  text, ps, or both (in that order)
#   BENCH_WARMUP [5] seconds per mode before each thread count (0: none)
#   QUICK=1                 BENCH_ROUNDS=1 BENCH_TIME=5 BENCH_WARMUP=2
#   BENCH_SHARDS [64]  BENCH_SHARD_STEP [32]  BENCH_ROWS [500]
#   BENCH_BUILD [1]         run `cargo build --release` first (0: use the binary as is)
#   BENCH_REV=COMMIT        build COMMIT from a clean `git archive` export instead
#                           (target dir BENCH_TARGET_DIR [/tmp/shardgate-bench-target])
#   SHARDGATE_BIN           binary to run [target/release/shardgate]
#   BENCH_REPORT=FILE       also write the markdown report to FILE
#   BENCH_KEEP=1            keep the work directory (logs, sysbench output, haproxy.cfg)
#   MASTER_PORT [3307]  BACKEND_USER [shard]  BACKEND_PASSWORD [shardpw]
#   APP_USER [app]  APP_PASSWORD [app]  CONFIG [config/shardgate.yaml]
#   BENCH_SEED [20240601]   sysbench --rand-seed (same in every mode)
#   BENCH_QUIET_BUSY [25] BENCH_QUIET_WAIT [120]  before each run, wait up to
#                           WAIT s for the CPUs to be under BUSY % busy (shared machine)
# Run time: protocols x threads x (3 x warm-up + rounds x 3 x (time + quiet wait)):
# about 20 minutes with the defaults on a quiet machine.
set -euo pipefail

if [[ "${QUICK:-0}" == 1 ]]; then
  : "${BENCH_ROUNDS:=1}" "${BENCH_TIME:=5}" "${BENCH_WARMUP:=2}"
fi
BENCH_THREADS=${BENCH_THREADS:-"1 8 32"}
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
BENCH_TIME=${BENCH_TIME:-20}
BENCH_WARMUP=${BENCH_WARMUP:-5}
BENCH_PROTOCOLS=${BENCH_PROTOCOLS:-"text ps"}
LOG_TAG=relay
# shellcheck source=integration/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for proto in $BENCH_PROTOCOLS; do
  [[ "$proto" == text || "$proto" == ps ]] || die "BENCH_PROTOCOLS: '$proto' is neither text nor ps"
done

ensure_sysbench
seed_rows
build_proxy
start_proxy
check_proxy_rows
start_haproxy

started=$(date -u '+%Y-%m-%d %H:%M UTC')
revision=$(describe_revision)
modes=(direct haproxy proxy)
for proto in $BENCH_PROTOCOLS; do
  BENCH_PS=0
  if [[ "$proto" == ps ]]; then
    BENCH_PS=1
    check_proxy_rows
  fi
  for threads in $BENCH_THREADS; do
    if ((BENCH_WARMUP > 0)); then
      for mode in "${modes[@]}"; do
        log "warm-up $proto $mode, $threads threads, ${BENCH_WARMUP}s"
        run_sysbench "$mode" "$threads" "$BENCH_WARMUP" "$WORK/warmup-$proto-$threads-$mode.txt"
      done
    fi
    for ((round = 1; round <= BENCH_ROUNDS; round++)); do
      # Rotate the order so that drift (and being first after a pause) favours no mode.
      for ((k = 0; k < ${#modes[@]}; k++)); do
        measure "${modes[(k + round - 1) % ${#modes[@]}]}" "$threads" "$round"
      done
      log "$proto threads=$threads round=$round: $(awk -F'\t' -v P="$proto" -v T="$threads" -v R="$round" \
        '$18 == P && $1 == T && $2 == R { q[$3] = $4 }
         END { printf "shardgate/HAProxy %.3f, shardgate/direct %.3f", q["proxy"] / q["haproxy"], q["proxy"] / q["direct"] }' "$RUNS")"
    done
  done
done

# ---------------------------------------------------------------- report
# round_table PROTOCOL THREADS: one row per round.
round_table() {
  awk -F'\t' -v P="$1" -v T="$2" '
    $18 == P && $1 == T {
      k = $2 SUBSEP $3; qps[k] = $4; p50[k] = $5; p95[k] = $6; rc[k] = $8; mc[k] = $9; sc[k] = $10; ic[k] = $11; ot[k] = $13
      if ($2 > nr) nr = $2
    }
    function cpu(k, relay) {
      if (relay) return sprintf("%.0f + %.0f + %.0f + %.0f = %.0f", rc[k], mc[k], sc[k], ic[k], rc[k] + mc[k] + sc[k] + ic[k])
      return sprintf("%.0f + %.0f + %.0f = %.0f", mc[k], sc[k], ic[k], mc[k] + sc[k] + ic[k])
    }
    END {
      print "| round | QPS direct / HAProxy / shardgate | shardgate / HAProxy | shardgate / direct | p50 µs direct / HAProxy / shardgate | p95 µs direct / HAProxy / shardgate | CPU µs / stmt, direct: mariadbd + sysbench + softirq | HAProxy: haproxy + mariadbd + sysbench + softirq | shardgate: shardgate + mariadbd + sysbench + softirq | others% direct / HAProxy / shardgate |"
      print "|---|---|---|---|---|---|---|---|---|---|"
      for (r = 1; r <= nr; r++) {
        d = r SUBSEP "direct"; h = r SUBSEP "haproxy"; s = r SUBSEP "proxy"
        printf "| %d | %.0f / %.0f / %.0f | %.3f | %.3f | %d / %d / %d | %d / %d / %d | %s | %s | %s | %d / %d / %d |\n", r,
          qps[d], qps[h], qps[s], qps[s] / qps[h], qps[s] / qps[d],
          p50[d], p50[h], p50[s], p95[d], p95[h], p95[s],
          cpu(d, 0), cpu(h, 1), cpu(s, 1), ot[d], ot[h], ot[s]
      }
    }' "$RUNS"
}

# summary_row PROTOCOL THREADS row|text: the lead table's row (medians over the
# rounds), or the sentence under the round table (with, at 1 thread, the added latency).
summary_row() {
  awk -F'\t' -v P="$1" -v T="$2" -v OUT="$3" '
    function median(a, n,    i, j, t) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $18 == P && $1 == T {
      k = $2 SUBSEP $3; qps[k] = $4; p50[k] = $5; rc[k] = $8; mc[k] = $9; ru[k] = $19
      if ($2 > nr) nr = $2
      if ($13 > oth) oth = $13
    }
    END {
      for (r = 1; r <= nr; r++) {
        d = r SUBSEP "direct"; h = r SUBSEP "haproxy"; s = r SUBSEP "proxy"
        qd[r] = qps[d]; qh[r] = qps[h]; qs[r] = qps[s]
        rsh[r] = qps[s] / qps[h]; rsd[r] = qps[s] / qps[d]; rhd[r] = qps[h] / qps[d]
        ld[r] = p50[d]; lh[r] = p50[h]; ls[r] = p50[s]
        ah[r] = p50[h] - p50[d]; as[r] = p50[s] - p50[d]
        ch[r] = rc[h]; cs[r] = rc[s]; uh[r] = ru[h]; ush[r] = ru[s]; md[r] = mc[d]; mh[r] = mc[h]; ms[r] = mc[s]
      }
      if (OUT == "row") {
        printf "| %s | %d | %.0f / %.0f / %.0f | **%.3f** | **%.3f** | %.3f | %.0f / %.0f / %.0f | %+.0f / %+.0f | %.1f (%.1f) / %.1f (%.1f) | %.1f / %.1f / %.1f | %d%% |\n",
          P == "ps" ? "prepared" : "text", T, median(qd, nr), median(qh, nr), median(qs, nr),
          median(rsh, nr), median(rsd, nr), median(rhd, nr),
          median(ld, nr), median(lh, nr), median(ls, nr), median(ah, nr), median(as, nr),
          median(ch, nr), median(uh, nr), median(cs, nr), median(ush, nr), median(md, nr), median(mh, nr), median(ms, nr), oth
      } else {
        # median() sorts its array: afterwards [1] and [nr] are the range.
        msh = median(rsh, nr); msd = median(rsd, nr); mhd = median(rhd, nr); mas = median(as, nr); mah = median(ah, nr)
        printf "Medians over %d round(s): shardgate/HAProxy QPS **%.3f** (range %.3f - %.3f), shardgate/direct **%.3f** (range %.3f - %.3f), HAProxy/direct %.3f.",
          nr, msh, rsh[1], rsh[nr], msd, rsd[1], rsd[nr], mhd
        if (T == 1) printf " At 1 thread the p50 latency added over direct is **%+.0f µs** through shardgate and **%+.0f µs** through HAProxy (medians of the per-round differences).", mas, mah
        print ""
      }
    }' "$RUNS"
}

report() {
  echo "Command: \`$( [[ "${QUICK:-0}" == 1 ]] && printf 'QUICK=1 ')integration/bench/relay.sh\`" \
    "(BENCH_PROTOCOLS=\"$BENCH_PROTOCOLS\" BENCH_THREADS=\"$BENCH_THREADS\" BENCH_ROUNDS=$BENCH_ROUNDS BENCH_TIME=$BENCH_TIME BENCH_WARMUP=$BENCH_WARMUP)"
  echo
  echo "Started $started; $(describe_machine); $(haproxy -v | awk 'NR == 1 {print "HAProxy " $3}') (mode tcp, nbthread 1); rows: ${#shards[@]} shards x $BENCH_ROWS on $MASTER_PORT; rand-seed $BENCH_SEED; shardgate built from $revision."
  echo
  echo "| protocol | threads | QPS direct / HAProxy / shardgate | shardgate / HAProxy | shardgate / direct | HAProxy / direct | p50 µs direct / HAProxy / shardgate | added p50 µs HAProxy / shardgate | relay CPU µs / stmt (its user-space part) HAProxy / shardgate | mariadbd CPU µs / stmt direct / HAProxy / shardgate | others' CPU (max) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for proto in $BENCH_PROTOCOLS; do
    for threads in $BENCH_THREADS; do summary_row "$proto" "$threads" row; done
  done
  echo
  echo "Medians over the rounds; a ratio is of the QPS of the same round. Relay CPU: the haproxy or shardgate process per statement; mariadbd: master A's. Others' CPU: the highest share of all CPUs that other processes used during any run of that row (noise on a shared machine)."
  for proto in $BENCH_PROTOCOLS; do
    for threads in $BENCH_THREADS; do
      echo
      echo "### $([[ "$proto" == ps ]] && echo 'prepared statements' || echo 'text queries'), $threads thread(s)"
      echo
      round_table "$proto" "$threads"
      echo
      summary_row "$proto" "$threads" text
    done
  done
}
report | tee "$WORK/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$WORK/report.md" "$BENCH_REPORT"
