#!/usr/bin/env bash
# Runs shardgate's cargo-fuzz targets (fuzz/, see RELIABILITY.md "Fuzzing").
#
#   integration/fuzz.sh [seconds-per-target] [target...]
#
# Default: 300 s for each of frame, handshake, stmt_execute, admin_parse and
# route, one after the other. Installs what is missing (the nightly
# toolchain, cargo-fuzz), builds the targets (release, debug assertions,
# no sanitizer unless FUZZ_SANITIZER=address), then runs each from its
# seed corpus fuzz/corpus/<target>/ and the inputs that once crashed it,
# fuzz/regressions/<target>/ (route with fuzz/dict/sql.dict).
# Prints one summary line per target: executions, executions per second,
# coverage (edges and features, at start and at the end), corpus entries
# added, crashes.
#
# A crash (panic, failed check, stack overflow, timeout, memory limit)
# leaves its reproducer in fuzz/artifacts/<target>/ and makes the script
# exit 1 once every target has run. Reproduce with
#   fuzz/target/x86_64-unknown-linux-gnu/release/<target> fuzz/artifacts/<target>/<file>
# (debug/ instead of release/ after FUZZ_BUILD=dev).
#
# New corpus entries: the run writes them to fuzz/work-corpus/<target>/
# (not committed). Unless CI=true or FUZZ_KEEP_CORPUS=0, the entries that add
# coverage and are at most FUZZ_KEEP_MAX_BYTES (600) long are merged into
# fuzz/corpus/<target>/ afterwards, to be committed.
#
# Environment: FUZZ_BUILD (release, the default: optimised with debug
# assertions; dev: unoptimised, built in less than half the CPU time, for
# short CI runs), FUZZ_SANITIZER (none|address, default none), FUZZ_JOBS
# (targets run at once, default 1), FUZZ_CODEGEN_UNITS (16: a build several
# times faster than cargo-fuzz's default of 1, for slightly slower runs),
# FUZZ_KEEP_CORPUS, FUZZ_KEEP_MAX_BYTES.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ="$ROOT/fuzz"
cd "$FUZZ"

ALL_TARGETS=(frame handshake stmt_execute admin_parse route)
SECONDS_PER_TARGET="${1:-300}"
[ "$#" -gt 0 ] && shift
TARGETS=("$@")
[ "${#TARGETS[@]}" -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")
case "$SECONDS_PER_TARGET" in
    '' | *[!0-9]*) echo "usage: integration/fuzz.sh [seconds-per-target] [target...]" >&2; exit 2 ;;
esac

SANITIZER="${FUZZ_SANITIZER:-none}"
CODEGEN_UNITS="${FUZZ_CODEGEN_UNITS:-16}"
JOBS="${FUZZ_JOBS:-1}"
KEEP_MAX="${FUZZ_KEEP_MAX_BYTES:-600}"
if [ "${CI:-false}" = true ]; then KEEP="${FUZZ_KEEP_CORPUS:-0}"; else KEEP="${FUZZ_KEEP_CORPUS:-1}"; fi

STARTED=$SECONDS
step() { printf '===== fuzz: %s  [%ds]\n' "$*" "$((SECONDS - STARTED))"; }

command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
command -v rustup >/dev/null 2>&1 || { echo "rustup not found (install the Rust toolchain with rustup)" >&2; exit 1; }
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    step "installing the nightly toolchain (rustup)"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    step "installing cargo-fuzz (cargo install)"
    cargo install cargo-fuzz --locked
fi

LOGS="$FUZZ/target/fuzz-logs"
mkdir -p "$LOGS"
case "${FUZZ_BUILD:-release}" in
    release) BUILD=(cargo +nightly fuzz build --sanitizer "$SANITIZER" --codegen-units "$CODEGEN_UNITS"); PROFILE_DIR=release ;;
    dev) BUILD=(cargo +nightly fuzz build --dev --sanitizer "$SANITIZER"); PROFILE_DIR=debug ;;
    *) echo "FUZZ_BUILD must be release or dev" >&2; exit 2 ;;
esac
step "build: ${BUILD[*]} ($(rustup run nightly rustc --version))"
BUILD_STARTED=$SECONDS
if ! "${BUILD[@]}" >"$LOGS/build.log" 2>&1; then
    tail -n 60 "$LOGS/build.log" >&2
    echo "fuzz build failed (log: $LOGS/build.log)" >&2
    exit 1
fi
BIN_DIR="$FUZZ/target/$(rustup run nightly rustc -vV | sed -n 's/^host: //p')/$PROFILE_DIR"
for target in "${TARGETS[@]}"; do
    [ -x "$BIN_DIR/$target" ] || { echo "no fuzz target '$target' (built: ${ALL_TARGETS[*]})" >&2; exit 2; }
done
step "built in $((SECONDS - BUILD_STARTED)) s"

