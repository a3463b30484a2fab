#!/usr/bin/env bash
# Checks a `make install DESTDIR=...` tree the way users consume it:
#  - the plugin is in $libdir/ucx under the name UCX's module loader builds
#    (lib<framework>_<name><ext>, ext = libucs's ".so.0": libuct_tm.so.0), and as libuct_tm.so,
#    with the core component it loads (libuct_tm_component.so) next to it and, in builds with
#    rdma-core, the verbs component (libuct_tm_ib.so);
#  - only libuct_tm_ib.so needs rdma-core: ldd of the module and of the core component names
#    no libibverbs nor libmlx5, and with libibverbs and libmlx5 hidden from a process (a private
#    mount namespace, `unshare -m`, where the system permits it) tm_sm is still listed and
#    nothing is logged at UCX's default level;
#  - uct-tm.pc names that directory (plugindir, plugin) and its Libs link the plugin so that
#    a program that never calls it still gets component "tm" (--no-as-needed), and
#    component "tm_ib" when libuct_tm_ib.so is installed;
#  - a program linked without it does not list "tm" (the check is not vacuous).
# Usage: test_installed.sh DESTDIR   (run by contrib/test.sh with CI=true; DESTDIR /:
# what the packages installed, contrib/packages.sh)
set -u
destdir=${1:?usage: test_installed.sh DESTDIR}
destdir=$(cd "$destdir" && pwd)
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# DESTDIR / : the system's installation (contrib/packages.sh, the installed .debs).
if [ "$destdir" = / ]; then
    pc=$(pkg-config --variable=pcfiledir uct-tm 2>/dev/null)/uct-tm.pc
else
    pc=$(find "$destdir" -name uct-tm.pc -path '*/pkgconfig/*' | head -1)
fi
[ -f "$pc" ] || pc=""
[ -n "$pc" ] || { echo "FAIL: uct-tm.pc not installed"; exit 1; }
pkg() { PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$destdir pkg-config "$@"; }
# pkgconf prefixes the sysroot to variables too; older pkg-config does not.
in_destdir() { case "$1" in "$destdir"/*) echo "$1";; *) echo "$destdir$1";; esac; }
plugindir=$(in_destdir "$(pkg --variable=plugindir uct-tm)")
plugin=$(in_destdir "$(pkg --variable=plugin uct-tm)")
case "$plugindir" in */ucx) ok "plugindir is UCX's module directory ($plugindir)";; *) bad "plugindir $plugindir";; esac
[ -e "$plugin" ] && ok "plugin variable points at $plugin" || bad "no plugin at $plugin"
[ -e "$plugindir/libuct_tm.so.0" ] && ok "libuct_tm.so.0 (the name UCX's loader builds) installed" ||
    bad "libuct_tm.so.0 missing in $plugindir"
# The components, which the module loads once the UCX release checks out: under
# no name UCX 1.22's loader would take for a module (lib<framework>_<name>.so.0).
[ -e "$plugindir/libuct_tm_component.so" ] && ok "libuct_tm_component.so installed next to it" ||
    bad "libuct_tm_component.so missing in $plugindir"
ls "$plugindir" | grep -qE '^libuct_tm_(component|ib)\.so\.' &&
    bad "a component library has a versioned name UCX's loader could match" ||
    ok "no libuct_tm_component.so.* nor libuct_tm_ib.so.* (UCX does not load them by itself)"
ib_lib=$plugindir/libuct_tm_ib.so
[ -e "$ib_lib" ] && has_ib=yes || has_ib=no
echo "ok: libuct_tm_ib.so installed: $has_ib"

# rdma-core in the IB library only. ldd resolves what each would load: the
# module and the core component must need neither libibverbs nor libmlx5.
for lib in "$plugindir/libuct_tm.so.0" "$plugindir/libuct_tm_component.so"; do
    [ -e "$lib" ] || continue
    deps=$(LD_LIBRARY_PATH=$plugindir ldd "$lib" 2>&1)
    echo "ldd $(basename "$lib"):"
    sed 's/^/    /' <<<"$deps"
    grep -qE 'libibverbs|libmlx5' <<<"$deps" &&
        bad "$(basename "$lib") needs rdma-core: $(grep -E 'libibverbs|libmlx5' <<<"$deps" | tr -s '\t\n' '  ')" ||
        ok "$(basename "$lib"): no libibverbs, no libmlx5 in ldd"
done
if [ "$has_ib" = yes ]; then
    readelf -d "$ib_lib" | grep -q 'NEEDED.*libibverbs' &&
        ok "libuct_tm_ib.so links libibverbs" || bad "libuct_tm_ib.so does not link libibverbs"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/list.c" <<'SRC'
