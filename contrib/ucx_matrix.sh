#!/usr/bin/env bash
# The compatibility matrix: uct-tm against each UCX release a user points at.
#
#   contrib/ucx_matrix.sh TREE [TREE...]
#
# Each TREE is a UCX source tree (a checkout of openucx/ucx at a release tag,
# or `git archive v1.22.0 | tar -x` of one). For each:
#   1. contrib/ucx_cache.sh builds the tree once into the cache (release
#      settings, shared memory, CMA and TCP) — later runs reuse it;
#   2. uct-tm is configured --with-ucx=<that build> and built (-Werror);
#   3. the columns below are run, each a pass/fail (or skip) of its own;
# and one table is printed at the end (markdown; also in $UCX_MATRIX_WORK/table.md).
#
# Columns:
#   build      configure picks the release's compat header, everything builds
#   layout     the compat header's facts match the release's own headers
#              (contrib/ucx_layout.sh --check)
#   ucx_info   stock ucx_info lists tm_sm: LD_PRELOAD, and from 1.22 UCX_PLUGIN_PATH and
#              `make install` into UCX's module directory, with no preload
#   uct        tests/uct: ABI checks through libuct, the UCT tag conformance suite,
#              multi-process tests, the mismatched-plugin test
#   proto      tests/proto: the protocol layer over tm_sm and the release's posix and tcp
#   ucp        UCP with tag matching offloaded to tm_sm (tests/integration/test_ucp.sh:
#              counters show receives posted into tm_sm) and UCX_PROTO_INFO naming
#              tm_sm's tag-offload protocols (from 1.16, UCP's default v2 engine)
#   perftest   ucx_perftest tag_lat / tag_bw / tag_sync_lat over tm_sm
#   mpi        Open MPI's pml ucx and MPICH's ch4:ucx over tm_sm, with this release's libucp
#   foreign    this release's plugin loaded into the next tree's UCX (the last into the
#              first): one warning, nothing registered, UCX works
#   lat8       ucx_perftest tag_lat 8 B, tm_sm / that release's posix,cma (UCP), median of
#              ROUNDS interleaved rounds (ratio < 1: tm_sm faster)
#   gtest      UCX's own tag suites (UCT test_tag, UCP test_ucp_tag_*) over tm_sm, in the
#              release's build tree and installed (contrib/ucx_gtest.sh; builds the tree
#              again with --enable-gtest, about 15 minutes per release here the first time)
#
#   UCX_MATRIX_WORK   where builds and logs go (default ~/.cache/uct-tm/matrix)
#   UCX_CACHE         the UCX build cache (contrib/ucx_cache.sh)
#   ROUNDS            latency rounds per release (default 5)
#   UCX_MATRIX_GTEST  no: leave the gtest column out (skip)
# Exit status: 0 when every column of every release passed (or was skipped).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${UCX_MATRIX_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/uct-tm/matrix}
rounds=${ROUNDS:-5}
[[ $# -ge 1 ]] || { sed -n '2,39p' "$0" >&2; exit 2; }
mkdir -p "$work"

"$src/contrib/deps.sh"
[[ -x "$src/configure" ]] || (cd "$src" && ./autogen.sh >/dev/null 2>&1)

declare -a releases prefixes builds trees
declare -A result

log() { echo "ucx_matrix: $*" >&2; }

# column NAME RELEASE COMMAND...: runs COMMAND with its output in the release's log
# directory; records pass / FAIL / skip (exit 77).
column() {
    local name=$1 release=$2 rc
    shift 2
    "$@" >"$work/$release/$name.log" 2>&1
    rc=$?
    case $rc in
    0) result[$release,$name]=pass ;;
    77) result[$release,$name]=skip ;;
    *) result[$release,$name]=FAIL; log "$release: $name failed (log: $work/$release/$name.log)" ;;
    esac
}

# the environment the tests of a release run in: its tools first, its libraries
with_ucx() { # PREFIX COMMAND...
    local prefix=$1
    shift
    PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
}

