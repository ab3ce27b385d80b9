# Shared parts of the sysbench point-lookup benchmarks (point_select.sh,
# relay.sh, idle_clients.sh): sourced, not run. The sourcing script sets
# LOG_TAG and may preset any of the variables below; the work directory
# ($WORK) and every process started through `start_proxy` / `start_haproxy`
# are removed / stopped on exit.
#
# Functions:
#   log, die                          messages on stderr, with the time
#   (and integration/lib.sh's: port_holder, kill_after, apt_install, ...)
#   ensure_sysbench, ensure_haproxy   install from apt if missing
#   seed_rows                         seed BENCH_SHARDS x BENCH_ROWS pins on master A, write $IDS
#   free_port
#   build_proxy, start_proxy          release build (BENCH_BUILD / BENCH_REV), start on free ports
#   check_proxy_rows                  text (and, with BENCH_PS=1, prepared) reads equal the master's
#   start_haproxy                     HAProxy 'mode tcp', 'nbthread 1' in front of master A
#   cpu_ticks, machine_ticks, wait_quiet
#   run_sysbench, parse_run, measure  one sysbench run and its CPU accounting (a row of $RUNS)
#   describe_revision                 what the proxy was built from

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/integration/bench"
LUA="$HERE/point_select.lua"
LOG_TAG=${LOG_TAG:-bench}
# shellcheck source=integration/lib.sh
source "$ROOT/integration/lib.sh"

BENCH_SHARDS=${BENCH_SHARDS:-64}
BENCH_SHARD_STEP=${BENCH_SHARD_STEP:-32}
BENCH_ROWS=${BENCH_ROWS:-500}
BENCH_PS=${BENCH_PS:-0}
BENCH_BUILD=${BENCH_BUILD:-1}
BENCH_REV=${BENCH_REV:-}
BENCH_TARGET_DIR=${BENCH_TARGET_DIR:-/tmp/shardgate-bench-target}
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

# integration/lib.sh's log and die, with the time.
log() { printf '[%s %s] %s\n' "$LOG_TAG" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

WORK=$(mktemp -d "/tmp/shardgate-$LOG_TAG.XXXXXX")
PROXY_PID=
HAPROXY_PID=
PROXY_PORT=
HAPROXY_PORT=
stop_pid() {
  [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null || return 0
  kill "$1" 2>/dev/null || true
  kill_after "$1" 5
}
cleanup() {
  local rc=$?
  stop_pid "$PROXY_PID"
  stop_pid "$HAPROXY_PID"
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
ensure_sysbench() {
  command -v sysbench >/dev/null && return 0
  log "installing sysbench"
  apt_install sysbench || die "cannot install sysbench"
}
ensure_haproxy() {
  command -v haproxy >/dev/null && return 0
  log "installing haproxy (apt; the package's system service is not used)"
  apt_install haproxy || die "cannot install haproxy"
  # Debian starts the packaged service on install; this benchmark runs its
  # own instance, so leave the system one as the package left it.
}
command -v mariadb >/dev/null || die "the mariadb client is needed (apt-get install mariadb-client)"

master() { mariadb -h"$MASTER_HOST" -P"$MASTER_PORT" -u"$BACKEND_USER" -p"$BACKEND_PASSWORD" "$@"; }
master -N -e 'SELECT 1' >/dev/null 2>&1 ||
  die "master $MASTER_HOST:$MASTER_PORT does not answer; start the fleet: integration/fleet.sh start"

db() { printf 'db%05d' "$1"; }

# ---------------------------------------------------------------- seed
# Seeds BENCH_SHARDS shards (0, STEP, 2*STEP, ...) of master A with
# BENCH_ROWS rows each (data 'bench:...', reused across runs) and writes
# $IDS: one "global_id shard local_id" line per row.
IDS="$WORK/ids.txt"
shards=()
seed_rows() {
  local s i r need missing=0 count_sql= read_sql= sep d pad nids
  shards=()
  for ((i = 0; i < BENCH_SHARDS; i++)); do shards+=($((i * BENCH_SHARD_STEP))); done
  ((${shards[-1]} <= MASTER_A_LAST)) || die "shard ${shards[-1]} is not on master A (0..$MASTER_A_LAST)"
  for s in "${shards[@]}"; do
    count_sql+="${count_sql:+ UNION ALL }SELECT $s, COUNT(*) FROM $(db "$s").pins WHERE data LIKE 'bench:%'"
  done
  master -N -e "$count_sql" >"$WORK/counts.txt" ||
    die "cannot read the shard databases on $MASTER_PORT (run: shardgate fleet init --config config/shardgate.yaml --schema config/schema.sql)"
  local -A have
  while read -r s n; do have[$s]=$n; done <"$WORK/counts.txt"
  pad=$(printf '%0100d' 0 | tr 0 x)
  : >"$WORK/seed.sql"
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
    } >>"$WORK/seed.sql"
  done
  if ((missing > 0)); then
    log "seeding $missing rows on $MASTER_PORT (${#shards[@]} shards x $BENCH_ROWS rows)"
    master <"$WORK/seed.sql"
  else
    log "reusing ${#shards[@]} x $BENCH_ROWS seeded rows on $MASTER_PORT"
  fi
  for s in "${shards[@]}"; do
    read_sql+="${read_sql:+ UNION ALL }SELECT ($s << 46) | ($PIN_TYPE << 36) | local_id, $s, local_id FROM (SELECT local_id FROM $(db "$s").pins WHERE data LIKE 'bench:%' ORDER BY local_id LIMIT $BENCH_ROWS) t$s"
  done
  master -N -e "$read_sql" | tr '\t' ' ' >"$IDS"
  nids=$(wc -l <"$IDS")
  ((nids == BENCH_SHARDS * BENCH_ROWS)) || die "ID file has $nids rows, expected $((BENCH_SHARDS * BENCH_ROWS))"
  log "ID file: $nids rows ($IDS)"
}

# ---------------------------------------------------------------- ports
TAKEN_PORTS=" "
free_port() {
  local p used
  used=$(ss -Htan | awk '{n = split($4, a, ":"); print a[n]}' | sort -u)
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 30000))
    [[ "$TAKEN_PORTS" != *" $p "* ]] || continue
    grep -qx "$p" <<<"$used" || { TAKEN_PORTS+="$p "; echo "$p"; return; }
  done
  die "no free port"
}

