#!/usr/bin/env bash
# ucp_tag_test (two processes, UCP tag API) over tm_sm: UCX_TLS=tm_sm and tm_sm,self, and
# UCP's software rendezvous over tag offload (UCX_TM_SW_RNDV=y). ucp_tag_test itself
# asserts payloads and statuses and, from tm_sm's counters, that receives were posted
# into tm_sm. PLUGIN: the libuct_tm.so to load (preloaded before UCX 1.22, through
# UCX_PLUGIN_PATH from 1.22).
set -u
plugin=${PLUGIN:?set PLUGIN to the libuct_tm.so to preload}
[ -e "$plugin" ] || { echo "FAIL: plugin $plugin not found"; exit 1; }
here=$(dirname "$0")
. "$here/../common/ucx_release.sh"
loading=$(plugin_loading "$plugin")
echo "loading the plugin with $loading (UCX $(ucx_release))"
fail=0
run() { # description, env...
    local what=$1 rc
    shift
    echo "== $what"
    env "$@" "$loading" timeout 300 ./ucp_tag_test 2>&1 | grep -v '^tm_sm iface'
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 77 ] && exit 77
    [ "$rc" -eq 0 ] || { echo "FAIL: $what (exit $rc)"; fail=1; }
}
[ -x ./ucp_tag_test ] || cd "$here"
run "UCX_TLS=tm_sm" UCX_TLS=tm_sm
run "UCX_TLS=tm_sm,self" UCX_TLS=tm_sm,self
# UCP 1.13.1 trips its own assertion (rndv.c) when it GETs a software rendezvous into a
# receive it had posted to the transport; the PUT scheme avoids it (docs/using-with-ucx.md).
run "UCX_TM_SW_RNDV=y (PUT scheme)" UCX_TLS=tm_sm UCX_TM_SW_RNDV=y UCX_RNDV_SCHEME=put_zcopy
exit $fail
