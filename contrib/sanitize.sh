#!/usr/bin/env bash
# The test programs under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer:
# the matcher, tag engine, tm_sm, hardware tag list and protocol layer suites, and UCP over
# tm_sm (ucp_tag_test, the plugin preloaded). Any report fails the run: UBSan does not
# recover, ASan and LSan exit non-zero. The fuzzers are built sanitized (and run) by the main build;
# the scripts that load the plugin into stock UCX tools, Open MPI and the QEMU guest are not
# run here (an instrumented plugin in an uninstrumented process needs the ASan runtime
# preloaded first, which the scripts' own LD_PRELOAD replaces).
# Usage: contrib/sanitize.sh [--build-only] [build-dir] (default build-asan); needs
# contrib/deps.sh's packages. --build-only builds the instrumented libraries and test programs
# and runs nothing (contrib/test.sh --full builds them while the QEMU guests run).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build_only=0
if [[ ${1:-} == --build-only ]]; then
    build_only=1
    shift
fi
build=${1:-$src/build-asan}
# In CXX, not CXXFLAGS: libtool links shared libraries without CXXFLAGS. The runtimes also
# in LIBS: the libraries link with -Wl,--no-undefined. No -Werror: at -O1 with ASan, g++ 12
# warns -Warray-bounds on branches it cannot rule out (copy_bytes into an 8-byte payload).
"$src/contrib/build.sh" "$build" --disable-werror --without-fuzzer \
    CXX="g++ -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
    CXXFLAGS="-O1 -g -fno-omit-frame-pointer" LIBS="-lasan -lubsan" >/dev/null
cd "$build"
# The test programs at -O0, the code under test at -O1: with both sanitizers g++ takes three
# times as long at -O1 (test_tag_api.cc: 63 s against 19 s); the stage takes 9-10 minutes, not 15.
# (The libraries are built above and up to date: this CXXFLAGS recompiles none of them.)
make -j"$(nproc)" check TESTS= CXXFLAGS="-O0 -g -fno-omit-frame-pointer" >check-build.log 2>&1 ||
    { tail -30 check-build.log; exit 1; }
((build_only == 0)) || exit 0

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
rc=0
suite() { # dir tests...
    local dir=$1
    shift
    make -C "tests/$dir" check TESTS="$*" >/dev/null 2>&1 || rc=1
    for t in "$@"; do
        if grep -q ':test-result: PASS' "tests/$dir/$t.trs" 2>/dev/null; then
            echo "PASS: $dir/$t"
        else
            echo "FAIL: $dir/$t"
            grep -m3 -A12 'runtime error\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|FAILED' \
                "tests/$dir/$t.log" || tail -20 "tests/$dir/$t.log"
        fi
    done
}
programs() { # dir: its check programs, as configured here
    # shellcheck disable=SC2016 # a make expression, expanded by make
    make -C "tests/$1" -s --no-print-directory --eval 'print-%: ; @echo $($*)' print-check_PROGRAMS
}
for dir in unit uct proto ib; do
    # shellcheck disable=SC2046
    suite "$dir" $(programs "$dir")
done

# UCP over tm_sm: the instrumented plugin preloaded after the sanitizer runtimes. RECV_MIN=0:
# ucp_tag_test expects its receives from 2 KiB on in tm_sm's list (by default UCP keeps those
# up to one descriptor, test_ucp.sh).
runtimes="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)"
plugin=$build/uct_tm/.libs/libuct_tm.so
for tls in "UCX_TLS=tm_sm" "UCX_TLS=tm_sm,self"; do
    if (cd tests/integration && env "$tls" UCX_TM_SM_RECV_MIN=0 LD_PRELOAD="$runtimes $plugin" timeout 600 \
            ./ucp_tag_test >"ucp_tag_test.$tls.log" 2>&1); then
        echo "PASS: ucp_tag_test $tls"
    else
        rc=1
        echo "FAIL: ucp_tag_test $tls"
        tail -20 "tests/integration/ucp_tag_test.$tls.log"
    fi
done
exit $rc
