#!/usr/bin/env bash
# Local shardgate test ZooKeeper: one standalone server on 127.0.0.1, run as
# a plain `java ... QuorumPeerMain zoo.cfg` process (not zkServer.sh, not the
# system service; no systemd needed). Proxies share their config through it.
#
# Usage: integration/zookeeper.sh install|start|stop|restart|status|wipe|freeze|thaw
#
#   install   only install Debian's zookeeperd (and its JRE) if missing, with
#             the package's own service kept from starting; check java runs.
#   start     install if missing (as install does), write the config, start
#             the server unless it already runs from this data directory,
#             wait until it answers `ruok` with `imok` and serves requests,
#             print the status table. Idempotent; data is kept. A frozen
#             server (see freeze) is thawed.
#   stop      SIGTERM, wait up to 10 s, then SIGKILL. A server stopped by
#             SIGTERM exits with status 143: that is a normal stop.
#   restart   stop, then start.
#   status    port, running, pid and the server's own `srvr` answer (mode,
#             version, node count).
#   wipe      stop and delete the data directory.
#   freeze    SIGSTOP the server: it answers nothing, and once thawed it
#             expires every client session whose timeout passed meanwhile
#             (fencing tests: every proxy loses its session at once).
#   thaw      SIGCONT the frozen server.
#
# Everything lives in $SHARDGATE_ZK_DIR (default integration/.zookeeper/):
# zoo.cfg (rewritten on every start), data/, zookeeper.log (the previous
# run's in zookeeper.log.1) and zookeeper.pid. The config is tuned for fast
# tests: tickTime=200 ms, session timeouts clamped to 400 ms..20 s (a client
# asking for 1 s is expired 1 to 1.2 s after the server last heard from it),
# no admin HTTP server, four-letter words ruok, srvr, stat, mntr, cons.
# Clients connect to 127.0.0.1:$SHARDGATE_ZK_PORT (integration/test.sh exports
# it to the tests as SHARDGATE_ZK=127.0.0.1:PORT).
#
# Environment: SHARDGATE_ZK_PORT (client port, default 2281), SHARDGATE_ZK_DIR
# (data location), SHARDGATE_ZK_WAIT (seconds to wait for the server to
# serve, default 30), SHARDGATE_ZK_REPLACE=1 (start: stop another checkout's
# test ZooKeeper that holds our port instead of failing; integration/test.sh
# sets it when CI=true).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG=zookeeper
# shellcheck source=integration/lib.sh
. "$SCRIPT_DIR/lib.sh"
ZK_DIR="${SHARDGATE_ZK_DIR:-$SCRIPT_DIR/.zookeeper}"
PORT="${SHARDGATE_ZK_PORT:-2281}"
WAIT_SECS="${SHARDGATE_ZK_WAIT:-30}"
STOP_WAIT_SECS=10

CFG="$ZK_DIR/zoo.cfg"
DATA_DIR="$ZK_DIR/data"
LOG_FILE="$ZK_DIR/zookeeper.log"
PID_FILE="$ZK_DIR/zookeeper.pid"

ZK_JAR=/usr/share/java/zookeeper.jar
# The jar logs through slf4j without a binding; slf4j-simple (a dependency of
# the package) makes the server log to stderr, i.e. zookeeper.log.
SLF4J_SIMPLE_JAR=/usr/share/java/slf4j-simple.jar
MAIN_CLASS=org.apache.zookeeper.server.quorum.QuorumPeerMain
# A system property on the server's command line that names its data
# directory and port: how this script tells its own server from another
# checkout's, and both from an unrelated process.
MARKER=-Dshardgate.zookeeper.dir=

case "$PORT" in
    '' | *[!0-9]*) die "SHARDGATE_ZK_PORT must be a port number, not '$PORT'" ;;
esac
[ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] || die "SHARDGATE_ZK_PORT $PORT is out of range"

# ---------------------------------------------------------------- install

# Installs zookeeperd with apt when the server jar or java is missing,
# without letting the package start its own server (0.0.0.0:2181).
ensure_zookeeper() {
    if [ -f "$ZK_JAR" ] && command -v java >/dev/null 2>&1; then
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || die "$ZK_JAR or java not found and apt-get is not available; install ZooKeeper 3.8 and a JRE"
    apt_install --no-start zookeeperd
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    # Should a packaged server have started anyway, stop it and keep it off.
    if [ -x /etc/init.d/zookeeper ]; then
        "${sudo[@]}" /etc/init.d/zookeeper stop >/dev/null 2>&1 || true
        "${sudo[@]}" update-rc.d zookeeper disable >/dev/null 2>&1 || true
    fi
    [ -f "$ZK_JAR" ] || die "$ZK_JAR still missing after apt-get install zookeeperd"
}