# ---------------------------------------------------------------- proxy
# Sets SHARDGATE_BIN to a release binary: BENCH_REV builds that commit from a
# clean `git archive` export; BENCH_BUILD=1 builds the working tree.
build_proxy() {
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
    (cd "$ROOT" && cargo build --release --quiet --bin shardgate) || die "cargo build --release failed"
  fi
  [[ -x "$SHARDGATE_BIN" ]] || die "no proxy binary at $SHARDGATE_BIN"
}

# start_proxy [EXTRA_YAML]: a private copy of the binary (a concurrent rebuild
# cannot swap it, perf keeps its symbols) with a copy of $CONFIG whose listen,
# admin and metrics addresses are free ports; EXTRA_YAML is appended to it.
# Sets PROXY_PORT, ADMIN_PORT, PROXY_PID.
start_proxy() {
  local ready=0 metrics_port
  cp "$SHARDGATE_BIN" "$WORK/shardgate"
  PROXY_PORT=$(free_port)
  ADMIN_PORT=$(free_port)
  metrics_port=$(free_port)
  sed -E -e "s/^listen:.*/listen: 127.0.0.1:$PROXY_PORT/" \
         -e "s/^(  listen:).*/\1 127.0.0.1:$ADMIN_PORT/" \
         -e "s/^metrics:.*/metrics: { listen: 127.0.0.1:$metrics_port }/" "$CONFIG" >"$WORK/shardgate.yaml"
  [[ $(grep -cE "^ *listen: 127.0.0.1:($PROXY_PORT|$ADMIN_PORT)\$" "$WORK/shardgate.yaml") == 2 ]] ||
    die "could not rewrite both listen addresses in the config copy"
  [[ -z "${1:-}" ]] || printf '%s\n' "$1" >>"$WORK/shardgate.yaml"
  log "starting proxy on 127.0.0.1:$PROXY_PORT (admin $ADMIN_PORT)"
  # shellcheck disable=SC2086 # PROXY_WRAPPER is a command line (valgrind ...)
  ${PROXY_WRAPPER:-} "$WORK/shardgate" serve --config "$WORK/shardgate.yaml" >"$WORK/proxy.log" 2>&1 &
  PROXY_PID=$!
  for _ in $(seq "${PROXY_START_TRIES:-100}"); do
    kill -0 "$PROXY_PID" 2>/dev/null || { cat "$WORK/proxy.log" >&2; PROXY_PID=; die "the proxy exited"; }
    if mariadb -h127.0.0.1 -P"$PROXY_PORT" -u"$APP_USER" -p"$APP_PASSWORD" -N -e 'SELECT 1' >/dev/null 2>&1; then
      ready=1; break
    fi
    sleep 0.2
  done
  ((ready)) || { tail -20 "$WORK/proxy.log" >&2; die "the proxy does not answer SELECT 1 within 20 s"; }
}

