#!/usr/bin/env bash
# Fetches MySQL Connector/Python's own test suite: the sdist of the version
# integration/drivers/python/requirements.txt pins (the wheel installed in
# integration/.venv), from PyPI with pip, checked against a pinned sha256,
# unpacked into integration/.venv/connector-python-src. Idempotent; called
# by integration/drivers/setup.sh.
set -euo pipefail

VERSION=9.5.0
SHA256=92fb924285a86d8c146ebd63d94f9eaefa548da7813bc46271508fdc6cc1d596
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VENV="$ROOT/integration/.venv"
DEST="$VENV/connector-python-src"

log() { printf '[drivers setup] %s\n' "$*" >&2; }
die() { printf '[drivers setup] ERROR: %s\n' "$*" >&2; exit 1; }

grep -qx "mysql-connector-python==$VERSION" "$ROOT/integration/drivers/python/requirements.txt" \
    || die "requirements.txt no longer pins mysql-connector-python==$VERSION: update VERSION and SHA256 in $0"
if [ "$(cat "$DEST/.sha256" 2>/dev/null || true)" = "$SHA256" ] && [ -f "$DEST/tests/__init__.py" ]; then
    exit 0
fi
[ -x "$VENV/bin/python" ] || die "$VENV is missing: run integration/drivers/setup.sh"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/shardgate-connector-src.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
log "pip download mysql-connector-python==$VERSION (sdist, for its test suite)"
"$VENV/bin/python" -m pip download --disable-pip-version-check --no-input -q --no-deps \
    --no-binary :all: "mysql-connector-python==$VERSION" -d "$TMP"
SDIST="$TMP/mysql_connector_python-$VERSION.tar.gz"
[ -f "$SDIST" ] || die "pip did not download $(basename "$SDIST")"
got="$(sha256sum "$SDIST" | cut -d' ' -f1)"
[ "$got" = "$SHA256" ] || die "$(basename "$SDIST") has sha256 $got, expected $SHA256"
rm -rf "$DEST"
mkdir -p "$DEST"
tar -xzf "$SDIST" -C "$DEST" --strip-components=1
echo "$SHA256" >"$DEST/.sha256"
log "Connector/Python $VERSION test suite in ${DEST#"$ROOT"/}"
