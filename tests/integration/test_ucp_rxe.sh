#!/usr/bin/env bash
# UCP over tm_rc on real verbs: boots the QEMU guest with a Soft-RoCE device
# (contrib/rxe_qemu.sh) and runs the UCP integration program (two processes,
# UCP's tag API with contiguous, iov and generic datatypes, eager and
# rendezvous, posted, unexpected, probed, cancelled, truncated) with
# UCX_TLS=tm_rc,tcp,self: tag matching offloaded to tm_rc, with software
# matching and with the device model of a NIC's tag matcher.
#
# The endpoints connect through UCP's connection manager from a socket address
# (UCP_TAG_TEST_SOCKADDR, TCP's CM): UCP wires a transport that connects
# endpoint to endpoint up over an auxiliary transport only if that one is UD,
# and UD over Soft-RoCE on the guest's loopback device delivers nothing (nor
# for UCX's own rc_verbs); docs/tm_rc.md. Checked besides the program's own
# assertions: UCP chose tm_rc for the tag lane (its ep_cfg log line), tm_rc's
# counters show receives UCP posted into its tag list, and with the model that
# the model matched messages and saw no anomaly.
# Exits 77 (SKIP) when QEMU cannot run here, or RXE_TESTS=no.
# Run from the build's tests/integration (make check), where ucp_tag_test is built.
set -uo pipefail
[[ ${RXE_TESTS:-yes} != no ]] || { echo "SKIP: RXE_TESTS=no"; exit 77; }
top_srcdir=$(cd "${srcdir:-$(dirname "$0")}/../.." && pwd)
plugin=${PLUGIN:?set PLUGIN to the libuct_tm.so to preload}
[[ -e $plugin ]] || { echo "test_ucp_rxe: $plugin is missing (build first)"; exit 1; }
[[ -x ./ucp_tag_test ]] || { echo "test_ucp_rxe: ./ucp_tag_test is missing (make check builds it)"; exit 1; }

seed=${RXE_MODEL_SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}
exec "$top_srcdir/contrib/rxe_qemu.sh" /bin/sh -c '
plugin=$1; seed=$2
run() { # what, then VAR=VALUE...
    what=$1; shift
    echo "== ucp_tag_test over tm_rc: $what"
    env "$@" LD_PRELOAD=$plugin UCX_TLS=tm_rc,tcp,self UCP_TAG_TEST_SOCKADDR=127.0.0.1 \
        UCX_LOG_LEVEL=info UCX_TM_RC_PRINT_STATS=y timeout 600 ./ucp_tag_test --no-offload-check \
        > /tmp/ucp.log 2>&1
    rc=$?
    grep -E "^(FAIL|PASS)" /tmp/ucp.log
    [ $rc -eq 0 ] || { grep -v "^\[" /tmp/ucp.log | tail -40; echo "FAIL: ucp_tag_test over tm_rc, $what"; exit 1; }
    grep -q "ep_cfg.*tag(tm_rc/tm_rxe0:1)" /tmp/ucp.log ||
        { grep ep_cfg /tmp/ucp.log; echo "FAIL: UCP did not choose tm_rc for tags"; exit 1; }
}
run "software matching"
posted=$(sed -n "s/^tm_rc .*: posted \([0-9]*\) .*/\1/p" /tmp/ucp.log | sort -n | tail -1)
echo "tm_rc: ${posted:-0} receives posted into its tag list (the most of one process)"
[ "${posted:-0}" -ge 10 ] || { grep "^tm_rc" /tmp/ucp.log; echo "FAIL: UCP posted (almost) no receive into tm_rc"; exit 1; }
echo "PASS: UCP over tm_rc, software matching"
run "tag matching model, random order, UCX_TM_RC_TM_MODEL_SEED=$seed" \
    UCX_TM_RC_TM_MODEL=y UCX_TM_RC_TM_MODEL_SEED=$seed
