#!/usr/bin/env bash
# sysbench with server-side prepared statements through shardgate.
#
#   integration/drivers/sysbench/run.sh --port PROXY_PORT [--host 127.0.0.1]
#       [--master-a 3307 --master-b 3308] [--time 5] [--threads 4] [--rows 64]
#
# 1. Seeds --rows pins through the proxy with the stock mariadb CLI
#    (INSERT /*+ SHARD(n) */ ... then SELECT LAST_INSERT_ID(), shards spread
#    over both main masters), and checks on the masters that each row is in
#    its shard database there.
# 2. Runs point_select_ps.lua (con:prepare / stmt:execute, --db-ps-mode=auto:
#    COM_STMT_PREPARE / COM_STMT_EXECUTE, IDs bound as BIGINT and as VARCHAR)
#    for --time seconds with --threads threads.
# 3. Passes only if sysbench exits 0, no FATAL, no fallback to emulated
#    prepares, zero ignored errors and reconnects, a nonzero event count, and
#    every execute returned exactly one row (driver-errors: 0 in every thread).
set -euo pipefail

HOST=127.0.0.1
PORT=
MASTER_A=3307
MASTER_B=3308
BACKEND_USER=shard
BACKEND_PASSWORD=shardpw
APP_USER=app
APP_PASSWORD=app
TIME=5
THREADS=4
ROWS=64

while [ $# -gt 0 ]; do
    case "$1" in
        --host) HOST=$2; shift 2 ;;
        --port) PORT=$2; shift 2 ;;
        --master-a) MASTER_A=$2; shift 2 ;;
        --master-b) MASTER_B=$2; shift 2 ;;
        --mod-host) shift 2 ;;   # accepted for symmetry with the other driver scripts
        --time) TIME=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --rows) ROWS=$2; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
[ -n "$PORT" ] || { echo "--port (the proxy port) is required" >&2; exit 2; }

DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v sysbench >/dev/null 2>&1 || { echo "FAIL: sysbench is not installed: run integration/drivers/setup.sh" >&2; exit 1; }
command -v mariadb >/dev/null 2>&1 || { echo "FAIL: the mariadb client is not installed: run integration/fleet.sh install" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL sysbench: $*"; exit 1; }

# ---- 1. seed through the proxy
SQL="$WORK/seed.sql"
: >"$SQL"
for i in $(seq 1 "$ROWS"); do
    # Alternate the halves: shards 0-2047 (master A) and 2048-4095 (master B).
    shard=$(( (i * 2654435761 % 2048) + (i % 2) * 2048 ))
    printf "INSERT /*+ SHARD(%d) */ INTO pins (data) VALUES ('sysbench-ps-%d');\nSELECT LAST_INSERT_ID();\n" "$shard" "$i" >>"$SQL"
done
if ! mariadb -h "$HOST" -P "$PORT" -u "$APP_USER" -p"$APP_PASSWORD" --comments --batch --skip-column-names \
        <"$SQL" >"$WORK/ids" 2>"$WORK/seed.err"; then
    cat "$WORK/seed.err"
    fail "seeding $ROWS rows through the proxy with the mariadb CLI failed"
fi
[ "$(grep -c '^[0-9][0-9]*$' "$WORK/ids")" -eq "$ROWS" ] || { cat "$WORK/ids"; fail "expected $ROWS IDs from LAST_INSERT_ID()"; }

# Where the rows landed: each on the master of its shard, in its database.
checked=0
while read -r id; do
    shard=$(( (id >> 46) & 0xFFFF )); type=$(( (id >> 36) & 0x3FF )); local_id=$(( id & 0xFFFFFFFFF ))
    [ "$type" -eq 1 ] || fail "ID $id has type $type, want 1 (pins)"
    port=$MASTER_A; [ "$shard" -lt 2048 ] || port=$MASTER_B
    data=$(mariadb -h 127.0.0.1 -P "$port" -u "$BACKEND_USER" -p"$BACKEND_PASSWORD" --batch --skip-column-names \
        -e "SELECT data FROM $(printf 'db%05d' "$shard").pins WHERE local_id = $local_id")
    [[ "$data" == sysbench-ps-* ]] || fail "row $id (shard $shard) is not on host $port: got '$data'"
    checked=$((checked + 1))
done <"$WORK/ids"
echo "seeded $ROWS rows through the proxy; $checked found on their masters ($MASTER_A / $MASTER_B)"

# ---- 2. run
OUT="$WORK/sysbench.out"
set +e
timeout $((TIME + 60)) sysbench "$DIR/point_select_ps.lua" \
    --db-driver=mysql --db-ps-mode=auto \
    --mysql-host="$HOST" --mysql-port="$PORT" --mysql-user="$APP_USER" --mysql-password="$APP_PASSWORD" --mysql-db= \
    --threads="$THREADS" --time="$TIME" --events=0 --ids="$WORK/ids" run >"$OUT" 2>&1
rc=$?
set -e
cat "$OUT"

# ---- 3. verdict
if grep -q 'FATAL' "$OUT"; then fail "sysbench reported FATAL: $(grep -m3 'FATAL' "$OUT" | tr '\n' ' ')"; fi
[ "$rc" -eq 0 ] || fail "sysbench exited with $rc"
if grep -qi 'using emulation' "$OUT"; then fail "sysbench fell back to emulated prepared statements: $(grep -m1 -i 'emulation' "$OUT")"; fi
events=$(sed -n 's/^ *total number of events: *\([0-9][0-9]*\).*/\1/p' "$OUT")
ignored=$(sed -n 's/^ *ignored errors: *\([0-9][0-9]*\).*/\1/p' "$OUT")
reconnects=$(sed -n 's/^ *reconnects: *\([0-9][0-9]*\).*/\1/p' "$OUT")
[ -n "$events" ] || fail "no 'total number of events' in the sysbench output"
[ "$events" -gt 0 ] || fail "zero events"
[ "${ignored:-x}" = 0 ] || fail "ignored errors: ${ignored:-missing}"
[ "${reconnects:-x}" = 0 ] || fail "reconnects: ${reconnects:-missing}"
threads_done=$(grep -c '^driver-errors: ' "$OUT" || true)
[ "$threads_done" -eq "$THREADS" ] || fail "$threads_done of $THREADS threads reported their results"
bad=$(awk '/^driver-errors: /{s += $2} END {print s + 0}' "$OUT")
[ "$bad" -eq 0 ] || fail "$bad prepared point selects did not return exactly one row"
echo "ok   sysbench prepared point selects: $events events, 0 errors, $THREADS threads, ${TIME}s"
echo "1 passed, 0 failed"
