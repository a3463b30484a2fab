#!/bin/sh
# Automake TEST (LOG_COMPILER of tests/fuzz): run a libFuzzer target for a
# bounded time.
#   $1            the fuzzer binary (or FUZZ_BIN, as before)
#   FUZZ_SECONDS  time budget in seconds (default 20)
# Exit: 0 no crash, 1 crash / divergence / fuzzer error, 77 skipped.

FUZZ_BIN=${1:-${FUZZ_BIN:-}}
if [ -z "${FUZZ_BIN}" ] || [ ! -x "${FUZZ_BIN}" ]; then
    echo "run_fuzz.sh: SKIP: ${FUZZ_BIN:-no binary given} is not an executable fuzzer (build it: make -C tests/fuzz check)"
    exit 77
fi
name=$(basename "$FUZZ_BIN")

secs=${FUZZ_SECONDS:-20}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir "$tmp/corpus" || exit 99
log="$tmp/fuzz.log"

# Crash reproducers go to the current directory (the build dir) and survive.
"$FUZZ_BIN" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=60 -error_exitcode=1 \
    -print_final_stats=1 -artifact_prefix="${FUZZ_ARTIFACT_PREFIX:-./}" \
    "$tmp/corpus" >"$log" 2>&1
rc=$?

runs=$(sed -n 's/^Done \([0-9][0-9]*\) runs in \([0-9][0-9]*\) second.*/\1 runs in \2s/p' "$log" | tail -n 1)
[ -n "$runs" ] || runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
cov=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*/[^ ]*' "$log" | tail -n 1)
ncorp=$(ls "$tmp/corpus" | wc -l)

if [ "$rc" -eq 0 ]; then
    echo "$name: OK: ${runs:-? runs} (${secs}s budget), ${cov:-no coverage line}, corpus $ncorp inputs"
    exit 0
fi
tail -n 60 "$log"
grep -m 1 "^$name: " "$log"
echo "$name: FAILED (fuzzer exit $rc) after ${runs:-?} runs; reproducer (if any): $(grep -o 'Test unit written to .*' "$log" | tail -n 1)"
exit 1