# Correctness spot check: a few rows read through the proxy equal the direct
# read; with BENCH_PS=1 also through mysql-connector-python's prepared cursor
# (integration/.venv, if present).
check_proxy_rows() {
  local gid s lid via dir PY
  while read -r gid s lid; do
    via=$(mariadb -h127.0.0.1 -P"$PROXY_PORT" -u"$APP_USER" -p"$APP_PASSWORD" -N -e "SELECT data FROM pins WHERE id = $gid" 2>&1) || true
    dir=$(master -N -e "SELECT data FROM $(db "$s").pins WHERE local_id = $lid")
    [[ "$via" == "$dir" ]] || die "id $gid: proxy returned '$via', master has '$dir'"
  done < <(awk 'NR % 997 == 1' "$IDS")
  log "proxy answers and returns the same rows as the master"
  [[ "$BENCH_PS" == 1 ]] || return 0
  PY="$ROOT/integration/.venv/bin/python"
  if ! [[ -x "$PY" ]] || ! "$PY" -c 'import mysql.connector' 2>/dev/null; then
    log "integration/.venv has no mysql.connector: skipping the prepared-statement row comparison (integration/drivers/setup.sh installs it)"
    return 0
  fi
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
}

# ---------------------------------------------------------------- haproxy
# HAProxy as a plain TCP relay in front of master A: one thread, `mode tcp`,
# on a free loopback port, run in the foreground (-db) by this script, never
# as a system service. Sets HAPROXY_PORT, HAPROXY_PID.
start_haproxy() {
  local ready=0
  ensure_haproxy
  HAPROXY_PORT=$(free_port)
  cat >"$WORK/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4096

defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h

listen mariadb_a
    bind 127.0.0.1:$HAPROXY_PORT
    server master_a $MASTER_HOST:$MASTER_PORT
EOF
  haproxy -c -f "$WORK/haproxy.cfg" >"$WORK/haproxy-check.log" 2>&1 ||
    { cat "$WORK/haproxy-check.log" >&2; die "haproxy rejects its generated config ($WORK/haproxy.cfg)"; }
  log "starting haproxy $(haproxy -v | awk 'NR == 1 {print $3}') on 127.0.0.1:$HAPROXY_PORT (mode tcp, nbthread 1) in front of $MASTER_HOST:$MASTER_PORT"
  # shellcheck disable=SC2086 # HAPROXY_WRAPPER is a command line (valgrind ...)
  ${HAPROXY_WRAPPER:-} haproxy -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 &
  HAPROXY_PID=$!
  for _ in $(seq "${HAPROXY_START_TRIES:-50}"); do
    kill -0 "$HAPROXY_PID" 2>/dev/null || { cat "$WORK/haproxy.log" >&2; HAPROXY_PID=; die "haproxy exited"; }
    if mariadb -h127.0.0.1 -P"$HAPROXY_PORT" -u"$BACKEND_USER" -p"$BACKEND_PASSWORD" -N -e 'SELECT 1' >/dev/null 2>&1; then
      ready=1; break
    fi
    sleep 0.2
  done
  ((ready)) || { tail -20 "$WORK/haproxy.log" >&2; die "haproxy does not relay SELECT 1 to $MASTER_PORT within 10 s"; }
}

# ---------------------------------------------------------------- CPU
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { [[ -n "$1" && -r /proc/$1/stat ]] && awk '{print $14 + $15}' "/proc/$1/stat" || echo 0; }
# The user-space part of cpu_ticks (the rest is the kernel's, for the process).
user_ticks() { [[ -n "$1" && -r /proc/$1/stat ]] && awk '{print $14}' "/proc/$1/stat" || echo 0; }
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

