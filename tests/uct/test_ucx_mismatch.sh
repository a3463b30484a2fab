#!/usr/bin/env bash
# A plugin never breaks a UCX it was not built for. MISMATCHED is the plugin's
# module (libuct_tm.so.0, plugin.cc) built as if configure had found another
# UCX release; loaded into this UCX it must
#   - print exactly one warning through UCX's log, naming both releases,
#   - register nothing (no component "tm" or "tm_ib", no tm_sm),
#   - leave UCX working with its own transports (ucx_info -d lists them, a UCP
#     context and worker come up),
# through LD_PRELOAD, and on UCX >= 1.22 through UCX_PLUGIN_PATH too.
# contrib/ucx_matrix.sh runs the same checks with real builds for other
# releases (a 1.13 build in 1.22 and the reverse).
# Usage: MISMATCHED=<lib> BUILT_FOR=1.x test_ucx_mismatch.sh
set -u
lib=${MISMATCHED:?set MISMATCHED to the mismatched libuct_tm.so.0}
built_for=${BUILT_FOR:?set BUILT_FOR to the release it claims}
command -v ucx_info >/dev/null || { echo "SKIP: ucx_info not installed (apt-get install ucx-utils)"; exit 77; }
[ -e "$lib" ] || { echo "FAIL: $lib not found"; exit 1; }
. "$(dirname "$0")/../common/ucx_release.sh"
running=$(ucx_release)
[ -n "$running" ] || { echo "FAIL: cannot read the running UCX release from ucx_info -v"; exit 1; }
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

check() { # how, then the environment to load the plugin with
    local how=$1 out warnings
    shift
    out=$(env "$@" ucx_info -d 2>&1)
    local rc=$?
    warnings=$(grep -c 'WARN.*uct-tm' <<<"$out")
    [ "$warnings" -eq 1 ] && ok "$how: one warning" || bad "$how: $warnings warnings from uct-tm (want 1)"
    grep -q "built for UCX $built_for, but this process runs UCX $running" <<<"$out" &&
        ok "$how: the warning names both releases ($built_for, $running)" ||
        bad "$how: no warning naming UCX $built_for and $running: $(grep uct-tm <<<"$out")"
    grep -qE '^#     Component: tm(_ib)?$|Transport: tm_' <<<"$out" &&
        bad "$how: tm transports registered into a UCX they were not built for" ||
        ok "$how: nothing registered"
    [ $rc -eq 0 ] && grep -qE '^#      Transport: (posix|self)$' <<<"$out" &&
        ok "$how: UCX lists its own transports" || bad "$how: ucx_info -d failed (rc $rc)"
    out=$(env "$@" ucx_info -u t -e 2>&1)
    rc=$?
    [ $rc -eq 0 ] && grep -q 'lane\[0\]' <<<"$out" && ok "$how: a UCP context and worker come up" ||
        bad "$how: ucx_info -u t -e failed (rc $rc): $(tail -3 <<<"$out")"
}

check "LD_PRELOAD" LD_PRELOAD="$lib"

if ucx_release_at_least 1 22; then
    # UCX loads lib<framework>_<name>.so.0 with a name without '_'.
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    ln -s "$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")" "$dir/libuct_tmother.so.0"
    check "UCX_PLUGIN_PATH" UCX_PLUGIN_PATH="$dir"
else
    echo "ok: UCX $running loads no external modules (UCX_PLUGIN_PATH is 1.22's): preload only"
fi
exit $fail
