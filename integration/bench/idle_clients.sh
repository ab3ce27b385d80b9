#!/usr/bin/env bash
# Idle client connections held by shardgate (its RSS), and the login rate
# through shardgate vs straight to master A with the same client.
#
#   integration/bench/idle_clients.sh           # full run (1,000 and 10,000 idle clients; 3 login rounds)
#   QUICK=1 integration/bench/idle_clients.sh   # smoke run (1,000 idle clients, 1 login round of 500)
#
# Needs the local fleet (integration/fleet.sh start). The client is
# idle_clients.py (python3, standard library only: asyncio, a minimal
# mysql_native_password login, no statement). What it does:
#   1. builds and starts a release shardgate on free ports (lib.sh), with
#      limits.max_client_connections raised above the largest IDLE_COUNTS;
#      raises this shell's open-file limit (ulimit -n) to fit them;
#   2. login rate: IDLE_ROUNDS rounds, the order alternating, of IDLE_LOGINS
#      logins (connect, greeting, handshake response, OK, COM_QUIT, close) with
#      IDLE_LOGIN_CONCURRENCY in flight, through shardgate (app/app) and direct
#      to master A (shard/shardpw); reports logins/s, the server process's CPU
#      per login (shardgate, or master A's mariadbd) and the client's;
#   3. idle clients: for each N of IDLE_COUNTS, opens N logged-in connections
#      to shardgate and holds them IDLE_HOLD seconds; reports the proxy's RSS
#      (VmRSS from /proc) before, with all open and after the hold, the RSS per
#      connection, the proxy's CPU while they idle, that none was closed, and
#      the RSS 2 s after closing them. Direct to the master is not held: master
#      A's max_connections is far below 10,000 and the fleet is shared.
#
# Environment (defaults in brackets):
#   IDLE_COUNTS ["1000 10000"]  IDLE_HOLD [10] s  IDLE_OPEN_CONCURRENCY [64]
#   IDLE_LOGINS [5000]  IDLE_LOGIN_CONCURRENCY [8]  IDLE_ROUNDS [3]
#   QUICK=1                 IDLE_COUNTS=1000 IDLE_HOLD=3 IDLE_LOGINS=1000 IDLE_ROUNDS=1
#   BENCH_BUILD, BENCH_REV, SHARDGATE_BIN, CONFIG, BENCH_REPORT=FILE, BENCH_KEEP,
#   BENCH_QUIET_BUSY, BENCH_QUIET_WAIT, MASTER_PORT, BACKEND_USER/PASSWORD,
#   APP_USER/PASSWORD: as in point_select.sh (lib.sh)
set -euo pipefail

if [[ "${QUICK:-0}" == 1 ]]; then
  : "${IDLE_COUNTS:=1000}" "${IDLE_HOLD:=3}" "${IDLE_LOGINS:=1000}" "${IDLE_ROUNDS:=1}"
fi
IDLE_COUNTS=${IDLE_COUNTS:-"1000 10000"}
IDLE_HOLD=${IDLE_HOLD:-10}
IDLE_OPEN_CONCURRENCY=${IDLE_OPEN_CONCURRENCY:-64}
IDLE_LOGINS=${IDLE_LOGINS:-5000}
IDLE_LOGIN_CONCURRENCY=${IDLE_LOGIN_CONCURRENCY:-8}
IDLE_ROUNDS=${IDLE_ROUNDS:-3}
LOG_TAG=idle
# shellcheck source=integration/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CLIENT="$HERE/idle_clients.py"
command -v python3 >/dev/null || die "python3 is needed"

most=0
for n in $IDLE_COUNTS; do if ((n > most)); then most=$n; fi; done
want_files=$((most + 1000))
if (($(ulimit -n) < want_files)); then
  ulimit -n "$want_files" 2>/dev/null || die "cannot raise the open-file limit to $want_files (ulimit -n; hard limit $(ulimit -Hn))"
fi

build_proxy
start_proxy "limits: { max_client_connections: $((most + 100)) }"
started=$(date -u '+%Y-%m-%d %H:%M UTC')
revision=$(describe_revision)

# ---------------------------------------------------------------- logins
LOGINS="$WORK/logins.tsv"
: >"$LOGINS"
for ((round = 1; round <= IDLE_ROUNDS; round++)); do
  order=(proxy direct)
  ((round % 2)) || order=(direct proxy)
  for mode in "${order[@]}"; do
    busy=$(wait_quiet)
    if [[ "$mode" == proxy ]]; then
      target=("$PROXY_PORT" "$APP_USER" "$APP_PASSWORD") server=$PROXY_PID
    else
      target=("$MASTER_PORT" "$BACKEND_USER" "$BACKEND_PASSWORD") server=$(port_holder "$MASTER_PORT")
    fi
    out=$(python3 "$CLIENT" logins 127.0.0.1 "${target[@]}" "$IDLE_LOGINS" "$IDLE_LOGIN_CONCURRENCY" "${server:-0}") ||
      die "$mode logins failed: $out"
    row=$(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); n = r["logins"]
