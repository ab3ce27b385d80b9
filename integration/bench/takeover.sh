#!/usr/bin/env bash
# Zero-downtime hand-offs under load (issue 20, "Measured"): sessions from
# three stock drivers doing point reads, inserts and short transactions
# through a file-sourced `shardgate serve` while `serve --takeover` with a
# new binary replaces it every few seconds, TAKEOVER_ROUNDS times in a row.
#
#   integration/bench/takeover.sh                         # 64 sessions, 10 takeovers, release build
#   BENCH_REPORT=/tmp/takeover.md integration/bench/takeover.sh
#   SHARDGATE_BIN=target/debug/shardgate BENCH_BUILD=0 TAKEOVER_SESSIONS="4 4 4" \
#     TAKEOVER_ROUNDS=3 integration/bench/takeover.sh     # the CI size (drivers::takeover_under_load)
#
# Needs the local fleet (integration/fleet.sh start; shard databases from
# `shardgate fleet init`) and the drivers of integration/drivers/setup.sh
# (integration/.venv with PyMySQL, mysql2 in integration/drivers/node, sysbench).
#
#   1. builds the release binary (lib.sh build_proxy; BENCH_BUILD=0 uses
#      SHARDGATE_BIN as is) and copies it to two paths, WORK/bin-a/shardgate
#      and WORK/bin-b/shardgate: every takeover execs the other file than
#      the running process's (the copies are byte-identical: a new binary
#      file, not a new build; TAKEOVER_OTHER_BIN=FILE makes bin-b that
#      other build, e.g. the previous release, so the hand-offs alternate
#      between two builds: upgrades and downgrades);
#   2. starts `shardgate serve --config WORK/shardgate.yaml` (config/shardgate.yaml
#      on port 0, the client port read from its log, `shutdown.drain_timeout_ms: 10000`, `takeover.socket` in WORK);
#   3. starts the sessions (integration/drivers/takeover/): PyMySQL threads
#      (pymysql_load.py), mysql2 connections (mysql2_load.js) and sysbench
#      threads with server-side prepared statements (sysbench_load.lua, no
#      --mysql-ignore-errors). Each session sets @client, time_zone, sql_mode,
#      USE dbNNNNN and (mysql2, sysbench) prepares its point read once, then
#      loops: INSERT (every third in BEGIN ... COMMIT), a point read of the
#      row by ID, a state check (`SELECT @client, @@session.time_zone,
#      @@session.sql_mode, DATABASE(), CONNECTION_ID()`); a failed statement
#      is counted, never hidden; a changed CONNECTION_ID() or a connection
#      opened again is a reconnect;
#   4. after TAKEOVER_WARMUP s, every TAKEOVER_INTERVAL s: starts
#      `serve --config ... --takeover` from the other binary, waits for the
#      old process to exit 0 and reads its summary line (`handed over in N ms
#      (sessions first to last M ms): sessions handed H, closed C, cut K`);
#   5. when the sessions end, checks on the masters (3307 / 3308, directly)
#      that every acknowledged insert is there exactly once, in its session's
#      shard, under its ID, and that no unacknowledged row of the run is
#      (takeover_check.py), then deletes the run's rows;
#   6. prints (and writes as markdown to BENCH_REPORT) the hand-off per round
#      and, per driver, statements, failed statements, reconnects, failed
#      state checks and the longest statement; the last line is
#      `takeover-load: ok|FAILED ...`. Exits 1 on any failure.
#
# Environment (defaults in brackets):
#   TAKEOVER_SESSIONS ["22 21 21"]  PyMySQL, mysql2, sysbench sessions (64)
#   TAKEOVER_ROUNDS [10]  TAKEOVER_INTERVAL [4] s between takeover starts
#   TAKEOVER_WARMUP [3] s of load before the first  TAKEOVER_TAIL [5] s after the last
#   (the sessions end then: the file WORK/stop)
#   TAKEOVER_SHARDS ["14,3000,700,2100,1500,3900"]  session i uses shard i mod count
#   BENCH_BUILD [1]  SHARDGATE_BIN [target/release/shardgate]  BENCH_REPORT=FILE  BENCH_KEEP=1
#   TAKEOVER_OTHER_BIN [SHARDGATE_BIN]  the build bin-b runs (another build: upgrade/downgrade)
#   MASTER_A_PORT [3307]  MASTER_B_PORT [3308]  APP_USER [app]  APP_PASSWORD [app]
set -euo pipefail

