#!/usr/bin/env bash
# Checks a `make install DESTDIR=...` tree the way users consume it:
#  - the plugin is in $libdir/ucx under the name UCX's module loader builds
#    (lib<framework>_<name><ext>, ext = libucs's ".so.0": libuct_tm.so.0), and as libuct_tm.so,
#    with the component it loads (libuct_tm_component.so) next to it;
#  - uct-tm.pc names that directory (plugindir, plugin) and its Libs link the plugin so that
#    a program that never calls it still gets component "tm" (--no-as-needed), and
#    component "tm_ib" when the installed component links rdma-core;
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
# The component, which the module loads once the UCX release checks out: under
# no name UCX 1.22's loader would take for a module (lib<framework>_<name>.so.0).
[ -e "$plugindir/libuct_tm_component.so" ] && ok "libuct_tm_component.so installed next to it" ||
    bad "libuct_tm_component.so missing in $plugindir"
ls "$plugindir" | grep -q '^libuct_tm_component\.so\.' &&
    bad "libuct_tm_component.so has a versioned name UCX's loader could match" ||
    ok "no libuct_tm_component.so.* (UCX does not load the component by itself)"

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
    # The verbs MDs are a component of their own, in builds with rdma-core only.
    if readelf -d "$plugindir/libuct_tm_component.so" | grep -q 'NEEDED.*libibverbs'; then
        grep -qx tm_ib <<<"$with" && ok "built with rdma-core: component tm_ib listed" ||
            bad "built with rdma-core, yet component tm_ib is not listed"
    else
        grep -qx tm_ib <<<"$with" && bad "built without rdma-core, yet component tm_ib is listed" ||
            ok "built without rdma-core: no component tm_ib"
    fi
else
    bad "could not build against uct-tm.pc (Libs: $libs)"
fi
exit $fail
