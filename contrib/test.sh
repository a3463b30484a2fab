#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole suite.
#   contrib/test.sh            build + make check
#   CI=true contrib/test.sh    also: clang -Werror build, the suite built --enable-debug
#                              (assertions on; the QEMU guest tests only in the main
#                              build), the suites under ASan/LSan/UBSan,
#                              a 60 s soak (contrib/soak.sh), make distcheck (without
#                              rdma-core), the tarball's Debian packages (with rdma-core)
#                              built, installed, run and purged, and its RPMs built with
#                              and without rdma-core (contrib/packages.sh)
#   UCT_TM_UCX_TREES="t1 t2"   also: the UCX compatibility matrix over those UCX source trees
#                              (contrib/ucx_matrix.sh; colon- or space-separated)
# Ends with one line "uct-tm tests: N passed, M failed".
set -euo pipefail
# A stage's heading says when it started, minutes into this script: where a
# CI run with a time budget spends it.
stage() { printf '== %s  [+%d:%02d]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
cd "$src"

contrib/deps.sh
contrib/build.sh "$build"

# Counts the individual tests of a build's `make check` into passed / failed:
# gtest cases from each gtest log, other harness tests (fuzz runs, scripts)
# one each. Then, if the run failed, shows the logs that say so.
count_check() {  # build-dir check-exit-status
    local dir=$1 rc=$2 trs log p f
    while IFS= read -r -d '' trs; do
        log=${trs%.trs}.log
        if grep -q '^\[==========\]' "$log" 2>/dev/null; then
            p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
            f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
            passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
            if grep -q ':test-result: FAIL\|:test-result: ERROR' "$trs" && [[ -z "$f" ]]; then
                failed=$((failed + 1))   # crashed before gtest's summary
            fi
        else
            if grep -q ':test-result: PASS' "$trs"; then passed=$((passed + 1))
            elif grep -q ':test-result: SKIP' "$trs"; then :
            else failed=$((failed + 1)); fi
        fi
    done < <(find "$dir/tests" -name '*.trs' -print0)
    if [[ $rc -ne 0 ]]; then
        find "$dir/tests" -name '*.log' -newer "$dir/config.status" -exec grep -l 'FAIL\|ERROR' {} + 2>/dev/null |
            while read -r l; do echo "---- $l"; failure_excerpt "$l"; done
    fi
}

# What a failed log says: for a gtest log, every failed test whole from its
# RUN line (the assertion and its trace sit mid-log, not at the end), then
# the summary; for anything else (a crash included) its tail.
failure_excerpt() {  # log
    if grep -q '^\[==========\] .* ran\.' "$1"; then
        awk '/^\[ RUN      \]/ { n = 0 } { block[n++] = $0 }
             /^\[  FAILED  \] .*\([0-9]+ ms\)$/ {
                 print block[0]; shown = 0
                 for (i = 1; i < n - 1 && shown < 120; i++) {
                     if (block[i] ~ /: Failure$/) until = i + 12
                     if (i <= until) { print block[i]; shown++ }
                 }
                 print block[n - 1]; n = 0; until = 0 }' "$1"
        grep -A30 '^\[==========\] .* ran\.' "$1" | grep -v '^\[  SKIPPED \]'
    else
        tail -40 "$1"
    fi
}

cd "$build"
stage "make check"
check_rc=0
make -j"$(nproc)" check || check_rc=$?
passed=0 failed=0
count_check "$build" "$check_rc"

extra_rc=0
if [[ "${CI:-}" == "true" || "${TM_FULL_CHECK:-}" == "1" ]]; then
    stage "clang++ -Werror build"
    "$src/contrib/build.sh" "$build-clang" CXX=clang++ || extra_rc=1
    # The test programs too (built, not run: g++'s build ran them above).
    make -C "$build-clang" -j"$(nproc)" check TESTS= >"$build-clang/check-build.log" 2>&1 ||
        { tail -40 "$build-clang/check-build.log"; extra_rc=1; }
    stage "debug build (--enable-debug): the suite with assertions on"
    mkdir -p "$build-debug"
    if "$src/contrib/build.sh" "$build-debug" --enable-debug >"$build-debug/build.log" 2>&1; then
        debug_rc=0 before_p=$passed before_f=$failed
        # The QEMU guest tests ran against the main build above; under software
        # emulation they take half an hour per build on a slow host, more than the
        # CI's budget allows twice. The debug build runs every other test.
        RXE_TESTS=no make -C "$build-debug" -j"$(nproc)" check >"$build-debug/check.log" 2>&1 || debug_rc=$?
        count_check "$build-debug" "$debug_rc"
        echo "debug suite: passed $((passed - before_p)), failed $((failed - before_f))"
        [[ $debug_rc -eq 0 ]] || extra_rc=1
    else
        tail -40 "$build-debug/build.log"; extra_rc=1
    fi
    stage "the suites under ASan, LSan and UBSan (contrib/sanitize.sh)"
    mkdir -p "$build-asan"
    "$src/contrib/sanitize.sh" "$build-asan" | tee "$build-asan/sanitize.log" || extra_rc=1
    passed=$((passed + $(grep -c '^PASS: ' "$build-asan/sanitize.log" || true)))
    failed=$((failed + $(grep -c '^FAIL: ' "$build-asan/sanitize.log" || true)))
    stage "installed plugin seen by stock ucx_info"
    rm -rf "$build/inst"
    if make -C "$build" -j"$(nproc)" install DESTDIR="$build/inst" >"$build/install.log" 2>&1 &&
       plugin=$(find "$build/inst" -name libuct_tm.so -path '*/ucx/*' | head -1) && [[ -n "$plugin" ]] &&
       PLUGIN=$plugin "$src/tests/uct/test_ucx_info.sh" >"$build/installed_ucx_info.log" 2>&1; then
        passed=$((passed + 1)); echo "PASS: installed $plugin"
    else
        failed=$((failed + 1)); echo "FAIL: installed plugin check"; tail -20 "$build/install.log" "$build/installed_ucx_info.log" 2>/dev/null
    fi
    stage "installed layout: UCX's module name, uct-tm.pc"
    if "$src/tests/integration/test_installed.sh" "$build/inst" >"$build/installed_layout.log" 2>&1; then
        passed=$((passed + 1)); echo "PASS: installed layout"
    else
        failed=$((failed + 1)); echo "FAIL: installed layout"; cat "$build/installed_layout.log"
    fi
    stage "soak: 8 pairs of tm_soak, 60 s of kills, stops and resumes (contrib/soak.sh)"
    if PAIRS=8 TOOLS="$build/src/tools" "$src/contrib/soak.sh" 60 >"$build/soak.log" 2>&1; then
        passed=$((passed + 1)); echo "PASS: soak"; sed -n '/^soak report/,$p' "$build/soak.log"
    else
        failed=$((failed + 1)); echo "FAIL: soak"; tail -40 "$build/soak.log"
    fi
    stage "make distcheck"
    if make -C "$build" -j"$(nproc)" distcheck >"$build/distcheck.log" 2>&1; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL: make distcheck"; tail -60 "$build/distcheck.log"
    fi
    grep -A1 'archives ready for distribution' "$build/distcheck.log" || true
    # The release tarball with rdma-core: its .debs and its RPM --with verbs build it so
    # (configure --with-verbs), next; the git tree's -Werror build with verbs ran above.
    tarball=$(ls -t "$build"/uct-tm-*.tar.gz 2>/dev/null | head -1)
    stage "packages: the tarball's .debs built, linted, installed, run, purged; its RPMs (contrib/packages.sh)"
    if [[ -n "$tarball" ]]; then
        "$src/contrib/packages.sh" "$tarball" "$build/packages" | tee "$build/packages.log" || extra_rc=1
        passed=$((passed + $(grep -c '^PASS: ' "$build/packages.log" || true)))
        failed=$((failed + $(grep -c '^FAIL: ' "$build/packages.log" || true)))
    else
        failed=$((failed + 1)); echo "FAIL: packages: no release tarball"
    fi
fi

if [[ -n "${UCT_TM_UCX_TREES:-}" ]]; then
    stage "UCX compatibility matrix over UCT_TM_UCX_TREES (contrib/ucx_matrix.sh)"
    IFS=': ' read -r -a trees <<<"$UCT_TM_UCX_TREES"
    if "$src/contrib/ucx_matrix.sh" "${trees[@]}"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL: UCX compatibility matrix"
    fi
else
    stage "UCX compatibility matrix: skipped (this build uses UCX $(sed -n 's/^UCX_VERSION = //p' "$build/Makefile");" \
         "set UCT_TM_UCX_TREES to UCX source trees to build and test against each, contrib/ucx_matrix.sh)"
fi

stage "done"
echo "uct-tm tests: $passed passed, $failed failed"
[[ $check_rc -eq 0 && $extra_rc -eq 0 && $failed -eq 0 ]]
