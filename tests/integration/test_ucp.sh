#!/usr/bin/env bash
# ucp_tag_test (two processes, UCP tag API, contiguous, iov and generic datatypes) over
# tm_sm: UCX_TLS=tm_sm and tm_sm,self, and every UCP setting that changes the path a
# message takes (software rendezvous with GET and PUT, thresholds at 0, eager only,
# offload off, UCP's first protocol engine from 1.16). ucp_tag_test itself asserts
# payloads, gaps and statuses and, from tm_sm's counters, that receives were posted
# into tm_sm. PLUGIN: the libuct_tm.so to load (preloaded before UCX 1.22, through
# UCX_PLUGIN_PATH from 1.22).
set -u
[ "${INTEGRATION_TESTS:-yes}" != no ] || { echo "SKIP: INTEGRATION_TESTS=no"; exit 77; }
plugin=${PLUGIN:?set PLUGIN to the libuct_tm.so to preload}
[ -e "$plugin" ] || { echo "FAIL: plugin $plugin not found"; exit 1; }
here=$(dirname "$0")
. "$here/../common/ucx_release.sh"
loading=$(plugin_loading "$plugin")
echo "loading the plugin with $loading (UCX $(ucx_release))"
fail=0
run() { # description, env...   (test_args: ucp_tag_test's arguments)
    local what=$1 rc
    shift
    echo "== $what"
    env "$@" "$loading" timeout 300 ./ucp_tag_test ${test_args:-} 2>&1 | grep -v '^tm_sm iface'
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 77 ] && exit 77
    [ "$rc" -eq 0 ] || { echo "FAIL: $what (exit $rc)"; fail=1; }
}
[ -x ./ucp_tag_test ] || cd "$here"
# ucp_tag_test expects its receives from 2 KiB on posted to tm_sm: UCP posts from
# max(UCX_TM_THRESH, min_recv), and tm_sm reports SEG_SIZE + 1 unless RECV_MIN=0.
export UCX_TM_SM_RECV_MIN=0
run "UCX_TLS=tm_sm" UCX_TLS=tm_sm
run "UCX_TLS=tm_sm,self" UCX_TLS=tm_sm,self
# Every setting that changes the path a message takes (docs/using-with-ucx.md, "What UCP
# does over tm_sm"): UCP's software rendezvous with a GET from rndv_cb (the default
# scheme) and with a PUT; every receive posted and every message a rendezvous; offload off.
run "UCX_TM_SW_RNDV=y" UCX_TLS=tm_sm UCX_TM_SW_RNDV=y
run "UCX_TM_SW_RNDV=y, PUT scheme" UCX_TLS=tm_sm UCX_TM_SW_RNDV=y UCX_RNDV_SCHEME=put_zcopy
run "every receive posted, every message a rendezvous, software RTS" UCX_TLS=tm_sm \
    UCX_RNDV_THRESH=0 UCX_TM_THRESH=0 UCX_TM_SW_RNDV=y
run "every receive posted, every message a rendezvous" UCX_TLS=tm_sm UCX_RNDV_THRESH=0 \
    UCX_TM_THRESH=0
run "eager only" UCX_TLS=tm_sm UCX_RNDV_THRESH=inf
test_args=--offload-off run "tag offload off" UCX_TLS=tm_sm UCX_TM_THRESH=inf
# tm_sm's default: receives up to one descriptor (8 KiB) matched by UCP, larger ones by tm_sm
test_args=--no-offload-check run "RECV_MIN=auto" UCX_TLS=tm_sm UCX_TM_SM_RECV_MIN=auto
if ucx_release_at_least 1 16; then
    # UCP's first protocol engine, which users can still select
    run "UCX_PROTO_ENABLE=n" UCX_TLS=tm_sm UCX_PROTO_ENABLE=n
    run "UCX_PROTO_ENABLE=n, UCX_TM_SW_RNDV=y" UCX_TLS=tm_sm UCX_PROTO_ENABLE=n UCX_TM_SW_RNDV=y
fi
exit $fail
