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
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/integration/bench"
LUA="$HERE/point_select.lua"

if [[ "${QUICK:-0}" == 1 ]]; then
  : "${BENCH_PAIRS:=1}" "${BENCH_TIME:=5}" "${BENCH_WARMUP:=2}"
fi
BENCH_THREADS=${BENCH_THREADS:-"8 32"}
BENCH_PAIRS=${BENCH_PAIRS:-3}
BENCH_TIME=${BENCH_TIME:-20}
BENCH_WARMUP=${BENCH_WARMUP:-5}
BENCH_SHARDS=${BENCH_SHARDS:-64}
BENCH_SHARD_STEP=${BENCH_SHARD_STEP:-32}
BENCH_ROWS=${BENCH_ROWS:-500}
BENCH_DIRECT_ONLY=${BENCH_DIRECT_ONLY:-0}
BENCH_PS=${BENCH_PS:-0}
BENCH_BUILD=${BENCH_BUILD:-1}
BENCH_REV=${BENCH_REV:-}
BENCH_TARGET_DIR=${BENCH_TARGET_DIR:-/tmp/shardgate-bench-target}
BENCH_PERF=${BENCH_PERF:-0}
BENCH_PERF_TIME=${BENCH_PERF_TIME:-10}
BENCH_SEED=${BENCH_SEED:-20240601}
BENCH_QUIET_BUSY=${BENCH_QUIET_BUSY:-25}
BENCH_QUIET_WAIT=${BENCH_QUIET_WAIT:-120}
MASTER_HOST=127.0.0.1
MASTER_PORT=${MASTER_PORT:-3307}
BACKEND_USER=${BACKEND_USER:-shard}
BACKEND_PASSWORD=${BACKEND_PASSWORD:-shardpw}
APP_USER=${APP_USER:-app}
APP_PASSWORD=${APP_PASSWORD:-app}
CONFIG=${CONFIG:-$ROOT/config/shardgate.yaml}
SHARDGATE_BIN=${SHARDGATE_BIN:-$ROOT/target/release/shardgate}
PIN_TYPE=1          # types.pin in config/shardgate.yaml
MASTER_A_LAST=2047  # master A (3307) holds shards 0..2047

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

WORK=$(mktemp -d /tmp/shardgate-bench.XXXXXX)
PROXY_PID=
cleanup() {
  local rc=$?
  if [[ -n "$PROXY_PID" ]] && kill -0 "$PROXY_PID" 2>/dev/null; then
    kill "$PROXY_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PROXY_PID" 2>/dev/null || true
  fi
  if [[ "${BENCH_KEEP:-0}" == 1 || $rc -ne 0 ]]; then
    log "work directory kept: $WORK"
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- tools
if ! command -v sysbench >/dev/null; then
  log "installing sysbench"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y sysbench >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get install -y sysbench >/dev/null; } ||
    die "cannot install sysbench"
fi
command -v mariadb >/dev/null || die "the mariadb client is needed (apt-get install mariadb-client)"

master() { mariadb -h"$MASTER_HOST" -P"$MASTER_PORT" -u"$BACKEND_USER" -p"$BACKEND_PASSWORD" "$@"; }
master -N -e 'SELECT 1' >/dev/null 2>&1 ||
  die "master $MASTER_HOST:$MASTER_PORT does not answer; start the fleet: integration/fleet.sh start"

# ---------------------------------------------------------------- seed
shards=()
for ((i = 0; i < BENCH_SHARDS; i++)); do shards+=($((i * BENCH_SHARD_STEP))); done
((${shards[-1]} <= MASTER_A_LAST)) || die "shard ${shards[-1]} is not on master A (0..$MASTER_A_LAST)"
db() { printf 'db%05d' "$1"; }

# Rows are marked by a 'bench:' data prefix; count them per shard in one query.
count_sql=
for s in "${shards[@]}"; do
  count_sql+="${count_sql:+ UNION ALL }SELECT $s, COUNT(*) FROM $(db "$s").pins WHERE data LIKE 'bench:%'"
done
master -N -e "$count_sql" >"$WORK/counts.txt" ||
  die "cannot read the shard databases on $MASTER_PORT (run: shardgate fleet init --config config/shardgate.yaml --schema config/schema.sql)"
declare -A have
while read -r s n; do have[$s]=$n; done <"$WORK/counts.txt"

