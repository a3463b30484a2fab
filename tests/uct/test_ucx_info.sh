#!/usr/bin/env bash
# Stock UCX tools see the plugin: `LD_PRELOAD=<plugin> ucx_info -d` lists
# component "tm" with MD "tm" and transport tm_sm, every verbs MD "tm_<device>"
# under component "tm_ib" (when there is a verbs device: without one that
# component has no MD to list), and `ucx_info -c -f` lists the UCX_TM_SM_*
# variables with their defaults. On UCX >= 1.22, which loads external
# modules, so does `UCX_PLUGIN_PATH=<plugin's directory> ucx_info -d` without
# any preload.
# PLUGIN: the library to preload (default: the one just built; CI also runs
# this against a `make install` copy).
set -u
plugin=${PLUGIN:?set PLUGIN to the libuct_tm.so to preload}
if ! command -v ucx_info >/dev/null; then
    echo "SKIP: ucx_info not installed (apt-get install ucx-utils)"
    exit 77
fi
[ -e "$plugin" ] || { echo "FAIL: plugin $plugin not found"; exit 1; }
fail=0
expect() { # what, pattern, text
    if grep -qE "$2" <<<"$3"; then
        echo "ok: $1"
    else
        echo "FAIL: $1 (no line matching '$2')"
        fail=1
    fi
}
devices=$(LD_PRELOAD=$plugin ucx_info -d 2>&1)
expect "ucx_info -d lists memory domain tm" '^# Memory domain: tm$' "$devices"
expect "ucx_info -d lists component tm" '^#     Component: tm$' "$devices"
# "<MD> <component>", one line per MD listed.
md_components=$(awk '/^# Memory domain:/ { md = $4 } /^#     Component:/ { print md, $3 }' <<<"$devices")
expect "memory domain tm is component tm's" '^tm tm$' "$md_components"
if grep -E '^tm_' <<<"$md_components" | grep -vqE '^tm_[^ ]+ tm_ib$'; then
    echo "FAIL: a verbs MD outside component tm_ib: $(grep -E '^tm_' <<<"$md_components" | tr '\n' ' ')"
    fail=1
fi
if [ "${TM_VERBS:-}" = yes ] && [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
    expect "ucx_info -d lists the verbs MDs under component tm_ib" '^tm_[^ ]+ tm_ib$' "$md_components"
else
    echo "ok: no verbs device or no rdma-core: component tm_ib lists no MD"
fi
expect "ucx_info -d lists transport tm_sm" '^#      Transport: tm_sm$' "$devices"
expect "ucx_info -d lists device tm_shm" '^#         Device: tm_shm$' "$devices"
expect "tm_sm reports peer-failure handling" 'error handling: .*peer failure' "$devices"
config=$(LD_PRELOAD=$plugin ucx_info -c -f 2>&1)
for var in FIFO_SIZE FIFO_ELEM_SIZE SEG_SIZE TAG_LIST_SIZE RNDV_SLOTS RNDV_SPLIT MAX_PEERS NUMA_BIND; do
    expect "ucx_info -c -f shows UCX_TM_SM_$var" "^UCX_TM_SM_$var=" "$config"
done
expect "FIFO_SIZE default is 64" '^UCX_TM_SM_FIFO_SIZE=64$' "$config"
# Loading the components, libuct_tm_ib.so included, is silent at UCX's default level.
if grep -q 'uct-tm' <<<"$devices"; then
    echo "FAIL: ucx_info -d: uct-tm said: $(grep 'uct-tm' <<<"$devices")"
    fail=1
else
    echo "ok: ucx_info -d: nothing from uct-tm (its libraries loaded without error)"
fi
# The verbs transports are in the plugin exactly when the build had rdma-core:
# libuct_tm_ib.so, next to the plugin, loaded by it (their UCX_TM_RC_* and
# UCX_TM_DC_* tables are registered with or without an RDMA device).
case ${TM_VERBS:-} in
yes)
    [ -e "$(dirname "$plugin")/libuct_tm_ib.so" ] && echo "ok: libuct_tm_ib.so next to the plugin" ||
        { echo "FAIL: built with rdma-core, no libuct_tm_ib.so next to $plugin"; fail=1; }
    expect "built with rdma-core: libuct_tm_ib.so loaded, UCX_TM_RC_* listed" '^UCX_TM_RC_TIMEOUT=' "$config"
    expect "built with rdma-core: UCX_TM_DC_* listed" '^UCX_TM_DC_TIMEOUT=' "$config"
    ;;
no)
    if grep -q '^UCX_TM_RC_' <<<"$config"; then
        echo "FAIL: built without rdma-core, yet UCX_TM_RC_* variables are listed"
        fail=1
    else
        echo "ok: built without rdma-core: no tm_rc in the plugin"
    fi
    ;;
esac
. "$(dirname "$0")/../common/ucx_release.sh"
running=$(ucx_release)
if ucx_release_at_least 1 22; then
    # UCX loads lib<framework>_<name>.so.0 from each UCX_PLUGIN_PATH directory.
    dir=$(dirname "$plugin")
    [ -e "$dir/libuct_tm.so.0" ] || { echo "FAIL: no libuct_tm.so.0 next to $plugin"; exit 1; }
    devices=$(UCX_PLUGIN_PATH=$dir ucx_info -d 2>&1)
    expect "UCX $running: UCX_PLUGIN_PATH=$dir lists component tm, no preload" '^#     Component: tm$' "$devices"
    expect "UCX $running: UCX_PLUGIN_PATH lists transport tm_sm" '^#      Transport: tm_sm$' "$devices"
    grep -q 'uct-tm' <<<"$devices" && { echo "FAIL: uct-tm warned: $(grep uct-tm <<<"$devices")"; fail=1; }
else
    echo "ok: UCX $running loads no external modules: preload only"
fi
without=$(ucx_info -d 2>&1)
if grep -q 'Transport: tm_sm' <<<"$without"; then
    echo "FAIL: tm_sm listed without the plugin loaded"
    fail=1
else
    echo "ok: not listed without the plugin (the check above is not vacuous)"
fi
exit $fail
