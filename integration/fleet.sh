#!/usr/bin/env bash
# Local shardgate test fleet: four mariadbd instances on 127.0.0.1, no systemd.
#
#   port  role       serves
#   3307  master-a   main fleet shards 0-2047      (binlog, GTID source of 3309)
#   3308  master-b   main fleet shards 2048-4095
#   3309  replica-a  GTID replica of 3307           (failover target)
#   3310  mod        mod-shard fleet, shards 0-4095
#   3311  spare      empty, not a replica, not in the config: the target of a
#                    shard split. Only `start-host 3311` creates and starts it;
#                    `stop`, `status` and `wipe` include it once it exists.
#   3312  scratch    empty, not in the config: the source of the split tests
#                    (each makes a small fleet of its own on it and empties it
#                    after), so a split never touches 3307/3308. Like 3311,
#                    only `start-host 3312` creates and starts it.
#
# Usage: integration/fleet.sh start|stop|status|wipe|install|stop-host PORT|start-host PORT|kill-host PORT
#
#   start            initialise missing data directories, start every instance
#                    that is not running, create accounts, set up replication,
#                    print the status table. Idempotent; data is kept.
#   stop             stop every instance (SIGTERM, bounded wait, then SIGKILL).
#   status           print port, role, running, pid (and replication state).
#   stop-host PORT   stop one instance (used by tests to simulate a dead host).
#   kill-host PORT   SIGKILL one instance (a crash; commits of the last second
#                    may be lost since the fleet runs with relaxed durability).
#   start-host PORT  start one stopped instance again.
#   wipe             stop everything and delete the data directories.
#   install          only install mariadb-server/mariadb-client if missing.
#
# Every instance lives in $SHARDGATE_FLEET_DIR/<port>/ (default
# integration/.fleet/<port>/): data/, my.cnf, mariadbd.pid, error.log and the
# socket. Accounts on every instance (from 127.0.0.1 and localhost):
#   shard/shardpw        the proxy's data path (`backend` in the config):
#                        SELECT, INSERT, UPDATE, DELETE and CREATE, DROP,
#                        INDEX, ALTER on the shard databases (`db_____`.*,
#                        `msdb_____`.*) and nothing else (on the spare and
#                        scratch servers 3311/3312 also SELECT, INSERT,
#                        UPDATE, DELETE on the split tests' `sp__`.*);
#   shardops/shardopspw  the control plane (`operations`: fleet init, VERIFY
#                        FLEET, PROMOTE REPLICA, failover): ALL PRIVILEGES;
#   repl/replpw          replication; root without password over the socket.
# `start` converges existing accounts to these grants (an older fleet's
# `shard` with ALL PRIVILEGES loses them).
#
# Environment: SHARDGATE_FLEET_DIR (data location), SHARDGATE_FLEET_WAIT
# (seconds to wait for a server to answer, default 60),
# SHARDGATE_FLEET_REPLACE=1 (start: stop another checkout's fleet that holds
# our ports instead of failing; integration/test.sh sets it when CI=true).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG=fleet
# shellcheck source=integration/lib.sh
. "$SCRIPT_DIR/lib.sh"
FLEET_DIR="${SHARDGATE_FLEET_DIR:-$SCRIPT_DIR/.fleet}"
WAIT_SECS="${SHARDGATE_FLEET_WAIT:-60}"
STOP_WAIT_SECS=20