pad=$(printf '%0100d' 0 | tr 0 x)
seed_sql="$WORK/seed.sql"
: >"$seed_sql"
missing=0
for s in "${shards[@]}"; do
  need=$((BENCH_ROWS - ${have[$s]:-0}))
  ((need > 0)) || continue
  missing=$((missing + need))
  {
    printf 'INSERT INTO %s.pins (data) VALUES ' "$(db "$s")"
    sep=
    for ((r = 0; r < need; r++)); do
      d="bench:$s:$r:$pad"
      printf "%s('%s')" "$sep" "${d:0:100}"
      sep=,
    done
    printf ';\n'
  } >>"$seed_sql"
done
if ((missing > 0)); then
  log "seeding $missing rows on $MASTER_PORT (${#shards[@]} shards x $BENCH_ROWS rows)"
  master <"$seed_sql"
else
  log "reusing ${#shards[@]} x $BENCH_ROWS seeded rows on $MASTER_PORT"
fi

IDS="$WORK/ids.txt"
read_sql=
for s in "${shards[@]}"; do
  read_sql+="${read_sql:+ UNION ALL }SELECT ($s << 46) | ($PIN_TYPE << 36) | local_id, $s, local_id FROM (SELECT local_id FROM $(db "$s").pins WHERE data LIKE 'bench:%' ORDER BY local_id LIMIT $BENCH_ROWS) t$s"
done
master -N -e "$read_sql" | tr '\t' ' ' >"$IDS"
nids=$(wc -l <"$IDS")
((nids == BENCH_SHARDS * BENCH_ROWS)) || die "ID file has $nids rows, expected $((BENCH_SHARDS * BENCH_ROWS))"
log "ID file: $nids rows ($IDS)"

# ---------------------------------------------------------------- proxy
free_port() {
  local p used
  used=$(ss -Htan | awk '{n = split($4, a, ":"); print a[n]}' | sort -u)
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 30000))
    grep -qx "$p" <<<"$used" || { echo "$p"; return; }
  done
  die "no free port"
}

pid_of_port() { ss -Htlnp "sport = :$1" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2; }

PROXY_PORT=
if [[ "$BENCH_DIRECT_ONLY" != 1 ]]; then
  if [[ -n "$BENCH_REV" ]]; then
    rev_full=$(git -C "$ROOT" rev-parse --verify "$BENCH_REV^{commit}") || die "unknown commit $BENCH_REV"
    log "cargo build --release of ${rev_full:0:7} (clean export; target $BENCH_TARGET_DIR)"
    mkdir -p "$WORK/src"
    git -C "$ROOT" archive "$rev_full" | tar -x -C "$WORK/src" || die "git archive $rev_full failed"
    if [[ ! -d "$BENCH_TARGET_DIR/release" && -d "$ROOT/target/release" ]]; then
      mkdir -p "$BENCH_TARGET_DIR" && cp -a "$ROOT/target/release" "$BENCH_TARGET_DIR/" || true
    fi
    (cd "$WORK/src" && CARGO_TARGET_DIR="$BENCH_TARGET_DIR" cargo build --release --quiet --bin shardgate) ||
      die "cargo build --release of ${rev_full:0:7} failed"
    SHARDGATE_BIN="$BENCH_TARGET_DIR/release/shardgate"
  elif [[ "$BENCH_BUILD" == 1 ]]; then
    log "cargo build --release"
    (cd "$ROOT" && cargo build --release --quiet) || die "cargo build --release failed"
  fi
  [[ -x "$SHARDGATE_BIN" ]] || die "no proxy binary at $SHARDGATE_BIN"
  # Run a private copy: a concurrent rebuild cannot swap it, perf keeps its symbols.
  cp "$SHARDGATE_BIN" "$WORK/shardgate"
  PROXY_PORT=$(free_port)
  ADMIN_PORT=$(free_port)
  while [[ "$ADMIN_PORT" == "$PROXY_PORT" ]]; do ADMIN_PORT=$(free_port); done
  sed -E -e "s/^listen:.*/listen: 127.0.0.1:$PROXY_PORT/" \
         -e "s/^(  listen:).*/\1 127.0.0.1:$ADMIN_PORT/" "$CONFIG" >"$WORK/shardgate.yaml"
  [[ $(grep -cE "^ *listen: 127.0.0.1:($PROXY_PORT|$ADMIN_PORT)\$" "$WORK/shardgate.yaml") == 2 ]] ||
    die "could not rewrite both listen addresses in the config copy"
  log "starting proxy on 127.0.0.1:$PROXY_PORT (admin $ADMIN_PORT)"
  "$WORK/shardgate" serve --config "$WORK/shardgate.yaml" >"$WORK/proxy.log" 2>&1 &
  PROXY_PID=$!
  ready=0
  for _ in $(seq 100); do
    kill -0 "$PROXY_PID" 2>/dev/null || { cat "$WORK/proxy.log" >&2; PROXY_PID=; die "the proxy exited"; }
    if mariadb -h127.0.0.1 -P"$PROXY_PORT" -u"$APP_USER" -p"$APP_PASSWORD" -N -e 'SELECT 1' >/dev/null 2>&1; then
      ready=1; break
    fi
    sleep 0.2
  done
  ((ready)) || { tail -20 "$WORK/proxy.log" >&2; die "the proxy does not answer SELECT 1 within 20 s"; }
  # Correctness spot check: a few rows read through the proxy equal the direct read.
  while read -r gid s lid; do
    via=$(mariadb -h127.0.0.1 -P"$PROXY_PORT" -u"$APP_USER" -p"$APP_PASSWORD" -N -e "SELECT data FROM pins WHERE id = $gid" 2>&1) || true
    dir=$(master -N -e "SELECT data FROM $(db "$s").pins WHERE local_id = $lid")
    [[ "$via" == "$dir" ]] || die "id $gid: proxy returned '$via', master has '$dir'"
  done < <(awk 'NR % 997 == 1' "$IDS")
  log "proxy answers and returns the same rows as the master"
  if [[ "$BENCH_PS" == 1 ]]; then
    PY="$ROOT/integration/.venv/bin/python"
    if [[ -x "$PY" ]] && "$PY" -c 'import mysql.connector' 2>/dev/null; then
      awk 'NR % 997 == 1' "$IDS" >"$WORK/ps-sample.txt"
      "$PY" - "$PROXY_PORT" "$APP_USER" "$APP_PASSWORD" "$MASTER_PORT" "$BACKEND_USER" "$BACKEND_PASSWORD" "$WORK/ps-sample.txt" >"$WORK/ps-check.txt" <<'PY' ||
