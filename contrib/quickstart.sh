#!/usr/bin/env bash
# The main job: installs what is missing, builds uct-tm, and runs a real
# two-process tagged exchange over the shared-memory transport tm_sm:
#   1. tm_perftest tag_lat with every payload byte checked (eager short,
#      bcopy, zcopy, multi-fragment, rendezvous), expected and unexpected;
#   2. tm_perftest tag_lat and tag_bw figures from 8 B to 4 MiB;
#   3. a short interleaved comparison with UCX's own ucx_perftest over
#      posix,cma,self (ratios; full runs: contrib/bench_sm.sh, docs/perf.md),
#      naming the UCX it compares with and how that UCX was built.
# Arguments go to configure: `BUILD_DIR=build-rel contrib/quickstart.sh
# --with-ucx=PREFIX` builds against a release-built UCX and compares with it.
# Idempotent: a second run rebuilds only what changed.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
cd "$src"

contrib/deps.sh
contrib/build.sh "$build" "$@"
perftest=$build/src/tools/tm_perftest

echo
echo "== tm_sm: two processes, every payload byte verified"
for mode in "" "--unexpected"; do
    "$perftest" -t tag_lat -s 8,200,6000,40000,300000,2000000 -n 200 --check $mode --no-header >/dev/null
    echo "   tagged ping-pong 8 B .. 2 MB, ${mode:---posted receives}: all data correct"
done

echo
echo "== tm_sm: latency (one-way) and bandwidth, malloc'd buffers"
"$perftest" -t tag_lat -s 8,64,1k,8k,64k,1m
echo
"$perftest" -t tag_bw -s 8,64,1k,8k,64k,1m,4m

# ucx_describe: the UCX this build runs with, and whether it checks as it goes (Debian's
# does, which slows its small-message paths: docs/perf.md has figures against release builds).
ucx_describe() {
    local bindir version name checks
    bindir=$(sed -n 's/^UCX_BINDIR = //p' "$build/Makefile")
    version=$(sed -n 's/^UCX_VERSION = //p' "$build/Makefile")
    name="UCX $version in ${bindir%/bin}"
    dpkg -S "$bindir/ucx_info" >/dev/null 2>&1 && name="Debian's UCX $version"
    checks=$("$bindir/ucx_info" -b 2>/dev/null | awk '$1 == "#define" && $3 == 1 &&
        ($2 == "ENABLE_ASSERT" || $2 == "ENABLE_PARAMS_CHECK") { print $2 }' | paste -sd, -)
    if [[ -n $checks ]]; then
        echo "$name (built with assertions: $checks)"
    else
        echo "$name (a release build: no assertions, no parameter checks)"
    fi
}

if command -v ucx_perftest >/dev/null; then
    echo
    echo "== against UCX posix,cma,self, interleaved (quick: 2 rounds)"
    echo "   the reference: $(ucx_describe)"
    echo "   (against release-built UCX 1.13.1 and 1.22.0: docs/perf.md, \"Today against UCX built for"
    echo "   release\"; to compare with one here: BUILD_DIR=build-rel contrib/quickstart.sh --with-ucx=PREFIX)"
    QUICK=1 ROUNDS=2 contrib/bench_sm.sh "$build" 2>/dev/null | sed -n '/^| case/,/^$/p;/^Targets/,$p'
fi