check_java() {
    command -v java >/dev/null 2>&1 || die "java not found (integration/zookeeper.sh install installs a JRE)"
    local out
    out="$(java -version 2>&1)" || { printf '%s\n' "$out" >&2; die "java does not run"; }
    [ -f "$ZK_JAR" ] || die "$ZK_JAR not found; run: $0 install"
}

# ---------------------------------------------------------------- state

# Who holds the port, for messages: "pid N (another checkout's test
# ZooKeeper, DIR)" or "pid N (COMMAND)".
describe_pid() {
    local dir
    dir="$(marker_dir "$1")"
    if [ -n "$dir" ]; then
        echo "pid $1 (another checkout's test ZooKeeper, $dir)"
    else
        echo "pid $1 ($(command_of "$1"))"
    fi
}

# The data directory / port a server pid was started with by this script
# (from any checkout), or nothing.
marker_dir()  { cmdline "$1" | sed -n "s/^$MARKER//p" | head -n 1; }
marker_port() { cmdline "$1" | sed -n 's/^-Dshardgate.zookeeper.port=//p' | head -n 1; }

# Prints the pid of the server running from ZK_DIR, or nothing.
running_pid() {
    local pid
    if [ -s "$PID_FILE" ]; then
        pid="$(tr -dc '0-9' <"$PID_FILE")"
        if [ -n "$pid" ] && alive "$pid" && [ "$(marker_dir "$pid")" = "$ZK_DIR" ]; then
            echo "$pid"
            return 0
        fi
    fi
    for pid in $(pgrep -f -- "$MAIN_CLASS" 2>/dev/null || true); do
        if alive "$pid" && [ "$(marker_dir "$pid")" = "$ZK_DIR" ]; then
            echo "$pid"
            return 0
        fi
    done
}

# Sends a four-letter word to the server and prints its answer; empty if it
# does not answer within 2 s (e.g. frozen: the kernel still accepts).
zk4() {
    local word=$1
    (
        exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
        printf '%s' "$word" >&3
        while IFS= read -r -t 2 -u 3 line || [ -n "$line" ]; do
            printf '%s\n' "$line"
            line=
        done
    ) 2>/dev/null || true
}

# ---------------------------------------------------------------- start

write_cfg() {
    cat >"$CFG" <<EOF
# Generated by integration/zookeeper.sh for the shardgate test ZooKeeper; do
# not edit (it is rewritten on every start).
tickTime=200
minSessionTimeout=400
maxSessionTimeout=20000
dataDir=$DATA_DIR
clientPort=$PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,cons
autopurge.purgeInterval=0
EOF
}

# Frees PORT if another checkout's test ZooKeeper holds it and
# SHARDGATE_ZK_REPLACE=1; otherwise fails with who holds it.
claim_port() {
    port_in_use "$PORT" || return 0
    local other other_dir
    other="$(port_holder "$PORT")"
    [ -n "$other" ] || die "port $PORT is in use by another process (pid unknown: see ss -ltnp); pick another with SHARDGATE_ZK_PORT"
    other_dir="$(marker_dir "$other")"
    if [ -z "$other_dir" ]; then
        die "port $PORT is in use by $(describe_pid "$other"), not a shardgate test ZooKeeper; stop it or pick another port with SHARDGATE_ZK_PORT"
    fi
    if [ "${SHARDGATE_ZK_REPLACE:-0}" != 1 ]; then
        die "port $PORT is held by $(describe_pid "$other"); stop it with: SHARDGATE_ZK_DIR=$other_dir $0 stop   (or set SHARDGATE_ZK_REPLACE=1)"
    fi
    log "port $PORT is held by $(describe_pid "$other"); stopping it (SHARDGATE_ZK_REPLACE=1)"
    stop_pid "$other"
    wait_port_free "$PORT"
}

# True once the server answers `imok` and serves requests: it answers ruok
# about 0.1 s before it has loaded its database, and until then srvr says
# "not currently serving requests" and closes every client connection.
serving() {
    [ "$(zk4 ruok)" = imok ] && zk4 srvr | grep -q '^Mode: '
}

# Waits until the server PID is serving; on failure prints the log's tail.
# With a second argument PID is this shell's child, whose exit status is shown.
wait_ready() {
    local pid=$1 child=${2:-} deadline how=exited
    deadline=$((SECONDS + WAIT_SECS))
    while ! serving; do
        if ! alive "$pid"; then
            if [ -n "$child" ]; then
                local rc=0
                wait "$pid" 2>/dev/null || rc=$?
                how="exited with status $rc"
            fi
            log "the server $how; last lines of $LOG_FILE:"
            tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "not serving within ${WAIT_SECS}s; last lines of $LOG_FILE:"
            tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
            return 1
        fi
        sleep 0.05
    done
}