import sys, mysql.connector
pport, pu, pp, mport, mu, mp, sample = sys.argv[1:]
via = mysql.connector.connect(host="127.0.0.1", port=int(pport), user=pu, password=pp, use_pure=True)
direct = mysql.connector.connect(host="127.0.0.1", port=int(mport), user=mu, password=mp, use_pure=True)
cv, cd = via.cursor(prepared=True), direct.cursor()
n = 0
for line in open(sample):
    gid, shard, lid = (int(x) for x in line.split())
    cv.execute("SELECT data FROM pins WHERE id = ?", (gid,))
    got = cv.fetchall()
    cd.execute("SELECT data FROM db%05d.pins WHERE local_id = %d" % (shard, lid))
    want = cd.fetchall()
    g = got[0][0] if len(got) == 1 else None
    w = want[0][0] if len(want) == 1 else None
    g = g.decode() if isinstance(g, (bytes, bytearray)) else g
    w = w.decode() if isinstance(w, (bytes, bytearray)) else w
    if g is None or g != w:
        sys.exit("id %d: proxy (prepared) returned %r, master has %r" % (gid, got, want))
    n += 1
print(n)
PY
        die "a row read through the proxy with a prepared statement differs from the master"
      log "proxy answers prepared statements with the same rows as the master ($(cat "$WORK/ps-check.txt") rows compared, mysql-connector-python cursor(prepared=True))"
    else
      log "integration/.venv has no mysql.connector: skipping the prepared-statement row comparison (integration/drivers/setup.sh installs it)"
    fi
  fi
fi

# ---------------------------------------------------------------- runs
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { [[ -n "$1" && -r /proc/$1/stat ]] && awk '{print $14 + $15}' "/proc/$1/stat" || echo 0; }
# Jiffies of the whole machine (all CPUs): busy (user+nice+system+irq+softirq+steal),
# total, process time (user+nice+system), irq+softirq (loopback TCP delivery
# is softirq work that this kernel accounts to no process).
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $2 + $3 + $4, $7 + $8}' /proc/stat; }
# The machine is shared: before each run, wait (up to BENCH_QUIET_WAIT s) until
# the CPUs are less than BENCH_QUIET_BUSY % busy over a second. Prints the last %.
wait_quiet() {
  local b0 t0 b1 t1 busy=100 waited=0
  while :; do
    read -r b0 t0 _ < <(machine_ticks); sleep 1; read -r b1 t1 _ < <(machine_ticks)
    busy=$(((b1 - b0) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1)))
    ((busy < BENCH_QUIET_BUSY || waited >= BENCH_QUIET_WAIT)) && break
    ((waited % 30 == 0)) && log "machine ${busy}% busy; waiting for a quieter moment"
    waited=$((waited + 1))
  done
  echo "$busy"
}

