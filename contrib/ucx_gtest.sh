#!/usr/bin/env bash
# UCX's own tag test suites over tm_sm: UCT's test_tag and UCP's test_ucp_tag_*.
#
#   contrib/ucx_gtest.sh [--build-only] TREE [TREE...]
#
# TREE is a UCX source tree as a user has it (a checkout of openucx/ucx at a
# release tag, or `git archive v1.22.0 | tar -x` of one); it is not touched.
# For each tree:
#   1. the tree is copied into the work directory and UCX's gtest (test/gtest)
#      is given tm_sm instantiations -- one line after each suite's own:
#        _UCT_INSTANTIATE_TEST_CASE(test_tag, tm_sm)
#        UCP_INSTANTIATE_TEST_CASE_TLS(<suite>, tmsm, "tm_sm,self")
#      and, from 1.19, ucs::skip_hw_tm_offload() returns false (those
#      releases skip every tag-offload test unconditionally);
#   2. UCX is built with its release settings (contrib/configure-release)
#      and --enable-gtest (which builds the gtest program), installed beside
#      the build; C++ warnings are not errors (g++ 12 warns on 1.13's test
#      code; UCX's libraries are C); later runs reuse it;
#   3. uct-tm is configured --with-ucx=<that install> and built;
#   4. the suites run twice, each a row of the table printed at the end:
#        tree       the gtest program as UCX's build tree runs it (on the
#                   tree's libraries), plugin loaded the release's way:
#                   UCX_PLUGIN_PATH from 1.22, LD_PRELOAD before
#        installed  the same program on the installed libraries; from 1.22
#                   the plugin installed into UCX's module directory (no
#                   setting at all), before that preloaded from there.
#
# A row counts tests run, passed, failed and skipped (UCX's "[     SKIP ]"),
# and fails when one failed (but for the documented two below), one skipped
# for want of tm_sm, or none ran.
#
#   UCX_GTEST_WORK    builds and logs (default ~/.cache/uct-tm/ucx-gtest)
#   UCX_GTEST_FILTER  the gtest filter (default: every tm_sm instantiation)
#   UCX_GTEST_TIMEOUT seconds per run (default 3600)
#   UCX_GTEST_RUNS    which runs (default "tree installed")
#   UCX_JOBS          make -j (default: nproc)
# Nothing of UCX is part of uct-tm: the work directory holds only builds of
# the trees the user pointed at.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${UCX_GTEST_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/uct-tm/ucx-gtest}
jobs=${UCX_JOBS:-$(nproc)}
filter=${UCX_GTEST_FILTER:-tm_sm/test_tag.*:tmsm/*}
run_timeout=${UCX_GTEST_TIMEOUT:-3600}
build_only=no
[[ ${1:-} == --build-only ]] && { build_only=yes; shift; }
[[ $# -ge 1 ]] || { sed -n '2,38p' "$0" >&2; exit 2; }

log() { echo "ucx_gtest: $*" >&2; }

# The UCP suites given a tm_sm instantiation; the offload ones are
# instantiated by UCP_INSTANTIATE_TAG_OFFLOAD_TEST_CASE.
ucp_suites="test_ucp_tag_xfer test_ucp_tag_match test_ucp_tag_match_rndv test_ucp_tag_probe
            test_ucp_tag_cancel test_ucp_tag_mt test_ucp_tag_offload test_ucp_tag_offload_status"

. "$src/contrib/ucx_tree.sh"

# add_after FILE PATTERN LINE: LINE after the first line matching PATTERN (ERE);
# fails when none matches, so that a renamed suite is noticed.
add_after() {
    local file=$1 pattern=$2 line=$3
    grep -Eq "$pattern" "$file" || { log "$file: no line matches $pattern"; return 1; }
    awk -v pat="$pattern" -v add="$line" '{print} !done && $0 ~ pat {print add; done = 1}' \
        "$file" >"$file.tmp" && mv "$file.tmp" "$file"
}

instantiate_tm_sm() { # the copied tree
    local gt=$1/test/gtest suite file
    add_after "$gt/uct/test_tag.cc" '^UCT_TAG_INSTANTIATE_TEST_CASE\(test_tag\)' \
        '_UCT_INSTANTIATE_TEST_CASE(test_tag, tm_sm)' || return 1
    for suite in $ucp_suites; do
        file=$(grep -lE "^UCP_INSTANTIATE_(TAG_OFFLOAD_)?TEST_CASE\($suite\)" "$gt"/ucp/test_ucp_tag*.cc | head -1)
        [[ -n "$file" ]] || { log "no instantiation of $suite in $gt/ucp"; return 1; }
        add_after "$file" "^UCP_INSTANTIATE_(TAG_OFFLOAD_)?TEST_CASE\($suite\)" \
            "UCP_INSTANTIATE_TEST_CASE_TLS($suite, tmsm, \"tm_sm,self\")" || return 1
    done
    if grep -q 'bool skip_hw_tm_offload()' "$gt/common/test_helpers.cc"; then
        perl -0pi -e 's/(bool skip_hw_tm_offload\(\)\s*\{[^}]*?)return true;/$1return false;/' \
            "$gt/common/test_helpers.cc"
        grep -Pzq 'skip_hw_tm_offload\(\)\s*\{[^}]*return false;' "$gt/common/test_helpers.cc" ||
            { log "cannot make skip_hw_tm_offload() return false"; return 1; }
    fi
}

build_ucx() { # TREE DIR: UCX with its gtest into DIR/src/build, installed into DIR/install
    local tree=$1 dir=$2 log=$2/ucx-build.log
    [[ -f "$dir/.built" ]] && return 0
    rm -rf "$dir"
    mkdir -p "$dir"
    log "building UCX $(ucx_release "$tree") with its gtest in $dir (log: $log)"
    cp -a "$tree" "$dir/src"
    rm -rf "$dir/src/.git"
    instantiate_tm_sm "$dir/src" || return 1
    if ! (cd "$dir/src" && ./autogen.sh && mkdir -p build && cd build &&
          ../contrib/configure-release --prefix="$dir/install" --enable-mt --enable-gtest \
              --without-java --without-go --disable-doxygen-doc \
              --without-cuda --without-rocm --without-verbs --without-rdmacm \
              --without-knem --without-xpmem --without-ugni --without-ze \
              --disable-static CXXFLAGS=-Wno-error &&
          make -j"$jobs" && make install) >"$log" 2>&1; then
        log "UCX failed to build; the end of $log:"
        tail -20 "$log" >&2
        return 1
    fi
    touch "$dir/.built"
}

build_uct_tm() { # DIR: uct-tm against DIR/install, in DIR/uct-tm
    local dir=$1 b=$1/uct-tm
    [[ -x "$src/configure" ]] || (cd "$src" && ./autogen.sh >/dev/null 2>&1)
    mkdir -p "$b"
    (cd "$b" && { [[ -f Makefile ]] || "$src/configure" --with-ucx="$dir/install" --without-fuzzer; } &&
        make -j"$jobs") >"$dir/uct-tm-build.log" 2>&1 ||
        { log "uct-tm failed to build against $dir/install; the end of $dir/uct-tm-build.log:";
          tail -20 "$dir/uct-tm-build.log" >&2; return 1; }
}

at_least_1_22() { # RELEASE
    local major=${1%%.*} rest=${1#*.}
    ((major > 1 || ${rest%%.*} >= 22))
}

declare -a rows

# run_suites DIR RELEASE MODE: one row of the table
run_suites() {
    local dir=$1 release=$2 mode=$3 out=$1/gtest-$3.log plugin prog rc
    # RECV_MIN=0: UCX's offload suites expect receives posted from UCX_TM_THRESH, as rc_mlx5
    # (min_recv 0) takes them; tm_sm by default asks for those above one descriptor only
    local -a env=(UCX_HANDLE_ERRORS=bt GTEST_COLOR=no UCX_TM_SM_RECV_MIN=0)
    # UCX links the program -no-install: its RUNPATH names the build tree's
    # libraries first, which LD_LIBRARY_PATH overrides for the installed run.
    prog=$dir/src/build/test/gtest/gtest
    plugin=$dir/uct-tm/uct_tm/.libs/libuct_tm.so
    if [[ $mode == tree ]]; then
        if at_least_1_22 "$release"; then env+=(UCX_PLUGIN_PATH="$dir/uct-tm/uct_tm/.libs")
        else env+=(LD_PRELOAD="$plugin"); fi
    else
        make -C "$dir/uct-tm/uct_tm" install-ucxmoduleLTLIBRARIES \
            ucxmoduledir="$dir/install/lib/ucx" >/dev/null 2>&1 || return 1
        env+=(LD_LIBRARY_PATH="$dir/install/lib")
        at_least_1_22 "$release" || env+=(LD_PRELOAD="$dir/install/lib/ucx/libuct_tm.so")
    fi
    log "UCX $release, $mode: running $filter (log: $out)"
    { env "${env[@]}" ldd "$prog" | grep -E 'lib(uct|ucp)\.so'
      cd "$dir/src/build/test/gtest" &&
        env "${env[@]}" timeout "$run_timeout" "$prog" --gtest_filter="$filter"; } >"$out" 2>&1
    rc=$?
    [[ $mode == installed ]] && make -C "$dir/uct-tm/uct_tm" uninstall-ucxmoduleLTLIBRARIES \
        ucxmoduledir="$dir/install/lib/ucx" >/dev/null
    tally "$release" "$mode" "$out" "$rc"
}

# Tests that fail over tm_sm for a reason docs/using-with-ucx.md gives: they
# wait for a completion callback the UCT API lets a transport skip (tm_sm's
# eager zcopy completes at once and returns UCS_OK).
documented='tm_sm/test_tag.tag_eager_zcopy_expected/ tm_sm/test_tag.tag_eager_zcopy_tag_mask/'

tally() { # RELEASE MODE LOG RC: appends the row; fails as the row does
    local release=$1 mode=$2 out=$3 rc=$4 ran ok passed failed skipped absent known=0 t verdict=pass
    ran=$(grep -c '^\[ RUN      \]' "$out")
    ok=$(grep -c '^\[       OK \]' "$out") # UCX's skipped tests end OK too
    failed=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$out")
    skipped=$(grep -c '^\[     SKIP \]' "$out")
    # A skip for want of the transport (not the tests' own conditions,
    # such as "tag offload" for a test that needs it off).
    absent=$(grep -cE '^\[     SKIP \].*(not available|[Uu]nreachable|not supported|no tag offload)' "$out")
    for t in $documented; do
        grep -qE "^\[  FAILED  \] ${t//./\\.}.* \([0-9]+ ms\)$" "$out" && known=$((known + 1))
    done
    passed=$((ok - skipped))
    ((rc == 0 || failed == known)) && ((failed == known && ran > 0 && absent == 0 &&
        ok + failed == ran)) || verdict=FAIL
    ((rc == 124)) && verdict="FAIL (timed out after ${run_timeout} s)"
    rows+=("| $release | $mode | $ran | $passed | $failed ($known documented) | $skipped ($absent for want of tm_sm) | $verdict |")
    grep -E '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$out" | sed "s/^/ucx_gtest: $release $mode: /" >&2
    grep '^\[     SKIP \]' "$out" | sort | uniq -c | sed "s/^/ucx_gtest: $release $mode: skipped by the test: /" >&2
    [[ $verdict == pass ]]
}

status=0
for tree in "$@"; do
    tree=$(cd "$tree" && pwd) || exit 2
    [[ -f "$tree/configure.ac" && -d "$tree/test/gtest" ]] ||
        { log "$tree is not a UCX source tree with its gtest"; exit 2; }
    release=$(ucx_release "$tree") || { log "cannot read the release of $tree"; exit 2; }
    dir=$work/$release-$(tree_hash "$tree")
    build_ucx "$tree" "$dir" && build_uct_tm "$dir" || { status=1; continue; }
    [[ $build_only == yes ]] && continue
    for mode in ${UCX_GTEST_RUNS:-tree installed}; do
        run_suites "$dir" "$release" "$mode" || status=1
    done
done
[[ $build_only == yes ]] && exit $status

echo "| UCX | run | tests | passed | failed | skipped | verdict |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "(logs: $work/<release>-<hash>/gtest-<run>.log)"
exit $status
