#!/usr/bin/env bash
# The test command, in tiers. Each installs what is missing and builds first.
#   contrib/test.sh          host tier: the format of the C/C++ lines changed since a base
#                            (contrib/check_format.sh), then every suite that runs on this
#                            machine itself -- unit,
#                            uct (tm_sm conformance, multi-process, hostile input), the protocol
#                            layer, the hardware tag list on its device model, the fuzzers
#                            (FUZZ_SECONDS each), and the integration scripts (UCP, ucx_perftest,
#                            Open MPI, MPICH, the tools, a dead peer)
#   contrib/test.sh --rxe    guest tier: the suites on Soft-RoCE in QEMU guests alone (tm_rc and
#                            tm_dc conformance, the protocol layer over them, UCP in the guest,
#                            two hosts), for verbs work
#   contrib/test.sh --full   what .ci/run runs: both tiers, then the test programs built with
#                            clang++ -Werror --enable-debug (assertions on) and run, the suites under
#                            ASan/LSan/UBSan, the installed plugin, a 60 s soak (contrib/soak.sh),
#                            make distcheck (without rdma-core), the tarball's Debian packages
#                            (with rdma-core and the libfabric provider) built, installed, run and
#                            purged, and its RPMs built with and without rdma-core and the
#                            provider (contrib/packages.sh)
#   FABTESTS_SRC=SRC         also (host and full tiers): libfabric's fabtests over the provider
#                            tm, built from that libfabric source (contrib/fabtests.sh), over
#                            each domain of FABTESTS_DOMAINS (default tm_sm); said skipped without
#   UCT_TM_UCX_TREES="t1 t2" also: the UCX compatibility matrix over those UCX source trees
#                            (contrib/ucx_matrix.sh; colon- or space-separated)
# The builds after the first run the test programs, not the integration scripts again
# (INTEGRATION_TESTS=no), and compile no fuzzer: the main build ran both.
# Ends with a table of the stages' minutes and one line "uct-tm tests: N passed, M failed".
set -euo pipefail
tier=host
case ${1:-} in
'') ;;
--rxe) tier=rxe ;;
--full) tier=full ;;
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
*) echo "usage: $0 [--rxe | --full]" >&2; exit 2 ;;
esac
[[ $tier != full ]] || export TM_FULL_CHECK=1 # deps.sh: the packaging tools too
# a source tree named relative to where this was started (the stages run elsewhere)
[[ ! -d ${FABTESTS_SRC:-} ]] || FABTESTS_SRC=$(cd "$FABTESTS_SRC" && pwd)

# A stage's heading says when it started, minutes into this script; the table at
# the end how long each took: where a CI run with a time budget spends it.
stage_names=() stage_starts=()
stage() {
    printf '== %s  [+%d:%02d]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60))
    local name=${*%%:*}
    stage_names+=("${name%% (*}") stage_starts+=("$SECONDS")
}
stage_table() {
    local i end
    echo "| stage | minutes |"
    echo "|---|---|"
    for i in "${!stage_names[@]}"; do
        [[ ${stage_names[i]} != done ]] || continue
        end=${stage_starts[i + 1]:-$SECONDS}
        printf '| %s | %d:%02d |\n' "${stage_names[i]}" $(((end - stage_starts[i]) / 60)) $(((end - stage_starts[i]) % 60))
    done
    printf '| total | %d:%02d |\n' $((SECONDS / 60)) $((SECONDS % 60))
}
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
cd "$src"

stage "dependencies and the main build"
contrib/deps.sh
contrib/build.sh "$build"