options_for() {
    case "$1" in
        route) echo "-max_len=8192 -dict=$FUZZ/dict/sql.dict" ;;
        stmt_execute) echo "-max_len=8192" ;;
        admin_parse) echo "-max_len=1024" ;;
        *) echo "-max_len=4096" ;;
    esac
}

# Runs one target; its log goes to $LOGS/<target>.log.
run_target() {
    local target=$1 log="$LOGS/$1.log" started=$SECONDS status=0
    mkdir -p "$FUZZ/work-corpus/$target" "$FUZZ/artifacts/$target" "$FUZZ/corpus/$target"
    local dirs=("$FUZZ/work-corpus/$target" "$FUZZ/corpus/$target")
    [ -d "$FUZZ/regressions/$target" ] && dirs+=("$FUZZ/regressions/$target")
    # shellcheck disable=SC2046
    "$BIN_DIR/$target" "${dirs[@]}" \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=30 -rss_limit_mb=2048 \
        -artifact_prefix="$FUZZ/artifacts/$target/" -print_final_stats=1 \
        $(options_for "$target") >"$log" 2>&1 || status=$?
    echo "$((SECONDS - started))" >"$LOGS/$target.seconds"
    return "$status"
}

# The summary line of a finished target, from its log and exit status.
summarize() {
    local target=$1 status=$2 log="$LOGS/$1.log"
    local execs rate added init_cov init_ft cov ft artifacts took
    took=$(cat "$LOGS/$target.seconds" 2>/dev/null || echo "?")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
    added=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -n1)
    init_cov=$(grep -m1 -E 'INITED .*cov: ' "$log" | sed -E 's/.*cov: ([0-9]+).*/\1/' || true)
    init_ft=$(grep -m1 -E 'INITED .*ft: ' "$log" | sed -E 's/.*ft: ([0-9]+).*/\1/' || true)
    cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n1 | sed -E 's/.*cov: ([0-9]+).*/\1/' || true)
    ft=$(grep -E '^#[0-9]+.*ft: ' "$log" | tail -n1 | sed -E 's/.*ft: ([0-9]+).*/\1/' || true)
    artifacts=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tr '\n' ' ')
    local verdict="crashes: 0"
    if [ "$status" -ne 0 ]; then
        verdict="CRASH (exit $status): ${artifacts:-see $log}"
    fi
    printf 'fuzz %-12s %s executions in %ss (%s exec/s), coverage %s -> %s edges, %s -> %s features, %s new corpus entries, %s\n' \
        "$target" "${execs:-?}" "$took" "${rate:-?}" "${init_cov:-?}" "${cov:-?}" \
        "${init_ft:-?}" "${ft:-?}" "${added:-0}" "$verdict"
}

keep_corpus() {
    local target=$1 small="$FUZZ/target/keep/$1"
    rm -rf "$small" && mkdir -p "$small"
    find "$FUZZ/work-corpus/$target" -type f -size -"$((KEEP_MAX + 1))"c -exec cp {} "$small/" \;
    local before after
    before=$(find "$FUZZ/corpus/$target" -type f | wc -l)
    "$BIN_DIR/$target" -merge=1 "$FUZZ/corpus/$target" "$small" $(options_for "$target") \
        >"$LOGS/$target.merge.log" 2>&1 || { echo "  (merge of new $target entries failed; see $LOGS/$target.merge.log)"; return 0; }
    after=$(find "$FUZZ/corpus/$target" -type f | wc -l)
    echo "  corpus/$target: $before -> $after entries ($(find "$FUZZ/corpus/$target" -type f -printf '%s\n' | awk '{s += $1} END {print s}') bytes)"
}

step "running ${TARGETS[*]} for ${SECONDS_PER_TARGET} s each, $JOBS at a time (logs in $LOGS)"
declare -A STATUS=()
pending=("${TARGETS[@]}")
while [ "${#pending[@]}" -gt 0 ]; do
    batch=("${pending[@]:0:$JOBS}")
    pending=("${pending[@]:$JOBS}")
    declare -A PIDS=()
    for target in "${batch[@]}"; do
        run_target "$target" &
        PIDS[$target]=$!
    done
    for target in "${batch[@]}"; do
        status=0
        wait "${PIDS[$target]}" || status=$?
        STATUS[$target]=$status
        summarize "$target" "$status"
    done
    unset PIDS
done

failed=0
for target in "${TARGETS[@]}"; do
    [ "${STATUS[$target]}" -eq 0 ] || failed=1
done
if [ "$KEEP" = 1 ]; then
    step "keeping new corpus entries of at most $KEEP_MAX bytes that add coverage"
    for target in "${TARGETS[@]}"; do
        [ "${STATUS[$target]}" -eq 0 ] && keep_corpus "$target"
    done
fi
if [ "$failed" -ne 0 ]; then
    step "FAILED: reproducers in fuzz/artifacts/<target>/"
    exit 1
fi
step "done, no crash"