TAKEOVER_SESSIONS=${TAKEOVER_SESSIONS:-"22 21 21"}
TAKEOVER_ROUNDS=${TAKEOVER_ROUNDS:-10}
TAKEOVER_INTERVAL=${TAKEOVER_INTERVAL:-4}
TAKEOVER_WARMUP=${TAKEOVER_WARMUP:-3}
TAKEOVER_TAIL=${TAKEOVER_TAIL:-5}
TAKEOVER_SHARDS=${TAKEOVER_SHARDS:-"14,3000,700,2100,1500,3900"}
MASTER_A_PORT=${MASTER_A_PORT:-3307}
MASTER_B_PORT=${MASTER_B_PORT:-3308}
LOG_TAG=takeover
export PYTHONDONTWRITEBYTECODE=1
# shellcheck source=integration/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLIENTS="$ROOT/integration/drivers/takeover"
PY="$ROOT/integration/.venv/bin/python"
SETUP_HINT="run integration/drivers/setup.sh"
read -r N_PY N_JS N_SB <<<"$TAKEOVER_SESSIONS"
[[ -n "$N_SB" ]] || die "TAKEOVER_SESSIONS: three counts (PyMySQL mysql2 sysbench), got '$TAKEOVER_SESSIONS'"
"$PY" -c 'import pymysql' 2>/dev/null || die "no PyMySQL in integration/.venv: $SETUP_HINT"
[[ -f "$ROOT/integration/drivers/node/node_modules/mysql2/package.json" ]] || die "no mysql2 in integration/drivers/node: $SETUP_HINT"
command -v node >/dev/null || die "no node: $SETUP_HINT"
command -v sysbench >/dev/null || die "no sysbench: $SETUP_HINT"

CLIENT_PIDS=()
stop_clients() {
  local p
  for p in "${CLIENT_PIDS[@]}"; do stop_pid "$p"; done
}
trap 'rc=$?; set +e; stop_clients; (exit $rc); cleanup' EXIT

build_proxy
mkdir -p "$WORK/bin-a" "$WORK/bin-b"
cp "$SHARDGATE_BIN" "$WORK/bin-a/shardgate"
cp "${TAKEOVER_OTHER_BIN:-$SHARDGATE_BIN}" "$WORK/bin-b/shardgate"
BINS=("$WORK/bin-a/shardgate" "$WORK/bin-b/shardgate")

# Every listener on port 0 (the kernel picks; the client port is read from
# the log): the takeover hands the same sockets on.
sed -E -e "s/^listen:.*/listen: 127.0.0.1:0/" \
       -e "s/^(  listen:).*/\1 127.0.0.1:0/" \
       -e "s/^metrics:.*/metrics: { listen: 127.0.0.1:0 }/" "$CONFIG" >"$WORK/shardgate.yaml"
[[ $(grep -cE "^ *listen: 127.0.0.1:0\$" "$WORK/shardgate.yaml") == 2 ]] ||
  die "could not rewrite both listen addresses in the config copy"
printf 'shutdown: { drain_timeout_ms: 10000 }\ntakeover: { socket: %s }\n' "$WORK/takeover.sock" >>"$WORK/shardgate.yaml"
cp "$(dirname "$CONFIG")/schema.sql" "$WORK/"

proxy_answers() {
  mariadb -h127.0.0.1 -P"$PROXY_PORT" -u"$APP_USER" -p"$APP_PASSWORD" -N -e 'SELECT 1' >/dev/null 2>&1
}

# ---------------------------------------------------------------- first process
log "starting ${BINS[0]} serve --config $WORK/shardgate.yaml"
RUST_LOG=info "${BINS[0]}" serve --config "$WORK/shardgate.yaml" >"$WORK/proxy-0.log" 2>&1 &
PROXY_PID=$!
PROXY_PORT=
for _ in $(seq 150); do
  kill -0 "$PROXY_PID" 2>/dev/null || { cat "$WORK/proxy-0.log" >&2; PROXY_PID=; die "the proxy exited"; }
  [[ -n "$PROXY_PORT" ]] ||
    PROXY_PORT=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/proxy-0.log" | grep -m1 -o 'shardgate started client=127.0.0.1:[0-9]*' | sed 's/.*://' || true)
  [[ -n "$PROXY_PORT" ]] && proxy_answers && break
  sleep 0.2
done
proxy_answers || { tail -20 "$WORK/proxy-0.log" >&2; die "the proxy does not answer SELECT 1 within 30 s"; }

# ---------------------------------------------------------------- sessions
RUN="tkl-$(date +%s)-$$"
# The sessions run until STOP exists (at most SECONDS_TOTAL, a safety net).
STOP="$WORK/stop"
SECONDS_TOTAL=$((TAKEOVER_WARMUP + TAKEOVER_ROUNDS * (TAKEOVER_INTERVAL + 60) + TAKEOVER_TAIL))
log "run $RUN: $N_PY PyMySQL + $N_JS mysql2 + $N_SB sysbench sessions, shards $TAKEOVER_SHARDS"
common=(--port "$PROXY_PORT" --seconds "$SECONDS_TOTAL" --stop "$STOP" --shards "$TAKEOVER_SHARDS")
REPORTS=()
if ((N_PY > 0)); then
  "$PY" "$CLIENTS/pymysql_load.py" "${common[@]}" --sessions "$N_PY" --tag "$RUN-py" --out "$WORK/py.json" \
    >"$WORK/py.log" 2>&1 &
  CLIENT_PIDS+=($!); REPORTS+=("$WORK/py.json")
fi
if ((N_JS > 0)); then
  node "$CLIENTS/mysql2_load.js" "${common[@]}" --sessions "$N_JS" --tag "$RUN-js" --out "$WORK/js.json" \
    >"$WORK/js.log" 2>&1 &
  CLIENT_PIDS+=($!); REPORTS+=("$WORK/js.json")