print("%.0f\t%.1f\t%.1f" % (r["logins_per_s"], r["server_cpu_s"] * 1e6 / n, r["client_cpu_s"] * 1e6 / n))' "$out")
    printf '%s\t%s\t%s\t%s\n' "$round" "$mode" "$row" "$busy" >>"$LOGINS"
    log "logins round $round $mode: $out (busy before $busy%)"
  done
done

# ---------------------------------------------------------------- hold
HOLDS="$WORK/holds.txt"
: >"$HOLDS"
for n in $IDLE_COUNTS; do
  wait_quiet >/dev/null
  log "opening $n idle connections to the proxy, holding them ${IDLE_HOLD}s"
  out=$(python3 "$CLIENT" hold 127.0.0.1 "$PROXY_PORT" "$APP_USER" "$APP_PASSWORD" "$n" "$IDLE_OPEN_CONCURRENCY" "$PROXY_PID" "$IDLE_HOLD") ||
    { tail -5 "$WORK/proxy.log" >&2; die "holding $n connections failed: $out"; }
  kill -0 "$PROXY_PID" 2>/dev/null || die "the proxy died while holding $n connections"
  python3 -c 'import json, sys; r = json.loads(sys.argv[1])
if r["closed_by_server"]:
    sys.exit("%d of %d idle connections were closed by the proxy" % (r["closed_by_server"], r["connections"]))' "$out" ||
    die "idle connections were closed during the hold: $out"
  echo "$out" >>"$HOLDS"
  log "$n idle: $out"
done

# ---------------------------------------------------------------- report
report() {
  echo "Command: \`$( [[ "${QUICK:-0}" == 1 ]] && printf 'QUICK=1 ')integration/bench/idle_clients.sh\`" \
    "(IDLE_COUNTS=\"$IDLE_COUNTS\" IDLE_HOLD=$IDLE_HOLD IDLE_LOGINS=$IDLE_LOGINS IDLE_LOGIN_CONCURRENCY=$IDLE_LOGIN_CONCURRENCY IDLE_ROUNDS=$IDLE_ROUNDS)"
  echo
  echo "Started $started; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; $(master -N -e 'SELECT VERSION()'); client: idle_clients.py (python3 asyncio, mysql_native_password); shardgate built from $revision."
  echo
  echo "#### Login rate ($IDLE_LOGINS logins per run, $IDLE_LOGIN_CONCURRENCY in flight; connect + login + COM_QUIT)"
  echo
  echo "| round | logins/s direct / shardgate | shardgate / direct | server CPU µs / login: mariadbd (direct) / shardgate | client CPU µs / login direct / shardgate | busy before % direct / shardgate |"
  echo "|---|---|---|---|---|---|"
  awk -F'\t' '{ k = $1 SUBSEP $2; r[k] = $3; s[k] = $4; c[k] = $5; b[k] = $6; if ($1 > n) n = $1 }
    END { for (i = 1; i <= n; i++) { d = i SUBSEP "direct"; p = i SUBSEP "proxy"
      printf "| %d | %.0f / %.0f | %.3f | %.0f / %.0f | %.0f / %.0f | %d / %d |\n", i, r[d], r[p], r[p] / r[d], s[d], s[p], c[d], c[p], b[d], b[p] } }' "$LOGINS"
  echo
  echo "#### Idle logged-in clients held by shardgate"
  echo
  echo "| clients | open time (s) | logins/s | proxy RSS MiB before / all open / after ${IDLE_HOLD} s / 2 s after closing | KiB per connection | proxy CPU while idle (s over ${IDLE_HOLD} s) | closed by the proxy |"
  echo "|---|---|---|---|---|---|---|"
  python3 - "$HOLDS" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    mib = lambda k: r[k] / 1024
    print("| %d | %.2f | %.0f | %.1f / %.1f / %.1f / %.1f | %.1f | %.3f | %d |" % (
        r["connections"], r["open_seconds"], r["logins_per_s"], mib("rss_kib_before"), mib("rss_kib_open"),
        mib("rss_kib_after_hold"), mib("rss_kib_after_close"), r["kib_per_connection"],
        r["server_cpu_s_idle"], r["closed_by_server"]))
PY
}
report | tee "$WORK/report.md"
[[ -z "${BENCH_REPORT:-}" ]] || cp "$WORK/report.md" "$BENCH_REPORT"