start() {
    local pid
    pid="$(running_pid)"
    if [ -n "$pid" ]; then
        local port
        port="$(marker_port "$pid")"
        [ "$port" = "$PORT" ] || die "already running from $ZK_DIR on port $port (pid $pid), not $PORT; stop it first: $0 stop"
        if frozen "$pid"; then
            log "pid $pid is frozen; thawing it"
            kill -CONT "$pid"
        fi
        wait_ready "$pid" || die "the running server (pid $pid) does not answer ruok"
        log "already running on 127.0.0.1:$PORT (pid $pid)"
        return 0
    fi
    ensure_zookeeper
    check_java
    claim_port
    mkdir -p "$DATA_DIR"
    write_cfg
    [ -f "$LOG_FILE" ] && mv -f "$LOG_FILE" "$LOG_FILE.1"
    rm -f "$PID_FILE"
    local cp=$ZK_JAR
    [ -f "$SLF4J_SIMPLE_JAR" ] && cp="$cp:$SLF4J_SIMPLE_JAR"
    log "starting ZooKeeper on 127.0.0.1:$PORT (data $ZK_DIR)"
    # setsid: the server outlives this script and its process group. In a
    # script setsid execs java in place, so $! is the JVM's pid.
    setsid java -Xmx256m -XX:+UseSerialGC \
        "$MARKER$ZK_DIR" "-Dshardgate.zookeeper.port=$PORT" \
        -Dorg.slf4j.simpleLogger.showDateTime=true \
        '-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS' \
        -cp "$cp" "$MAIN_CLASS" "$CFG" </dev/null >"$LOG_FILE" 2>&1 &
    pid=$!
    echo "$pid" >"$PID_FILE"
    if ! wait_ready "$pid" child; then
        stop_pid "$pid"
        rm -f "$PID_FILE"
        die "ZooKeeper did not start"
    fi
    disown "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------- stop

# SIGTERM to PID (thawed first if frozen: a stopped process cannot act on
# it), up to STOP_WAIT_SECS for it to exit, then SIGKILL.
stop_pid() {
    kill -TERM "$1" 2>/dev/null || true
    kill -CONT "$1" 2>/dev/null || true
    kill_after "$1" "$STOP_WAIT_SECS"
}

stop() {
    local pid
    pid="$(running_pid)"
    if [ -z "$pid" ]; then
        rm -f "$PID_FILE"
        return 0
    fi
    log "stopping pid $pid (SIGTERM)"
    stop_pid "$pid"
    rm -f "$PID_FILE"
}

# ---------------------------------------------------------------- status

status() {
    local pid port=$PORT running=no detail="" srvr
    pid="$(running_pid)"
    if [ -n "$pid" ]; then
        running=yes
        port="$(marker_port "$pid")"
        if frozen "$pid"; then
            running=frozen
            detail="SIGSTOPped: $0 thaw"
        else
            srvr="$(PORT=$port zk4 srvr)"
            detail="$(printf '%s\n' "$srvr" | awk -F': ' '
                $1 == "Zookeeper version" { split($2, v, /[-,]/); ver = v[1] }
                $1 == "Mode" { mode = $2 } $1 == "Node count" { nodes = $2 }
                END { if (mode != "") printf "mode=%s version=%s nodes=%s", mode, ver, nodes }')"
            [ -n "$detail" ] || detail="no answer to srvr"
        fi
    else
        pid=-
        if port_in_use "$port"; then
            local other
            other="$(port_holder "$port")"
            if [ -n "$other" ]; then
                detail="port held by $(describe_pid "$other")"
            else
                detail="port held by another process"
            fi
        fi
    fi
    printf '%-6s %-8s %-8s %s\n' PORT RUNNING PID DETAIL
    printf '%-6s %-8s %-8s %s\n' "$port" "$running" "$pid" "$detail"
    printf 'data: %s\n' "$ZK_DIR"
}

# ---------------------------------------------------------------- main

signal_server() {
    local signal=$1 pid
    pid="$(running_pid)"
    [ -n "$pid" ] || die "not running (data $ZK_DIR)"
    kill "-$signal" "$pid"
    log "pid $pid: SIG$signal"
}

cmd="${1:-}"
case "$cmd" in
    install)
        ensure_zookeeper
        check_java
        log "ZooKeeper $(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo "($ZK_JAR)"); $(java -version 2>&1 | head -n 1)"
        ;;
    start)
        start
        status
        ;;
    stop)
        stop
        status
        ;;
    restart)
        stop
        start
        status
        ;;
    status)
        status
        ;;
    wipe)
        stop
        log "removing $ZK_DIR"
        rm -rf "$ZK_DIR"
        ;;
    freeze)
        signal_server STOP
        ;;
    thaw)
        signal_server CONT
        ;;
    *)
        usage "$0"
        [ -z "$cmd" ] || [ "$cmd" = help ] || [ "$cmd" = -h ] || [ "$cmd" = --help ] || exit 2
        ;;
esac
