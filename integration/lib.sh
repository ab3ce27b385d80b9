# Shell helpers the scripts under integration/ (and .ci/run) share; sourced,
# never run:
#
#   LOG_TAG=fleet
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Logging: log, die (prefixed with [$LOG_TAG]), section (a step banner with
# the seconds since the script started), usage (the script's header
# comment). Tools: ensure_cargo, apt_install [--no-start] PACKAGE...
# Processes and ports: cmdline, command_of, alive, frozen, kill_after,
# port_in_use, port_holder, describe_port_holder, wait_port_free.
# Nothing here starts or stops anything by itself.

# ---------------------------------------------------------------- logging

log() { printf '[%s] %s\n' "${LOG_TAG:-shardgate}" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "${LOG_TAG:-shardgate}" "$*" >&2; exit 1; }

# A step banner, with the seconds since the script started.
section() { printf '\n===== %s  [%ds]\n' "$*" "$SECONDS"; }

# Prints the header comment of SCRIPT (the comment lines after the #! line,
# without their `# `).
usage() {
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$1"
}

# ---------------------------------------------------------------- tools

# Puts ~/.cargo/bin on PATH when cargo is not found; fails if it still is not.
ensure_cargo() {
    command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs)"
}

# apt-get install -y -qq PACKAGE... (with sudo when not root; `apt-get
# update` once per script). With --no-start a package's own service is kept
# from starting (policy-rc.d makes invoke-rc.d skip it): the test fleet and
# ZooKeeper run their own instances.
APT_UPDATED=0
apt_install() {
    local no_start=0
    if [ "${1:-}" = --no-start ]; then
        no_start=1
        shift
    fi
    command -v apt-get >/dev/null 2>&1 || die "need $*, and apt-get is not available: install them by hand"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    if [ "$APT_UPDATED" -eq 0 ]; then
        "${sudo[@]}" apt-get update -qq
        APT_UPDATED=1
    fi
    local policy=/usr/sbin/policy-rc.d created_policy=0
    if [ "$no_start" -eq 1 ] && [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod +x "$policy"
        created_policy=1
    fi
    log "apt-get install $*"
    local rc=0
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || rc=$?
    [ "$created_policy" -eq 0 ] || "${sudo[@]}" rm -f "$policy"
    return "$rc"
}

# ---------------------------------------------------------------- processes

# PID's command line, one argument per line.
cmdline() { tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null || true; }

# PID's command line on one line, cut to 100 characters.
command_of() { cmdline "$1" | tr '\n' ' ' | cut -c1-100 | sed 's/ *$//'; }

# True while PID exists and is not a zombie (an orphaned server that has
# exited may linger as a zombie until init reaps it).
alive() {
    local state
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)"
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# True if PID is stopped by a signal (frozen).
frozen() {
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)" = T ]
}

# Waits up to SECONDS for PID to exit, then SIGKILLs it (LABEL names it in
# the message).
kill_after() {
    local pid=$1 seconds=$2 label=${3:-pid $1} deadline
    deadline=$((SECONDS + seconds))
    while alive "$pid"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "$label: no exit after ${seconds}s; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
            break
        fi
        sleep 0.05
    done
}

# ---------------------------------------------------------------- ports

# True if something accepts connections on 127.0.0.1:PORT.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Pid of the process listening on TCP PORT, or nothing (another user's
# process cannot be seen without root).
port_holder() {
    local port=$1 pid inode
    if command -v ss >/dev/null 2>&1; then
        pid="$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 || true)"
        [ -n "$pid" ] && { echo "${pid#pid=}"; return 0; }
    fi
    for inode in $(awk -v p="$(printf ':%04X' "$port")" \
        '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
        pid="$(find /proc/[0-9]*/fd -lname "socket:\[$inode\]" 2>/dev/null | head -n 1 | cut -d/ -f3 || true)"
        [ -n "$pid" ] && { echo "$pid"; return 0; }
    done
}

# Who holds PORT, for messages: "pid N (COMMAND)", or "another process
# (pid unknown: see ss -ltnp)".
describe_port_holder() {
    local pid
    pid="$(port_holder "$1")"
    if [ -n "$pid" ]; then
        echo "pid $pid ($(command_of "$pid"))"
    else
        echo "another process (pid unknown: see ss -ltnp)"
    fi
}

# Waits up to SECONDS (default 10) until nothing accepts connections on
# 127.0.0.1:PORT; fails with a message if something still does.
wait_port_free() {
    local port=$1 deadline=$((SECONDS + ${2:-10}))
    while port_in_use "$port"; do
        [ "$SECONDS" -lt "$deadline" ] || die "port $port still in use"
        sleep 0.1
    done
}