# Counts the individual tests of a build's `make check` into passed / failed:
# gtest cases from each gtest log, other harness tests (fuzz runs, scripts)
# one each. Then, if the run failed, shows the logs that say so.
count_check() {  # build-dir check-exit-status [test names: only those]
    local dir=$1 rc=$2 trs log p f name
    shift 2
    while IFS= read -r -d '' trs; do
        name=${trs##*/}
        if [[ $# -gt 0 && " $* " != *" ${name%.trs} "* ]]; then continue; fi
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

# The QEMU guest suites, each a test of its directory's make check (the test
# programs they run are built first); one guest at a time on 2 cores.
RXE_SUITES=("tests/ib:test_rxe.sh test_rxe_proto.sh" "tests/integration:test_ucp_rxe.sh test_hosts_rxe.sh")
guest_tier() {  # build-dir; status: 0 if every guest suite passed
    local dir=$1 rc=0 suite sub
    if ! grep -q '^#define HAVE_VERBS 1' "$dir/config.h"; then
        echo "guest tier: skipped, this build has no verbs transports (configure --with-verbs)"
        return 0
    fi
    for sub in tests/uct tests/proto tests/ib tests/integration; do
        make -C "$dir/$sub" -j"$(nproc)" check TESTS= >"$dir/$sub/check-programs.log" 2>&1 ||
            { tail -40 "$dir/$sub/check-programs.log"; return 1; }
    done
    for suite in "${RXE_SUITES[@]}"; do
        make -C "$dir/${suite%%:*}" check TESTS="${suite#*:}" || rc=1
    done
    return $rc
}
guest_tests() { local s; for s in "${RXE_SUITES[@]}"; do echo "${s#*:}"; done; }

# The later stages' builds, libraries and test programs, each logged in its directory.
# The debug build is clang's: -Werror with clang's front end (g++'s build ran the code at
# -O2) and the assertions on, in one build of the tree rather than two.
debug_build() {
    mkdir -p "$build-debug"
    { "$src/contrib/build.sh" "$build-debug" CXX=clang++ --enable-debug --without-fuzzer &&
        make -C "$build-debug" -j"$(nproc)" check TESTS=; } >"$build-debug/build.log" 2>&1
}
# Both at the lowest priority while the guests run: the emulation keeps about one of
# the two cores busy, these compile on the other and give way whenever a guest wants it
# (the stages build again later, which finds them up to date or shows the failure).
later_builds() {
    debug_build || true
    mkdir -p "$build-asan"
    "$src/contrib/sanitize.sh" --build-only "$build-asan" || true
}

# Adds a stage log's PASS: and FAIL: lines (one test each) to the counts.
count_log() {  # log
    passed=$((passed + $(grep -c '^PASS: ' "$1" || true)))
    failed=$((failed + $(grep -c '^FAIL: ' "$1" || true)))
}

# libfabric's fabtests over the provider tm (contrib/fabtests.sh: built once from
# FABTESTS_SRC, outside the tree), over each domain of FABTESTS_DOMAINS (default tm_sm).
fabtests_stage() {
    local domain log
    if [[ -z ${FABTESTS_SRC:-} ]]; then
        echo "SKIP: fabtests (set FABTESTS_SRC to a libfabric source tree, git repository or URL)"
        return 0
    fi
    if [[ ! -f $build/src/fabric/.libs/libtm-fi.so ]]; then
        echo "SKIP: fabtests (this build has no libfabric provider)"
        return 0
    fi
    for domain in ${FABTESTS_DOMAINS:-tm_sm}; do
        stage "fabtests over the provider tm, domain $domain (contrib/fabtests.sh)"
        log=$build/fabtests-${domain//,/_}.log
        FI_TM_DOMAIN=$domain FABTESTS_TIMEOUT=${FABTESTS_TIMEOUT:-60} \
            "$src/contrib/fabtests.sh" "$build" | tee "$log" || extra_rc=1
        count_log "$log"
    done
}

passed=0 failed=0 check_rc=0 extra_rc=0
if [[ $tier != rxe ]]; then
    stage "format: the changed lines against .clang-format (contrib/check_format.sh)"
    format_rc=0
    "$src/contrib/check_format.sh" || format_rc=$?
    if [[ $format_rc == 0 ]]; then
        passed=$((passed + 1))
    elif [[ $format_rc == 77 ]]; then
        echo "SKIP: format of the changed lines (nothing to compare with)"
    else
        failed=$((failed + 1)); echo "FAIL: format of the changed lines"
    fi
fi
cd "$build"
if [[ $tier != rxe ]]; then
    stage "host tier: make check (the guest suites skipped: RXE_TESTS=no)"
    RXE_TESTS=no make -j"$(nproc)" check || check_rc=$?
    fabtests_stage
fi
if [[ $tier != host ]]; then
    heading="guest tier: Soft-RoCE in QEMU guests (tests/ib, tests/integration *_rxe.sh)"
    later_pid=
    if [[ $tier == full ]]; then
        # (renice in the subshell: children inherit it, this script keeps its own)
        (renice -n 19 -p "$BASHPID" >/dev/null; later_builds >"$build/later-builds.log" 2>&1) </dev/null &
        later_pid=$!
        heading+="; the later stages' builds alongside at nice 19"
    fi
    stage "$heading"
    guest_tier "$build" || check_rc=1
    if [[ -n $later_pid ]]; then
        stage "the later stages' builds: what the guests left of them"
        wait "$later_pid" || true
    fi
fi
if [[ $tier == rxe ]]; then
    # shellcheck disable=SC2046 # the names, one word each
    count_check "$build" "$check_rc" $(guest_tests)
else
    count_check "$build" "$check_rc"
fi

if [[ $tier == full ]]; then
    stage "debug build (clang++ -Werror, --enable-debug): the test programs with assertions on"
    if debug_build; then
        debug_rc=0 before_p=$passed before_f=$failed
        RXE_TESTS=no INTEGRATION_TESTS=no make -C "$build-debug" -j"$(nproc)" check \
            >"$build-debug/check.log" 2>&1 || debug_rc=$?
        count_check "$build-debug" "$debug_rc"
        echo "debug suite: passed $((passed - before_p)), failed $((failed - before_f))"
        [[ $debug_rc -eq 0 ]] || extra_rc=1
    else
        tail -40 "$build-debug/build.log"; extra_rc=1
    fi

    stage "the suites under ASan, LSan and UBSan (contrib/sanitize.sh)"
    mkdir -p "$build-asan"
    "$src/contrib/sanitize.sh" "$build-asan" | tee "$build-asan/sanitize.log" || extra_rc=1
    count_log "$build-asan/sanitize.log"

    stage "installed plugin: stock ucx_info, UCX's module name, uct-tm.pc"
    rm -rf "$build/inst"
    if make -C "$build" -j"$(nproc)" install DESTDIR="$build/inst" >"$build/install.log" 2>&1 &&
       plugin=$(find "$build/inst" -name libuct_tm.so -path '*/ucx/*' | head -1) && [[ -n "$plugin" ]] &&
       PLUGIN=$plugin "$src/tests/uct/test_ucx_info.sh" >"$build/installed_ucx_info.log" 2>&1; then
        passed=$((passed + 1)); echo "PASS: installed $plugin"
    else
        failed=$((failed + 1)); echo "FAIL: installed plugin check"; tail -20 "$build/install.log" "$build/installed_ucx_info.log" 2>/dev/null
    fi
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

    stage "make distcheck: the tarball built and its test programs run"
    # Without debug information: this build checks the tarball, not the code.
    if RXE_TESTS=no INTEGRATION_TESTS=no make -C "$build" -j"$(nproc)" distcheck \
        DISTCHECK_CONFIGURE_FLAGS="--without-fuzzer CXXFLAGS=-O2" >"$build/distcheck.log" 2>&1; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL: make distcheck"; tail -60 "$build/distcheck.log"
    fi
    grep -A1 'archives ready for distribution' "$build/distcheck.log" || true

    # The release tarball with rdma-core: its .debs and its RPM --with verbs build it so
    # (configure --with-verbs); the git tree's -Werror build with verbs ran above.
    tarball=$(ls -t "$build"/uct-tm-*.tar.gz 2>/dev/null | head -1)
    stage "packages: the tarball's .debs built, linted, installed, run, purged; its RPMs (contrib/packages.sh)"
    if [[ -n "$tarball" ]]; then
        "$src/contrib/packages.sh" "$tarball" "$build/packages" | tee "$build/packages.log" || extra_rc=1
        count_log "$build/packages.log"
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
elif [[ $tier == full ]]; then
    echo "(UCX compatibility matrix not run: this build uses UCX $(sed -n 's/^UCX_VERSION = //p' "$build/Makefile");" \
         "set UCT_TM_UCX_TREES to UCX source trees to build and test against each, contrib/ucx_matrix.sh)"
fi

stage "done"
stage_table
echo "uct-tm tests: $passed passed, $failed failed"
[[ $check_rc -eq 0 && $extra_rc -eq 0 && $failed -eq 0 ]]