# run_sysbench MODE THREADS SECONDS OUTFILE: one attempt, non-zero on failure.
sysbench_once() {
  local mode=$1 threads=$2 secs=$3 out=$4 conn ps=(--ps=off)
  [[ "$BENCH_PS" != 1 ]] || ps=(--ps=on --db-ps-mode=auto)
  if [[ "$mode" == proxy ]]; then
    conn=(--mysql-port="$PROXY_PORT" --mysql-user="$APP_USER" --mysql-password="$APP_PASSWORD" --mysql-db=)
  else
    conn=(--mysql-port="$MASTER_PORT" --mysql-user="$BACKEND_USER" --mysql-password="$BACKEND_PASSWORD" --mysql-db=db00000)
  fi
  # `times` in the subshell reports the CPU time of its children: sysbench.
  (
    timeout $((secs + 60)) sysbench "$LUA" --mode="$mode" --ids="$IDS" "${ps[@]}" \
      --threads="$threads" --time="$secs" --events=0 --rand-seed="$BENCH_SEED" \
      --histogram=on --percentile=95 --report-interval=0 --db-driver=mysql \
      --mysql-host=127.0.0.1 "${conn[@]}" run
    rc=$?
    times >"$out.times"
    exit $rc
  ) >"$out" 2>&1 || return 1
  echo "children-times: $(tail -1 "$out.times")" >>"$out"
  # sysbench falls back to emulated (text) prepares, with only an informational
  # "using emulation" line, when the server refuses COM_STMT_PREPARE with
  # ER_UNSUPPORTED_PS; that would not be this benchmark.
  if [[ "$BENCH_PS" == 1 ]] && grep -qi 'using emulation' "$out"; then
    die "sysbench fell back to emulated prepared statements ($mode): $(grep -m1 -i 'emulation' "$out")"
  fi
}

# run_sysbench MODE THREADS SECONDS OUTFILE. On this shared machine a client
# connect has been seen to fail once under heavy load: retry once, then give up.
run_sysbench() {
  sysbench_once "$@" && return 0
  tail -5 "$4" >&2
  if [[ "$1" == proxy ]] && ! kill -0 "$PROXY_PID" 2>/dev/null; then
    tail -20 "$WORK/proxy.log" >&2; PROXY_PID=; die "the proxy died"
  fi
  log "sysbench $1 with $2 threads failed (output above); retrying once in 5 s"
  mv "$4" "$4.failed"
  sleep 5
  sysbench_once "$@" || { tail -30 "$4" >&2; die "sysbench $1 with $2 threads failed twice (output: $4)"; }
}

# Parse one sysbench output: qps p50_us p95_us errors sysbench_cpu_s queries thread_reports
parse_run() {
  awk '
    /^ *queries:/ { q = $2; gsub(/[()]/, "", $3); qps = $3 }
    /^ *ignored errors:/ { ign = $3 }
    # Per-thread reports; match anywhere in the line (threads share stdout).
    { l = $0; while (match(l, /bench-errors: [0-9]+/)) { bad += substr(l, RSTART + 14, RLENGTH - 14); reports++; l = substr(l, RSTART + RLENGTH) } }
    /^ *[0-9.]+ \|\**  *[0-9]+$/ { n++; v[n] = $1; c[n] = $NF; tot += $NF }
    /^children-times:/ {
      for (i = 2; i <= 3; i++) { split($i, t, /[ms]/); cpu += t[1] * 60 + t[2] }
    }
    END {
      p50 = p95 = "nan"; acc = 0
      for (i = 1; i <= n; i++) {
        acc += c[i]
        if (p50 == "nan" && acc >= 0.50 * tot) p50 = v[i]
        if (p95 == "nan" && acc >= 0.95 * tot) p95 = v[i]
      }
      printf "%s %.0f %.0f %d %.2f %s %d\n", qps, p50 * 1000, p95 * 1000, bad + ign, cpu, q, reports
    }' "$1"
}

