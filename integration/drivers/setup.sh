#!/usr/bin/env bash
# Installs what the driver conformance tests (integration/tests/drivers.rs)
# run, idempotently; integration/test.sh calls it before `cargo test`.
#
#   integration/drivers/setup.sh
#
# - Python: the virtualenv integration/.venv (python3 -m venv; Debian's
#   python3-venv is installed with apt if venv is unavailable) with the pinned
#   integration/drivers/python/requirements.txt (PyMySQL,
#   mysql-connector-python). Reinstalled only when requirements.txt changes.
#   Plus mysql-connector-python's sdist, for its own test suite
#   (python_upstream/fetch.sh: pip download, sha256-pinned).
# - Node: `npm ci` in integration/drivers/node (mysql2 from package-lock.json),
#   only when package.json or package-lock.json changed. Node.js and npm are
#   installed with apt if missing.
# - sysbench, with apt if missing.
# - Debian packages, with apt if missing: python3-mysqldb (mysqlclient, run
#   with Debian's /usr/bin/python3), libmariadb-java and default-jdk-headless
#   (MariaDB Connector/J, compiled against with javac), golang-go and
#   golang-github-go-sql-driver-mysql-dev (go-sql-driver/mysql with its own
#   test suite, integration/drivers/go/run_upstream.sh), libdbd-mariadb-perl
#   (DBD::MariaDB, integration/drivers/perl/dbd_mariadb_conformance.pl).
# The mariadb client (used by the sysbench script to seed rows) comes from
# integration/fleet.sh install.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DRIVERS="$ROOT/integration/drivers"
VENV="$ROOT/integration/.venv"

LOG_TAG="drivers setup"
# shellcheck source=integration/lib.sh
. "$ROOT/integration/lib.sh"

digest() { cat "$@" | sha256sum | cut -d' ' -f1; }

# ---------------------------------------------------------------- Python

command -v python3 >/dev/null 2>&1 || apt_install python3 python3-venv
if ! [ -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    rm -rf "$VENV"
    log "creating the virtualenv $VENV ($(python3 --version 2>&1))"
    if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
        # Debian's python3 ships venv without ensurepip unless python3-venv is installed.
        rm -rf "$VENV"
        apt_install python3-venv
        python3 -m venv "$VENV"
    fi
fi
REQ="$DRIVERS/python/requirements.txt"
STAMP="$VENV/.shardgate-requirements"
want="$(digest "$REQ")"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ] \
    || ! "$VENV/bin/python" -c 'import pymysql, mysql.connector' >/dev/null 2>&1; then
    log "pip install -r ${REQ#"$ROOT"/}"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$REQ"
    echo "$want" >"$STAMP"
fi
"$VENV/bin/python" -c 'import pymysql, mysql.connector
print("[drivers setup] python", __import__("sys").version.split()[0], "PyMySQL", pymysql.VERSION_STRING,
      "mysql-connector-python", mysql.connector.__version__, "C extension:", mysql.connector.HAVE_CEXT)' >&2
# Connector/Python's own test suite (its sdist's tests/, pinned by sha256).
"$DRIVERS/python_upstream/fetch.sh"

# ---------------------------------------------------------------- Node

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt_install nodejs npm
fi
NODE_DIR="$DRIVERS/node"
STAMP="$NODE_DIR/node_modules/.shardgate-lock"
want="$(digest "$NODE_DIR/package.json" "$NODE_DIR/package-lock.json")"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ] || ! [ -f "$NODE_DIR/node_modules/mysql2/package.json" ]; then
    log "npm ci in ${NODE_DIR#"$ROOT"/} (node $(node --version))"
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" >"$STAMP"
fi
log "node $(node --version), mysql2 $(node -p 'require(process.argv[1]).version' "$NODE_DIR/node_modules/mysql2/package.json")"

# ---------------------------------------------------------------- sysbench

command -v sysbench >/dev/null 2>&1 || apt_install sysbench
log "$(sysbench --version)"

# ---------------------------------------------------------------- Debian packages

missing=()
/usr/bin/python3 -c 'import MySQLdb' >/dev/null 2>&1 || missing+=(python3-mysqldb)
[ -f /usr/share/java/mariadb-java-client.jar ] || missing+=(libmariadb-java)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v go >/dev/null 2>&1 || missing+=(golang-go)
[ -f /usr/share/gocode/src/github.com/go-sql-driver/mysql/driver_test.go ] \
    || missing+=(golang-github-go-sql-driver-mysql-dev)
perl -MDBD::MariaDB -e1 >/dev/null 2>&1 || missing+=(libdbd-mariadb-perl)
[ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"
log "mysqlclient $(/usr/bin/python3 -c 'import MySQLdb; print(MySQLdb.__version__)'), \
$(dpkg-query -W -f='Connector/J ${Version}' libmariadb-java 2>/dev/null), $(javac -version 2>&1), \
$(go version), $(dpkg-query -W -f='go-sql-driver/mysql ${Version}' golang-github-go-sql-driver-mysql-dev 2>/dev/null)"