fi
if ((N_SB > 0)); then
  sysbench "$CLIENTS/sysbench_load.lua" --threads="$N_SB" --time="$SECONDS_TOTAL" --events=0 \
    --db-driver=mysql --db-ps-mode=auto --mysql-host=127.0.0.1 --mysql-port="$PROXY_PORT" \
    --mysql-user="$APP_USER" --mysql-password="$APP_PASSWORD" --mysql-db= \
    --tag="$RUN-sb" --shards="$TAKEOVER_SHARDS" --stop="$STOP" --out="$WORK/sb" --report-interval=0 run \
    >"$WORK/sb.log" 2>&1 &
  CLIENT_PIDS+=($!)
  for ((t = 0; t < N_SB; t++)); do REPORTS+=("$WORK/sb.$t.json"); done
fi
started=$(date +%s.%N)

# ---------------------------------------------------------------- takeovers
# round, binary, exit, took_ms, first_to_last_ms, handed, closed, cut,
# new process started, old process gone (epoch seconds)
HANDOFFS="$WORK/handoffs.tsv"
: >"$HANDOFFS"
for ((round = 1; round <= TAKEOVER_ROUNDS; round++)); do
  at=$(awk -v s="$started" -v w="$TAKEOVER_WARMUP" -v i="$TAKEOVER_INTERVAL" -v r="$round" \
    'BEGIN { printf "%.3f", s + w + (r - 1) * i }')
  wait_s=$(awk -v at="$at" -v now="$(date +%s.%N)" 'BEGIN { d = at - now; printf "%.3f", (d > 0 ? d : 0) }')
  sleep "$wait_s"
  for p in "${CLIENT_PIDS[@]}"; do
    kill -0 "$p" 2>/dev/null || die "a client ended before takeover $round (see $WORK/*.log)"
  done
  bin=${BINS[round % 2]}
  old=$PROXY_PID
  began=$(date +%s.%N)
  RUST_LOG=info "$bin" serve --config "$WORK/shardgate.yaml" --takeover >"$WORK/proxy-$round.log" 2>&1 &
  new=$!
  PROXY_PID=$new
  for _ in $(seq 600); do kill -0 "$old" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$old" 2>/dev/null; then
    tail -5 "$WORK/proxy-$((round - 1)).log" "$WORK/proxy-$round.log" >&2
    stop_pid "$old"
    die "takeover $round: the old process is still running after 30 s"
  fi
  ended=$(date +%s.%N)
  rc=0
  wait "$old" || rc=$?
  kill -0 "$new" 2>/dev/null || { tail -20 "$WORK/proxy-$round.log" >&2; die "takeover $round: the new process exited"; }
  line=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/proxy-$((round - 1)).log" | grep -m1 'handed over in' || true)
  [[ -n "$line" ]] || { tail -20 "$WORK/proxy-$((round - 1)).log" >&2; die "takeover $round: no summary line from the old process (exit $rc)"; }
  read -r took ftl handed closed cut < <(sed -E 's/.*handed over in ([0-9]+) ms \(sessions first to last ([0-9]+) ms\): sessions handed ([0-9]+), closed ([0-9]+), cut ([0-9]+).*/\1 \2 \3 \4 \5/' <<<"$line")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "${bin#"$WORK"/}" "$rc" "$took" "$ftl" "$handed" "$closed" "$cut" \
    "$began" "$ended" >>"$HANDOFFS"
  log "takeover $round ($(basename "$(dirname "$bin")")): old exit $rc, handed $handed, closed $closed, cut $cut, sessions first to last $ftl ms, listeners to last $took ms"
done

# ---------------------------------------------------------------- results
sleep "$TAKEOVER_TAIL"
touch "$STOP"
client_rc=0
for p in "${CLIENT_PIDS[@]}"; do wait "$p" || client_rc=$?; done
CLIENT_PIDS=()
((client_rc == 0)) || { tail -20 "$WORK"/py.log "$WORK"/js.log "$WORK"/sb.log >&2; die "a client exited $client_rc"; }
if grep -qi 'using emulation' "$WORK/sb.log"; then
  die "sysbench fell back to emulated prepared statements: $(grep -m1 -i emulation "$WORK/sb.log")"
fi
log "sessions ended; checking the masters"
summary=0
"$PY" "$CLIENTS/takeover_check.py" --run "$RUN" --master-a "$MASTER_A_PORT" --master-b "$MASTER_B_PORT" \
  --handoffs "$HANDOFFS" --sessions "$((N_PY + N_JS + N_SB))" --delete \
  --machine "$(describe_machine)" --revision "$(describe_revision)" \
  --command "TAKEOVER_SESSIONS=\"$TAKEOVER_SESSIONS\" TAKEOVER_ROUNDS=$TAKEOVER_ROUNDS TAKEOVER_INTERVAL=$TAKEOVER_INTERVAL $0" \
  --report "${BENCH_REPORT:-$WORK/report.md}" "${REPORTS[@]}" || summary=$?
exit "$summary"