# make check in one test directory of a build, its log kept
check_dir() { # BUILD DIR [make args]
    local build=$1 dir=$2
    shift 2
    make -C "$build/$dir" check "$@" || { cat "$build/$dir"/*.log 2>/dev/null | tail -80; return 1; }
}

ucx_info_column() { # PREFIX BUILD
    local prefix=$1 build=$2 moduledir rc=0
    PLUGIN=$build/uct_tm/.libs/libuct_tm.so TM_VERBS=$(sed -n 's/^TM_VERBS = //p' "$build/tests/uct/Makefile") \
        with_ucx "$prefix" "$src/tests/uct/test_ucx_info.sh" || rc=1
    # From 1.22: installed into UCX's own module directory, listed with no setting at all.
    if with_ucx "$prefix" bash -c '. "$1"; ucx_release_at_least 1 22' _ "$src/tests/common/ucx_release.sh"; then
        moduledir=$prefix/lib/ucx
        make -C "$build/uct_tm" install-ucxmoduleLTLIBRARIES ucxmoduledir="$moduledir" >/dev/null || rc=1
        if with_ucx "$prefix" ucx_info -d | grep -q '^#      Transport: tm_sm$'; then
            echo "ok: installed into $moduledir: ucx_info -d lists tm_sm, no preload, no UCX_PLUGIN_PATH"
        else
            echo "FAIL: installed into $moduledir, yet ucx_info -d does not list tm_sm"; rc=1
        fi
        make -C "$build/uct_tm" uninstall-ucxmoduleLTLIBRARIES ucxmoduledir="$moduledir" >/dev/null
        with_ucx "$prefix" ucx_info -d | grep -q 'Transport: tm_sm' &&
            { echo "FAIL: still listed after uninstall"; rc=1; }
    fi
    return $rc
}

# the UCP columns: integration tests, and which protocols UCP chose
ucp_column() { # BUILD
    check_dir "$1" tests/integration TESTS=test_ucp.sh
}

lat8_column() { # PREFIX BUILD RELEASE
    local prefix=$1 build=$2 release=$3 i port out ratios=()
    lat() { # TLS [VAR=VALUE]: 8 B tag_lat median latency in us
        port=$((20000 + RANDOM % 20000))
        with_ucx "$prefix" env "${@:2}" UCX_TLS="$1" timeout 60 ucx_perftest -p "$port" -t tag_lat -s 8 -n 20000 >/dev/null 2>&1 &
        sleep 0.5
        out=$(with_ucx "$prefix" env "${@:2}" UCX_TLS="$1" timeout 60 ucx_perftest 127.0.0.1 -p "$port" -t tag_lat -s 8 -n 20000 2>&1)
        wait
        awk '/^Final:/ {print $3}' <<<"$out"
    }
    for ((i = 0; i < rounds; i++)); do
        local a b
        if ((i % 2)); then
            b=$(lat posix,cma,self); a=$(lat tm_sm,self LD_PRELOAD="$build/uct_tm/.libs/libuct_tm.so")
        else
            a=$(lat tm_sm,self LD_PRELOAD="$build/uct_tm/.libs/libuct_tm.so"); b=$(lat posix,cma,self)
        fi
        [[ -n "$a" && -n "$b" ]] || { echo "round $i: a run failed (tm_sm '$a', posix '$b')"; return 1; }
        echo "round $i: tm_sm $a us, posix,cma $b us"
        ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')")
    done
    result[$release,lat8]=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)] "x"}')
    echo "median ratio ${result[$release,lat8]}"
}

# ---- build every release -----------------------------------------------------------
for tree in "$@"; do
    prefix=$("$src/contrib/ucx_cache.sh" "$tree") || { log "cannot build UCX from $tree"; exit 1; }
    release=$(with_ucx "$prefix" bash -c '. "$1"; ucx_release' _ "$src/tests/common/ucx_release.sh")
    [[ -n "$release" ]] || { log "cannot read the release of $prefix"; exit 1; }
    build=$work/$release/build
    mkdir -p "$build"
    releases+=("$release"); prefixes+=("$prefix"); builds+=("$build"); trees+=("$tree")
    log "UCX $release ($prefix): building uct-tm in $build"
    column build "$release" bash -c '
        cd "$1" && { [[ -f Makefile ]] || "$2/configure" --enable-werror --with-ucx="$3"; } &&
        make -j"$(nproc)" && make -j"$(nproc)" check TESTS=' _ "$build" "$src" "$prefix"
    column layout "$release" "$src/contrib/ucx_layout.sh" --check "$tree"
done

# ---- the columns ---------------------------------------------------------------------
n=${#releases[@]}
for ((i = 0; i < n; i++)); do
    release=${releases[i]} prefix=${prefixes[i]} build=${builds[i]}
    if [[ ${result[$release,build]} != pass ]]; then
        for c in ucx_info uct proto ucp perftest mpi foreign gtest; do result[$release,$c]=-; done
        result[$release,lat8]=-
        continue
    fi
    log "UCX $release: running the suite"
    column ucx_info "$release" ucx_info_column "$prefix" "$build"
    column uct "$release" check_dir "$build" tests/uct
    column proto "$release" check_dir "$build" tests/proto
    column ucp "$release" ucp_column "$build"
    column perftest "$release" check_dir "$build" tests/integration TESTS=test_perftest.sh
    column mpi "$release" check_dir "$build" tests/integration TESTS=test_mpi.sh
    other=$(( (i + 1) % n ))
    if ((n > 1)); then
        major_minor=${release%.*}
        column foreign "$release" env MISMATCHED="$build/uct_tm/.libs/libuct_tm.so.0" BUILT_FOR="$major_minor" \
            PATH="${prefixes[other]}/bin:$PATH" "$src/tests/uct/test_ucx_mismatch.sh"
    else
        result[$release,foreign]=skip
    fi
    column lat8log "$release" lat8_column "$prefix" "$build" "$release"
    [[ ${result[$release,lat8log]} == pass ]] || result[$release,lat8]=FAIL
    if [[ ${UCX_MATRIX_GTEST:-yes} == no ]]; then
        result[$release,gtest]=skip
    else
        column gtest "$release" "$src/contrib/ucx_gtest.sh" "${trees[i]}"
    fi
done

# ---- the table -----------------------------------------------------------------------
{
    echo "| UCX | build | layout | ucx_info | uct | proto | ucp | perftest | mpi | foreign | lat8 | gtest |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for release in "${releases[@]}"; do
        row="| $release"
        for c in build layout ucx_info uct proto ucp perftest mpi foreign lat8 gtest; do
            row+=" | ${result[$release,$c]:--}"
        done
        echo "$row |"
    done
} | tee "$work/table.md"
echo "(logs: $work/<release>/<column>.log)"
! grep -q 'FAIL' "$work/table.md"