BACKEND_USER=shard
BACKEND_PASSWORD=shardpw
OPS_USER=shardops
OPS_PASSWORD=shardopspw
# The data path's grants, one per line, as SHOW GRANTS prints them (minus the
# password): DML and table DDL (CREATE, DROP, INDEX, ALTER: the schema changes
# the router sends to one explicit shard) on the shard databases of
# config/shardgate.yaml (db{:05}, msdb{:05}). `_` is the one-character
# wildcard of a grant, so `db_____` matches db00000..db04095 (and nothing
# shorter or longer, e.g. not msdb00001 or mysql). Nothing on `mysql` & co,
# no GRANT OPTION, FILE, SUPER, PROCESS, LOCK TABLES or CREATE TEMPORARY
# TABLES: a statement that slips past the router still cannot reach the
# servers' own schemas, accounts or files.
BACKEND_GRANTS="GRANT USAGE ON *.* TO \`$BACKEND_USER\`@\`%HOST%\`
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON \`db_____\`.* TO \`$BACKEND_USER\`@\`%HOST%\`
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON \`msdb_____\`.* TO \`$BACKEND_USER\`@\`%HOST%\`"
# On the spare and scratch servers only (3311, 3312): the split tests'
# scratch fleet, served by proxies in those tests.
SCRATCH_BACKEND_GRANTS="$BACKEND_GRANTS
GRANT SELECT, INSERT, UPDATE, DELETE ON \`sp__\`.* TO \`$BACKEND_USER\`@\`%HOST%\`"
# The operations account: everything (in MariaDB 10.11 ALL PRIVILEGES includes
# REPLICATION SLAVE ADMIN, READ_ONLY ADMIN, BINLOG ADMIN and SLAVE MONITOR,
# which PROMOTE REPLICA needs), but not GRANT OPTION.
OPS_GRANTS="GRANT ALL PRIVILEGES ON *.* TO \`$OPS_USER\`@\`%HOST%\`"
REPL_USER=repl
REPL_PASSWORD=replpw

PORTS=(3307 3308 3309 3310)
declare -A ROLE=([3307]=master-a [3308]=master-b [3309]=replica-a [3310]=mod)
declare -A SERVER_ID=([3307]=1 [3308]=2 [3309]=3 [3310]=4)
# Replica port -> its master's port.
declare -A REPLICA_OF=([3309]=3307)

# ---------------------------------------------------------------- spare host
# Started only on request (`start-host 3311`), never by `start`; same
# accounts and binlog/GTID settings as the others, so it can be made a
# replica of 3307 (CHANGE MASTER ... MASTER_USE_GTID=slave_pos) by a split.
SPARE_PORTS=(3311 3312)
ROLE[3311]=spare
SERVER_ID[3311]=5
ROLE[3312]=scratch
SERVER_ID[3312]=6
# The fleet's ports plus every spare that has been created (or is running).
known_ports() {
    local port
    printf '%s\n' "${PORTS[@]}"
    for port in "${SPARE_PORTS[@]}"; do
        if [ -d "$FLEET_DIR/$port" ] || [ -n "$(running_pid "$port")" ]; then echo "$port"; fi
    done
}

# ---------------------------------------------------------------- install

# Installs mariadb-server and mariadb-client with apt when they are missing.
ensure_mariadb() {
    if command -v mariadbd >/dev/null 2>&1 && command -v mariadb-install-db >/dev/null 2>&1 \
        && command -v mariadb >/dev/null 2>&1 && command -v mariadb-admin >/dev/null 2>&1; then
        return 0
    fi
    # mariadbd lives in /usr/sbin, which a non-login PATH may lack.
    export PATH="$PATH:/usr/sbin:/sbin"
    if command -v mariadbd >/dev/null 2>&1 && command -v mariadb-install-db >/dev/null 2>&1 \
        && command -v mariadb >/dev/null 2>&1; then
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || die "mariadbd not found and apt-get is not available; install MariaDB server and client"
    # Do not let the package start (or enable) the system-wide server: the fleet
    # runs its own instances.
    apt_install --no-start mariadb-server mariadb-client
    command -v mariadbd >/dev/null 2>&1 || die "mariadbd still missing after apt-get install"
}

# ---------------------------------------------------------------- paths

valid_port() {
    local p
    for p in "${PORTS[@]}" "${SPARE_PORTS[@]}"; do [ "$p" = "$1" ] && return 0; done
    die "unknown port '$1' (fleet ports: ${PORTS[*]} ${SPARE_PORTS[*]})"
}

inst_dir() { echo "$FLEET_DIR/$1"; }
data_dir() { echo "$FLEET_DIR/$1/data"; }
cnf_file() { echo "$FLEET_DIR/$1/my.cnf"; }
pid_file() { echo "$FLEET_DIR/$1/mariadbd.pid"; }
err_log()  { echo "$FLEET_DIR/$1/error.log"; }
sock_file() {
    # Unix socket paths are limited to ~107 bytes; fall back to /tmp.
    local s="$FLEET_DIR/$1/mariadbd.sock"
    if [ "${#s}" -gt 100 ]; then
        s="/tmp/shardgate-fleet-$(printf '%s' "$FLEET_DIR" | md5sum | cut -c1-8)-$1.sock"
    fi
    echo "$s"
}

# root over the socket, ignoring any /etc/mysql option files.
sql() {
    local port=$1; shift
    mariadb --no-defaults --protocol=socket --socket="$(sock_file "$port")" -uroot \
        --connect-timeout=5 --batch --skip-column-names "$@"
}

# ---------------------------------------------------------------- state

# Prints the pid of the running instance on PORT, or nothing. The pid file
# is written a little into startup, so fall back to the command line.
running_pid() {
    local port=$1 pf pid cnf
    pf="$(pid_file "$port")"
    cnf="$(cnf_file "$port")"
    if [ -s "$pf" ]; then
        pid="$(tr -dc '0-9' <"$pf")"
        if [ -n "$pid" ] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "--defaults-file=$cnf "; then
            echo "$pid"
            return 0
        fi
    fi
    pgrep -f -- "^mariadbd --defaults-file=$cnf " 2>/dev/null | head -n 1 || true
}

# The defaults file of a running mariadbd, from its command line.
foreign_fleet_cnf() {
    cmdline "$1" | sed -n 's/^--defaults-file=//p' | head -n 1
}

# Pid of a mariadbd started by fleet.sh from ANOTHER fleet directory for
# PORT (e.g. a developer's fleet still running when CI starts in a fresh
# clone), or nothing.
foreign_fleet_pid() {
    local port=$1 pid cnf
    for pid in $(pgrep -x mariadbd 2>/dev/null); do
        cnf="$(foreign_fleet_cnf "$pid")"
        case "$cnf" in
            */"$port"/my.cnf) ;;
            *) continue ;;
        esac
        [ "$cnf" = "$(cnf_file "$port")" ] && continue
        head -n 1 "$cnf" 2>/dev/null | grep -q 'Generated by integration/fleet.sh' || continue
        echo "$pid"
        return 0
    done
}

# ---------------------------------------------------------------- config

write_cnf() {
    local port=$1 hard ofl toc
    hard="$(ulimit -Hn)"
    [ "$hard" = unlimited ] && hard=1048576
    ofl=20000
    [ "$hard" -lt "$ofl" ] && ofl="$hard"
    # Keep table caches well under the descriptor limit (each open InnoDB
    # table can hold a file descriptor).
    toc=9000
    [ $((ofl / 2)) -lt "$toc" ] && toc=$((ofl / 2))
    cat >"$(cnf_file "$port")" <<EOF
# Generated by integration/fleet.sh for the shardgate test fleet; do not edit
# (it is rewritten on every start).
[mariadbd]
user                           = root
port                           = $port
bind-address                   = 127.0.0.1
socket                         = $(sock_file "$port")
pid-file                       = $(pid_file "$port")
datadir                        = $(data_dir "$port")
log-error                      = $(err_log "$port")
server_id                      = ${SERVER_ID[$port]}
skip-name-resolve
max_connections                = 2000
max_allowed_packet             = 64M
character-set-server           = utf8mb4
collation-server               = utf8mb4_general_ci

# 4096 shard databases x 5 tables per fleet: many tables, small memory.
open_files_limit               = $ofl
table_open_cache               = $toc
table_definition_cache         = $toc
innodb_open_files              = $toc
innodb_buffer_pool_size        = 128M
innodb_log_file_size           = 64M
innodb_log_buffer_size         = 8M
innodb_file_per_table          = ON

# Test speed over durability.
innodb_flush_log_at_trx_commit = 2
sync_binlog                    = 0
innodb_doublewrite             = OFF

# Binary log on every instance (ROW, GTID): the replica follows master-a,
# and any master can later be the source of a shard move.
log_bin                        = mariadb-bin
binlog_format                  = ROW
log_slave_updates              = ON
relay_log                      = relay-bin
# The tests write gigabytes a day (long statements, moves); a day of
# binlog is enough for a replica or a split target to catch up.
expire_logs_days               = 1
EOF
}

# ---------------------------------------------------------------- start

init_datadir() {
    local port=$1 dd
    dd="$(data_dir "$port")"
    [ -d "$dd/mysql" ] && return 0
    log "$port: initialising $dd"
    rm -rf "$dd"
    mkdir -p "$dd"
    if ! mariadb-install-db --no-defaults --user=root --datadir="$dd" \
        --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
        --innodb-log-file-size=64M >"$(inst_dir "$port")/install.log" 2>&1; then
        tail -n 30 "$(inst_dir "$port")/install.log" >&2
        rm -rf "$dd"
        die "$port: mariadb-install-db failed (log: $(inst_dir "$port")/install.log)"
    fi
}

# Launches mariadbd for PORT in the background (detached) unless running.
launch() {
    local port=$1
    if [ -n "$(running_pid "$port")" ]; then
        return 0
    fi
    if port_in_use "$port"; then
        local other
        other="$(foreign_fleet_pid "$port")"
        if [ -n "$other" ] && [ "${SHARDGATE_FLEET_REPLACE:-0}" = 1 ]; then
            log "$port: held by another shardgate fleet (pid $other, $(foreign_fleet_cnf "$other")); stopping it (SHARDGATE_FLEET_REPLACE=1)"
            kill -TERM "$other" 2>/dev/null || true
            wait_exit "$port" "$other"
        elif [ -n "$other" ]; then
            die "$port: held by another shardgate fleet (pid $other, $(foreign_fleet_cnf "$other")); stop it with: SHARDGATE_FLEET_DIR=$(dirname "$(dirname "$(foreign_fleet_cnf "$other")")") $0 stop   (or set SHARDGATE_FLEET_REPLACE=1)"
        else
            die "$port: port is in use by $(describe_port_holder "$port"), not a shardgate fleet instance"
        fi
        wait_port_free "$port"
    fi
    mkdir -p "$(inst_dir "$port")"
    write_cnf "$port"
    init_datadir "$port"
    rm -f "$(pid_file "$port")" "$(sock_file "$port")"
    log "$port: starting mariadbd (${ROLE[$port]})"
    # setsid: the server must outlive this script and its process group.
    # Descriptors the caller holds (a lock file of a test run, a pipe) are
    # closed first: a server that inherits a lock holds it until it stops.
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
        done
        exec setsid mariadbd --defaults-file="$(cnf_file "$port")" --user=root \
            </dev/null >>"$(err_log "$port").stdout" 2>&1
    ) &
    disown || true
}

# Waits until PORT answers; on failure prints the tail of its error log.
wait_ready() {
    local port=$1 deadline
    deadline=$((SECONDS + WAIT_SECS))
    while :; do
        if mariadb-admin --no-defaults --protocol=socket --socket="$(sock_file "$port")" -uroot \
            --connect-timeout=2 ping >/dev/null 2>&1; then
            return 0
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "$port: did not answer within ${WAIT_SECS}s; last lines of $(err_log "$port"):"
            tail -n 30 "$(err_log "$port")" >&2 2>/dev/null || true
            return 1
        fi
        # The server is gone (crashed on a bad option, port taken, ...).
        if [ -z "$(running_pid "$port")" ]; then
            log "$port: mariadbd exited during startup; last lines of $(err_log "$port"):"
            tail -n 30 "$(err_log "$port")" >&2 2>/dev/null || true
            return 1
        fi
        sleep 0.2
    done
}

# Makes USER@HOST (created if missing, with PASSWORD) hold exactly GRANTS
# (lines as SHOW GRANTS prints them, %HOST% for the host, no password
# clause). When its grants differ, every privilege is revoked and GRANTS given
# again, in one batch; when they match, nothing is sent, so a running fleet's
# sessions are untouched. Not binlogged.
converge_account() {
    local port=$1 user=$2 host=$3 password=$4 grants=$5 want have
    want="$(printf '%s\n' "${grants//%HOST%/$host}" | sort)"
    sql "$port" -e "SET SESSION sql_log_bin = 0;
CREATE USER IF NOT EXISTS '$user'@'$host' IDENTIFIED BY '$password';
ALTER USER '$user'@'$host' IDENTIFIED BY '$password';"
    have="$(sql "$port" -e "SHOW GRANTS FOR '$user'@'$host'" \
        | sed "s/ IDENTIFIED BY PASSWORD '[^']*'//" | sort)"
    [ "$have" = "$want" ] && return 0
    log "$port: setting the grants of $user@$host"
    { printf 'SET SESSION sql_log_bin = 0;\n'
      printf "REVOKE ALL PRIVILEGES, GRANT OPTION FROM '%s'@'%s';\n" "$user" "$host"
      printf '%s\n' "$want" | { grep -v '^GRANT USAGE ON' || true; } | sed 's/$/;/'
    } | sql "$port"
}

# Creates the accounts (not written to the binlog, so each instance, replica
# included, owns its own accounts) and, on a replica, starts replication.
setup_instance() {
    local port=$1 host grants=$BACKEND_GRANTS
    case "${ROLE[$port]}" in spare | scratch) grants=$SCRATCH_BACKEND_GRANTS ;; esac
    for host in 127.0.0.1 localhost; do
        converge_account "$port" "$BACKEND_USER" "$host" "$BACKEND_PASSWORD" "$grants"
        converge_account "$port" "$OPS_USER" "$host" "$OPS_PASSWORD" "$OPS_GRANTS"
    done
    sql "$port" <<EOF
SET SESSION sql_log_bin = 0;
CREATE USER IF NOT EXISTS '$REPL_USER'@'127.0.0.1' IDENTIFIED BY '$REPL_PASSWORD';
CREATE USER IF NOT EXISTS '$REPL_USER'@'localhost' IDENTIFIED BY '$REPL_PASSWORD';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '$REPL_USER'@'127.0.0.1';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '$REPL_USER'@'localhost';
EOF
    local master=${REPLICA_OF[$port]:-}
    if [ -n "$master" ]; then
        if [ -z "$(sql "$port" -e 'SHOW SLAVE STATUS')" ]; then
            log "$port: replicating from 127.0.0.1:$master (GTID, slave_pos)"
            sql "$port" <<EOF
CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$master,
  MASTER_USER='$REPL_USER', MASTER_PASSWORD='$REPL_PASSWORD',
  MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos;
START SLAVE;
EOF
        fi
    fi
}

start_ports() {
    local port failed=0
    for port in "$@"; do launch "$port"; done
    for port in "$@"; do
        if wait_ready "$port"; then
            setup_instance "$port" || { log "$port: account/replication setup failed"; failed=1; }
        else
            failed=1
        fi
    done
    return "$failed"
}

# ---------------------------------------------------------------- stop

# Waits up to STOP_WAIT_SECS for PID (the server on PORT) to exit, then
# SIGKILLs it.
wait_exit() {
    kill_after "$2" "$STOP_WAIT_SECS" "$1"
    rm -f "$(pid_file "$1")"
}

# Stops the given ports: SIGTERM to all at once (a clean InnoDB shutdown),
# then a bounded wait for each, so a full stop takes as long as the slowest
# instance, not the sum. With SIGNAL=KILL the servers die at once, like a
# crashed host (InnoDB recovers on the next start).
stop_ports() {
    local signal=${SIGNAL:-TERM} port pid
    declare -A pids=()
    for port in "$@"; do
        pid="$(running_pid "$port")"
        [ -n "$pid" ] || continue
        pids[$port]=$pid
        log "$port: stopping pid $pid (SIG$signal)"
        kill "-$signal" "$pid" 2>/dev/null || true
    done
    for port in "${!pids[@]}"; do wait_exit "$port" "${pids[$port]}"; done
}

# ---------------------------------------------------------------- status

status() {
    local port pid running repl
    printf '%-6s %-10s %-8s %-8s %s\n' PORT ROLE RUNNING PID DETAIL
    for port in $(known_ports); do
        pid="$(running_pid "$port")"
        running=no
        repl=""
        if [ -n "$pid" ]; then
            running=yes
            if [ -n "${REPLICA_OF[$port]:-}" ]; then
                repl="$(sql "$port" --column-names -e 'SHOW SLAVE STATUS\G' 2>/dev/null | awk -F': ' '
                    $1 ~ /Slave_IO_Running$/ {io=$2} $1 ~ /Slave_SQL_Running$/ {sq=$2}
                    $1 ~ /Seconds_Behind_Master$/ {lag=$2} $1 ~ /Gtid_IO_Pos$/ {g=$2}
                    END { if (io != "") printf "of 127.0.0.1:%s io=%s sql=%s lag=%s gtid=%s", m, io, sq, lag, g }' m="${REPLICA_OF[$port]}")"
                [ -n "$repl" ] || repl="replication not configured"
            fi
        else
            pid=-
        fi
        printf '%-6s %-10s %-8s %-8s %s\n' "$port" "${ROLE[$port]}" "$running" "$pid" "$repl"
    done
    printf 'data: %s\n' "$FLEET_DIR"
}

# ---------------------------------------------------------------- main

cmd="${1:-}"
case "$cmd" in
    install)
        ensure_mariadb
        log "MariaDB: $(mariadbd --version 2>/dev/null | head -n 1)"
        ;;
    start)
        ensure_mariadb
        mkdir -p "$FLEET_DIR"
        start_ports "${PORTS[@]}" || { status; die "fleet did not start completely"; }
        status
        ;;
    stop)
        # shellcheck disable=SC2046
        stop_ports $(known_ports)
        status
        ;;
    status)
        command -v mariadb >/dev/null 2>&1 || export PATH="$PATH:/usr/sbin:/sbin"
        status
        ;;
    stop-host)
        [ $# -eq 2 ] || die "usage: $0 stop-host PORT"
        valid_port "$2"
        stop_ports "$2"
        ;;
    kill-host)
        [ $# -eq 2 ] || die "usage: $0 kill-host PORT"
        valid_port "$2"
        SIGNAL=KILL stop_ports "$2"
        ;;
    start-host)
        [ $# -eq 2 ] || die "usage: $0 start-host PORT"
        valid_port "$2"
        ensure_mariadb
        start_ports "$2" || die "$2 did not start"
        ;;
    wipe)
        # shellcheck disable=SC2046
        stop_ports $(known_ports)
        log "removing $FLEET_DIR"
        rm -rf "$FLEET_DIR"
        ;;
    *)
        usage "$0"
        [ -z "$cmd" ] || [ "$cmd" = help ] || [ "$cmd" = -h ] || [ "$cmd" = --help ] || exit 2
        ;;
esac