#include <uct/api/uct.h>
#include <stdio.h>
int main(void) {
    uct_component_h *components;
    unsigned count;
    if (uct_query_components(&components, &count) != UCS_OK) return 2;
    for (unsigned i = 0; i < count; ++i) {
        uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
        if (uct_component_query(components[i], &attr) == UCS_OK) printf("%s\n", attr.name);
    }
    uct_release_component_list(components);
    return 0;
}
SRC
# What a host without rdma-core sees: libibverbs and libmlx5 hidden from one process (/dev/null
# mounted over each file they resolve to, in a private mount namespace), the same program lists
# component tm, not tm_ib, and prints nothing else; at UCX_LOG_LEVEL=diag the plugin says why
# tm_rc is not there. Skipped where the system permits no mount namespace.
without_rdma() { # program, its listing with rdma-core
    local program=$1 listing=$2 hide="" f out
    for f in /usr/lib*/libibverbs.so.1 /usr/lib*/*/libibverbs.so.1 /usr/lib*/libmlx5.so.1 \
             /usr/lib*/*/libmlx5.so.1; do
        [ -e "$f" ] && hide+=" $(readlink -f "$f")"
    done
    if [ -z "$hide" ]; then
        ok "no rdma-core on this host: the listing above is already without it"
        return
    fi
    if ! unshare -m --propagation private true 2>/dev/null; then
        echo "ok: SKIP hiding rdma-core: no mount namespace here (unshare -m)"
        return
    fi
    # shellcheck disable=SC2016 # expanded by the inner shell
    local run='for f in $HIDE; do mount --bind /dev/null "$f" || exit 99; done; exec "$@"'
    out=$(HIDE=$hide LD_LIBRARY_PATH=$plugindir unshare -m --propagation private sh -c "$run" sh "$program" 2>&1)
    local rc=$?
    if [ $rc -eq 99 ]; then
        echo "ok: SKIP hiding rdma-core: cannot mount over$hide"
        return
    fi
    [ $rc -eq 0 ] && grep -qx tm <<<"$out" && ok "rdma-core hidden ($hide ): component tm listed" ||
        bad "rdma-core hidden: component tm not listed (exit $rc): $out"
    grep -qx tm_ib <<<"$out" && bad "rdma-core hidden, yet component tm_ib listed" ||
        ok "rdma-core hidden: no component tm_ib"
    # (UCX's own ib and rdmacm components go too: fewer lines, none new)
    local extra
    extra=$(comm -13 <(sort <<<"$listing") <(sort <<<"$out"))
    [ -z "$extra" ] && ok "rdma-core hidden: nothing logged at UCX's default level (components: $(tr '\n' ' ' <<<"$out"))" ||
        bad "rdma-core hidden: extra output: $extra"
    if [ "$has_ib" = yes ]; then
        out=$(HIDE=$hide UCX_LOG_LEVEL=diag LD_LIBRARY_PATH=$plugindir \
            unshare -m --propagation private sh -c "$run" sh "$program" 2>&1)
        grep -q 'uct-tm: tm_rc and tm_dc not loaded' <<<"$out" &&
            ok "rdma-core hidden, UCX_LOG_LEVEL=diag: $(grep -o 'uct-tm: tm_rc.*' <<<"$out" | head -1)" ||
            bad "rdma-core hidden, UCX_LOG_LEVEL=diag: no word on libuct_tm_ib.so: $out"
    fi
}

libs=$(pkg --libs uct-tm)
# shellcheck disable=SC2086
if cc -o "$tmp/with" "$tmp/list.c" $(pkg-config --cflags ucx-uct) $libs $(pkg-config --libs ucx-uct) &&
   cc -o "$tmp/without" "$tmp/list.c" $(pkg-config --cflags --libs ucx-uct); then
    with=$(LD_LIBRARY_PATH=$plugindir "$tmp/with")
    without=$("$tmp/without")
    grep -qx tm <<<"$with" && ok "linked with \`pkg-config --libs uct-tm\`: component tm listed" ||
        bad "component tm not listed by a program linked with: $libs"
    grep -qx tm <<<"$without" && bad "component tm listed without the plugin" ||
        ok "without the plugin: no component tm"
    # The verbs MDs are a component of their own, in libuct_tm_ib.so (rdma-core) only.
    if [ "$has_ib" = yes ]; then
        grep -qx tm_ib <<<"$with" && ok "libuct_tm_ib.so installed: component tm_ib listed" ||
            bad "libuct_tm_ib.so installed, yet component tm_ib is not listed"
    else
        grep -qx tm_ib <<<"$with" && bad "no libuct_tm_ib.so, yet component tm_ib is listed" ||
            ok "no libuct_tm_ib.so: no component tm_ib"
    fi
    without_rdma "$tmp/with" "$with"
else
    bad "could not build against uct-tm.pc (Libs: $libs)"
fi
exit $fail
