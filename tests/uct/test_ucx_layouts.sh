#!/usr/bin/env bash
# The plugin finds the release of the UCX a process runs wherever that UCX's
# libucp lives (uct_tm/plugin.cc reads ucp_get_version), and registers its
# transports:
#   - UCX's build tree: libuct in src/uct/.libs, libucp in src/ucp/.libs, in a
#     program that links libuct only (this directory's test_tag_conformance);
#   - a libucp the program has loaded from a directory other than libuct's
#     (ucx_info);
# and, with no libucp to be found, it says so once and registers nothing.
# The layouts are symbolic links to this UCX's libraries (UCX_LIBDIR).
set -u
libdir=${UCX_LIBDIR:?set UCX_LIBDIR to the directory of the UCX libraries}
plugin=${PLUGIN:?set PLUGIN to the libuct_tm.so to preload}
[ -x ./test_tag_conformance ] || { echo "FAIL: ./test_tag_conformance is not built"; exit 1; }
command -v ucx_info >/dev/null || { echo "SKIP: ucx_info not installed (apt-get install ucx-utils)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
# place DIR LIB...: links to this UCX's libraries LIB (uct, ucs, ...) in DIR
place() {
    local dir=$1 lib
    shift
    mkdir -p "$dir"
    for lib in "$@"; do
        [ -e "$libdir/lib$lib.so.0" ] || { echo "FAIL: $libdir/lib$lib.so.0 not found"; exit 1; }
        ln -s "$libdir/lib$lib.so.0" "$dir/lib$lib.so.0"
    done
}
warned() { grep -c 'uct-tm: cannot tell which UCX release' <<<"$1"; }
capable() { # the environment to run test_tag_conformance's tm_sm check with
    env "$@" ./test_tag_conformance --gtest_filter=TagTransports.TmSmIsTagCapable --gtest_color=no 2>&1
}

tree=$tmp/ucx
for lib in uct ucs ucm ucp; do place "$tree/src/$lib/.libs" "$lib"; done
out=$(capable LD_LIBRARY_PATH="$tree/src/uct/.libs:$tree/src/ucs/.libs:$tree/src/ucm/.libs")
if grep -q '^\[  PASSED  \] 1 test' <<<"$out" && [ "$(warned "$out")" -eq 0 ]; then
    ok "UCX's build tree (src/uct/.libs, src/ucp/.libs): tm_sm registered"
else
    bad "UCX's build tree: $(grep -E 'uct-tm|Failure|FAILED' <<<"$out" | head -5)"
fi

# (not a build tree: nothing in $tmp/ucp/.libs)
place "$tmp/installed/lib" uct ucs ucm
place "$tmp/elsewhere" ucp
out=$(LD_LIBRARY_PATH="$tmp/installed/lib:$tmp/elsewhere" LD_PRELOAD=$plugin ucx_info -d 2>&1)
if grep -q 'Transport: tm_sm$' <<<"$out" && [ "$(warned "$out")" -eq 0 ]; then
    ok "a libucp loaded from another directory than libuct: tm_sm registered"
else
    bad "a libucp loaded from another directory: $(grep uct-tm <<<"$out" | head -3)"
fi

out=$(capable LD_LIBRARY_PATH="$tmp/installed/lib")
if [ "$(warned "$out")" -eq 1 ] && grep -q 'TmSmIsTagCapable' <<<"$out" && ! grep -q '^\[  PASSED  \] 1 test' <<<"$out"; then
    ok "no libucp anywhere: one warning, nothing registered"
else
    bad "no libucp anywhere: $(warned "$out") warnings; $(grep -E 'uct-tm|PASSED|FAILED' <<<"$out" | head -3)"
fi
exit $fail