grep "tag matching model" /tmp/ucp.log
grep "tag matching model" /tmp/ucp.log | grep -q "hw_matches [1-9]" ||
    { echo "FAIL: the model matched nothing"; exit 1; }
if grep "tag matching model" /tmp/ucp.log | grep -Eq "anomalies [1-9]|violations [1-9]"; then
    echo "FAIL: the tag list driver saw anomalies or the model violations"; exit 1
fi
echo "PASS: UCP over tm_rc, tag matching model"

# tm_dc connects by iface address: UCP wires it from worker addresses alone
# (no CM, no auxiliary transport)
echo "== ucp_tag_test over tm_dc: endpoints from worker addresses"
env LD_PRELOAD=$plugin UCX_TLS=tm_dc,self UCX_LOG_LEVEL=info UCX_TM_DC_PRINT_STATS=y \
    timeout 600 ./ucp_tag_test --no-offload-check > /tmp/ucp.log 2>&1
rc=$?
grep -E "^(FAIL|PASS)" /tmp/ucp.log
[ $rc -eq 0 ] || { grep -v "^\[" /tmp/ucp.log | tail -40; echo "FAIL: ucp_tag_test over tm_dc"; exit 1; }
grep -q "ep_cfg.*tag(tm_dc/tm_rxe0:1)" /tmp/ucp.log ||
    { grep ep_cfg /tmp/ucp.log; echo "FAIL: UCP did not choose tm_dc for tags"; exit 1; }
posted=$(sed -n "s/^tm_dc .*: posted \([0-9]*\) .*/\1/p" /tmp/ucp.log | sort -n | tail -1)
echo "tm_dc: ${posted:-0} receives posted into its tag list (the most of one process)"
[ "${posted:-0}" -ge 10 ] || { grep "^tm_dc" /tmp/ucp.log; echo "FAIL: UCP posted (almost) no receive into tm_dc"; exit 1; }
echo "PASS: UCP over tm_dc"

echo "== ucx_perftest over tm_dc (UCP tag API, offloaded)"
port=13401
for t in tag_lat tag_bw tag_sync_lat; do
    port=$((port + 1))
    env LD_PRELOAD=$plugin UCX_TLS=tm_dc,self UCX_TM_DC_PRINT_STATS=y \
        timeout 300 ucx_perftest -p $port -t $t -s 16384 -n 2000 > /tmp/server.log 2>&1 &
    server=$!
    # the client connects once the server listens (it starts slowly on a loaded machine)
    for try in $(seq 60); do
        sleep 1
        env LD_PRELOAD=$plugin UCX_TLS=tm_dc,self UCX_TM_DC_PRINT_STATS=y \
            timeout 300 ucx_perftest 127.0.0.1 -p $port -t $t -s 16384 -n 2000 > /tmp/client.log 2>&1
        crc=$?
        grep -q "Connection refused" /tmp/client.log || break
    done
    wait $server
    src=$?
    [ $crc -eq 0 ] && [ $src -eq 0 ] || {
        echo "-- client (exit $crc):"; tail -n 20 /tmp/client.log
        echo "-- server (exit $src):"; tail -n 20 /tmp/server.log
        echo "FAIL: ucx_perftest $t over tm_dc"; exit 1; }
    grep -i "final" /tmp/client.log | tail -1
    posted=$(cat /tmp/client.log /tmp/server.log | sed -n "s/^tm_dc .*: posted \([0-9]*\) .*/\1/p" |
             sort -n | tail -1)
    echo "ucx_perftest $t: ${posted:-0} receives offloaded to tm_dc (the most of one side)"
    # tag_lat posts each receive before its message comes; in tag_bw most
    # messages come first (unexpected), some receives are posted in time
    least=1
    [ $t = tag_lat ] && least=1000
    [ "${posted:-0}" -ge $least ] || { grep "^tm_dc" /tmp/client.log /tmp/server.log; echo "FAIL: no offload"; exit 1; }
done
echo "PASS: ucx_perftest over tm_dc"
' test_ucp_rxe "$plugin" "$seed"
