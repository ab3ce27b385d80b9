#!/usr/bin/env bash
# Quick start: everything from a fresh Debian machine to a running proxy.
#
#   integration/quickstart.sh
#
# Installs MariaDB if missing, starts the local fleet (four mariadbd on
# 127.0.0.1:3307-3310, see integration/fleet.sh), builds shardgate (release),
# creates the 4096 + 4096 shard databases (idempotent: a second run skips
# them), then runs the proxy in the foreground:
#
#   target/release/shardgate serve --config config/shardgate.yaml
#
# Connect with:  mariadb -h127.0.0.1 -P6033 -uapp -papp --comments
# Admin port:    mariadb -h127.0.0.1 -P6032 -uadmin -padmin
# Ctrl-C stops the proxy; integration/fleet.sh stop stops the fleet.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=integration/lib.sh
. integration/lib.sh
ensure_cargo

section "MariaDB (installed with apt if missing)"
integration/fleet.sh install

section "fleet: integration/fleet.sh start"
integration/fleet.sh start

section "build: cargo build --release"
cargo build --release --bins
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/shardgate"

section "shard databases: shardgate fleet init (about half a minute the first time)"
"$BIN" fleet init --config config/shardgate.yaml --schema config/schema.sql

section "proxy: $BIN serve --config config/shardgate.yaml"
echo "connect with: mariadb -h127.0.0.1 -P6033 -uapp -papp --comments"
exec "$BIN" serve --config config/shardgate.yaml