RUNS="$WORK/runs.tsv"
: >"$RUNS"
# The master's statement counters (global, so they include anyone else's
# traffic on the shared fleet): Com_stmt_execute Com_stmt_prepare Com_select.
master_counters() {
  master -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_stmt_execute', 'Com_stmt_prepare', 'Com_select')" |
    awk '{ v[$1] = $2 } END { print v["Com_stmt_execute"] + 0, v["Com_stmt_prepare"] + 0, v["Com_select"] + 0 }'
}
# measure MODE THREADS PAIR: one recorded run with CPU accounting
measure() {
  local mode=$1 threads=$2 pair=$3 out p0 m0 p1 m1 load
  out="$WORK/sysbench-$threads-$pair-$mode.txt"
  before=$(wait_quiet)
  # The fleet may have been restarted by someone else's test: look the master up each time.
  MASTER_PID=$(pid_of_port "$MASTER_PORT")
  read -r ce0 cp0 cs0 < <(master_counters)
  p0=$(cpu_ticks "$PROXY_PID"); m0=$(cpu_ticks "$MASTER_PID"); read -r b0 t0 u0 i0 < <(machine_ticks)
  run_sysbench "$mode" "$threads" "$BENCH_TIME" "$out"
  p1=$(cpu_ticks "$PROXY_PID"); m1=$(cpu_ticks "$MASTER_PID"); read -r b1 t1 u1 i1 < <(machine_ticks)
  read -r ce1 cp1 cs1 < <(master_counters)
  [[ "$(pid_of_port "$MASTER_PORT")" == "$MASTER_PID" ]] || die "the master on $MASTER_PORT restarted during the run"
  read -r qps p50 p95 errs sbcpu queries reports < <(parse_run "$out")
  ((reports == threads)) || die "$reports of $threads sysbench threads reported their row checks ($out)"
  ((errs == 0)) || die "$errs lookups did not return exactly one row ($out)"
  # Statements the client prepared (sysbench threads' bench-prepared lines) and
  # the master's counters per query.
  nprep=$(grep -o 'bench-prepared: [0-9]*' "$out" | awk '{ n += $2 } END { print n + 0 }')
  read -r exq prq seq < <(awk -v q="$queries" -v e="$((ce1 - ce0))" -v p="$((cp1 - cp0))" -v s="$((cs1 - cs0))" \
    'BEGIN { printf "%.3f %.4f %.3f\n", e / q, p / q, s / q }')
  if [[ "$BENCH_PS" == 1 && "$mode" == direct ]]; then
    awk -v r="$exq" 'BEGIN { exit !(r >= 0.99) }' ||
      die "direct prepared run: the master counted only $exq COM_STMT_EXECUTE per query ($out)"
  fi
  [[ "$mode" == proxy ]] || p1=$p0
  # Per query, in µs of CPU: proxy, mariadbd (master), sysbench, irq+softirq
  # (whole machine), and the process time of everything else during the run
  # in % of all CPUs (other engineers' builds and tests, the replica): the noise.
  read -r pcq mcq scq icq other < <(awk -v q="$queries" -v hz="$CLK_TCK" -v p="$((p1 - p0))" -v m="$((m1 - m0))" \
    -v sb="$sbcpu" -v u="$((u1 - u0))" -v i="$((i1 - i0))" -v t="$((t1 - t0))" 'BEGIN {
      us = 1e6 / hz / q; o = (u - p - m - sb * hz) * 100 / (t > 0 ? t : 1)
      printf "%.1f %.1f %.1f %.1f %d\n", p * us, m * us, sb * 1e6 / q, i * us, o < 0 ? 0 : o }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$threads" "$pair" "$mode" "$qps" "$p50" "$p95" \
    "$queries" "$pcq" "$mcq" "$scq" "$icq" "$before" "$other" "$exq" "$prq" "$seq" "$nprep" >>"$RUNS"
  log "threads=$threads pair=$pair $mode: $qps qps, p50 ${p50} us, p95 ${p95} us (CPU/query: proxy $pcq, mariadbd $mcq, sysbench $scq, softirq $icq us; busy before ${before}%, others during ${other}%; master per query: $exq stmt_execute, $prq stmt_prepare, $seq select; client prepared $nprep)"
}

modes=(direct proxy)
[[ "$BENCH_DIRECT_ONLY" == 1 ]] && modes=(direct)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
revision="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty=$(git -C "$ROOT" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null | wc -l)
((dirty == 0)) || revision+=" + $dirty uncommitted file(s) under src/ (shared working tree)"
if [[ -n "$BENCH_REV" && -n "$PROXY_PORT" ]]; then
  revision="${rev_full:0:7} (clean export of the commit, \`BENCH_REV=$BENCH_REV\`)"
elif [[ "$BENCH_BUILD" != 1 && -n "$PROXY_PORT" ]]; then
  revision="$SHARDGATE_BIN as built at $(date -u -r "$SHARDGATE_BIN" '+%Y-%m-%d %H:%M:%S UTC') (not rebuilt; the tree is now at $revision)"
fi
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