# ---------------------------------------------------------------- sysbench
# The process relaying MODE's traffic (none for direct).
relay_pid() {
  case "$1" in
    proxy) echo "$PROXY_PID" ;;
    haproxy) echo "$HAPROXY_PID" ;;
    *) echo "" ;;
  esac
}

# sysbench_once MODE THREADS SECONDS OUTFILE: one attempt, non-zero on failure.
# MODE proxy: shardgate (global IDs); direct: master A; haproxy: master A
# through HAProxy (the same shard-qualified statements as direct). With
# BENCH_EVENTS=N (and SECONDS 0) the run stops after N lookups instead.
sysbench_once() {
  local mode=$1 threads=$2 secs=$3 out=$4 conn lua_mode=direct ps=(--ps=off)
  [[ "$BENCH_PS" != 1 ]] || ps=(--ps=on --db-ps-mode=auto)
  case "$mode" in
    proxy) lua_mode=proxy
      conn=(--mysql-port="$PROXY_PORT" --mysql-user="$APP_USER" --mysql-password="$APP_PASSWORD" --mysql-db=) ;;
    haproxy)
      conn=(--mysql-port="$HAPROXY_PORT" --mysql-user="$BACKEND_USER" --mysql-password="$BACKEND_PASSWORD" --mysql-db=db00000) ;;
    direct)
      conn=(--mysql-port="$MASTER_PORT" --mysql-user="$BACKEND_USER" --mysql-password="$BACKEND_PASSWORD" --mysql-db=db00000) ;;
    *) die "unknown mode $mode" ;;
  esac
  # `times` in the subshell reports the CPU time of its children: sysbench.
  (
    timeout $((secs + ${BENCH_EVENTS_TIMEOUT:-60})) sysbench "$LUA" --mode="$lua_mode" --ids="$IDS" "${ps[@]}" \
      --threads="$threads" --time="$secs" --events="${BENCH_EVENTS:-0}" --rand-seed="$BENCH_SEED" \
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
  local relay
  sysbench_once "$@" && return 0
  tail -5 "$4" >&2
  relay=$(relay_pid "$1")
  if [[ -n "$relay" ]] && ! kill -0 "$relay" 2>/dev/null; then
    tail -20 "$WORK/$1.log" >&2; die "the $1 process died"
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

# The master's statement counters (global, so they include anyone else's
# traffic on the shared fleet): Com_stmt_execute Com_stmt_prepare Com_select.
master_counters() {
  master -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_stmt_execute', 'Com_stmt_prepare', 'Com_select')" |
    awk '{ v[$1] = $2 } END { print v["Com_stmt_execute"] + 0, v["Com_stmt_prepare"] + 0, v["Com_select"] + 0 }'
}

# measure MODE THREADS ROUND: one recorded run with CPU accounting, appended
# to $RUNS as a tab-separated row:
#   1 threads  2 round  3 mode  4 qps  5 p50_us  6 p95_us  7 queries
#   8 relay CPU µs/query (shardgate for proxy, haproxy for haproxy, 0 direct)
#   9 mariadbd  10 sysbench  11 machine irq+softirq (µs/query)
#   12 busy % before  13 others' CPU % during  14-16 master Com_stmt_execute,
#   Com_stmt_prepare, Com_select per query  17 statements the client prepared
#   18 protocol (text or ps)  19 the relay's user-space part of 8 (µs/query)
RUNS="$WORK/runs.tsv"
: >"$RUNS"
measure() {
  local mode=$1 threads=$2 round=$3 out relay p0 m0 p1 m1 before
  local proto=text
  [[ "$BENCH_PS" != 1 ]] || proto=ps
  out="$WORK/sysbench-$proto-$threads-$round-$mode.txt"
  relay=$(relay_pid "$mode")
  before=$(wait_quiet)
  # The fleet may have been restarted by someone else's test: look the master up each time.
  MASTER_PID=$(port_holder "$MASTER_PORT")
  read -r ce0 cp0 cs0 < <(master_counters)
  pu0=$(user_ticks "$relay"); p0=$(cpu_ticks "$relay"); m0=$(cpu_ticks "$MASTER_PID"); read -r b0 t0 u0 i0 < <(machine_ticks)
  run_sysbench "$mode" "$threads" "$BENCH_TIME" "$out"
  pu1=$(user_ticks "$relay"); p1=$(cpu_ticks "$relay"); m1=$(cpu_ticks "$MASTER_PID"); read -r b1 t1 u1 i1 < <(machine_ticks)
  read -r ce1 cp1 cs1 < <(master_counters)
  [[ "$(port_holder "$MASTER_PORT")" == "$MASTER_PID" ]] || die "the master on $MASTER_PORT restarted during the run"
  read -r qps p50 p95 errs sbcpu queries reports < <(parse_run "$out")
  ((reports == threads)) || die "$reports of $threads sysbench threads reported their row checks ($out)"
  ((errs == 0)) || die "$errs lookups did not return exactly one row ($out)"
  # Statements the client prepared (sysbench threads' bench-prepared lines) and
  # the master's counters per query.
  nprep=$(grep -o 'bench-prepared: [0-9]*' "$out" | awk '{ n += $2 } END { print n + 0 }')
  read -r exq prq seq < <(awk -v q="$queries" -v e="$((ce1 - ce0))" -v p="$((cp1 - cp0))" -v s="$((cs1 - cs0))" \
    'BEGIN { printf "%.3f %.4f %.3f\n", e / q, p / q, s / q }')
  if [[ "$BENCH_PS" == 1 && "$mode" != proxy ]]; then
    awk -v r="$exq" 'BEGIN { exit !(r >= 0.99) }' ||
      die "$mode prepared run: the master counted only $exq COM_STMT_EXECUTE per query ($out)"
  fi
  # Per query, in µs of CPU: relay, mariadbd (master), sysbench, irq+softirq
  # (whole machine), and the process time of everything else during the run
  # in % of all CPUs (other engineers' builds and tests, the replica): the noise.
  read -r pcq mcq scq icq other pucq < <(awk -v q="$queries" -v hz="$CLK_TCK" -v p="$((p1 - p0))" -v m="$((m1 - m0))" \
    -v sb="$sbcpu" -v u="$((u1 - u0))" -v i="$((i1 - i0))" -v t="$((t1 - t0))" -v pu="$((pu1 - pu0))" 'BEGIN {
      us = 1e6 / hz / q; o = (u - p - m - sb * hz) * 100 / (t > 0 ? t : 1)
      printf "%.1f %.1f %.1f %.1f %d %.1f\n", p * us, m * us, sb * 1e6 / q, i * us, o < 0 ? 0 : o, pu * us }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$threads" "$round" "$mode" "$qps" "$p50" "$p95" \
    "$queries" "$pcq" "$mcq" "$scq" "$icq" "$before" "$other" "$exq" "$prq" "$seq" "$nprep" "$proto" "$pucq" >>"$RUNS"
  log "$proto threads=$threads round=$round $mode: $qps qps, p50 ${p50} us, p95 ${p95} us (CPU/query: relay $pcq (user $pucq), mariadbd $mcq, sysbench $scq, softirq $icq us; busy before ${before}%, others during ${other}%; master per query: $exq stmt_execute, $prq stmt_prepare, $seq select; client prepared $nprep)"
}

# What the proxy binary was built from (after build_proxy).
describe_revision() {
  local revision dirty
  revision="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  dirty=$(git -C "$ROOT" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null | wc -l)
  ((dirty == 0)) || revision+=" + $dirty uncommitted file(s) under src/ (shared working tree)"
  if [[ -n "$BENCH_REV" ]]; then
    revision="${rev_full:0:7} (clean export of the commit, \`BENCH_REV=$BENCH_REV\`)"
  elif [[ "$BENCH_BUILD" != 1 ]]; then
    revision="$SHARDGATE_BIN as built at $(date -u -r "$SHARDGATE_BIN" '+%Y-%m-%d %H:%M:%S UTC') (not rebuilt; the tree is now at $revision)"
  fi
  echo "$revision"
}

# The machine line of a report.
describe_machine() {
  echo "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; sysbench $(sysbench --version | awk '{print $2}'); $(master -N -e 'SELECT VERSION()')"
}
