#!/usr/bin/env bash
# The protocol layer (src/proto) over tm_rc and tm_dc on real verbs: boots
# the QEMU guest with a Soft-RoCE device (contrib/rxe_qemu.sh, as
# test_rxe.sh) and runs there, from this build tree, in the three matching
# modes of the verbs ifaces (software matching; TM_MODEL=y, the device model
# of a NIC's tag matcher, events in a fixed order; the model in a random
# order from a seed printed in the log, RXE_MODEL_SEED to replay):
#   1. tests/proto/test_proto_api's transport suites over tm_rc (endpoints
#      wired up endpoint to endpoint) and over tm_dc (the layer connects to
#      iface addresses; connections made on demand): the ordering model
#      test and the tag list filling mid-stream with every tag list held to
#      3 entries, and (software matching, fixed order) the peer-failure
#      suite (a forked peer killed while sends and directed receives wait on
#      it: the transport's probe, through the layer's keepalive, must find it);
#   2. tests/proto/test_proto_stress: 3 processes of random traffic, over
#      each (with buffered receives too, in software matching); over tm_dc
#      also with a pool of one initiator queue pair
#      (UCX_TM_DC_NUM_DCI=1, the old name of QP_POOL_SIZE, still read: a
#      connection closed and made for nearly every message, rendezvous
#      included; the counters must show evictions);
#   with the model, its counters must show hardware matches and no anomaly
#   or violation.
#   3. tests/fabric/test_fabric (the libfabric provider through libfabric's
#      API) over the provider's domain tm_dc, in software matching and with
#      the model in fixed order.
# Once, in software matching: the same suites with offload off ("tm_rc+sw":
# data over AM on RC), test_proto_alloc over it, and tm_proto_perf between two
# processes over tm_rc and over tm_dc, every byte checked.
# Exits 77 (SKIP) with the reason when QEMU cannot run here, or RXE_TESTS=no.
set -uo pipefail
[[ ${RXE_TESTS:-yes} != no ]] || { echo "SKIP: RXE_TESTS=no"; exit 77; }
top_srcdir=$(cd "${srcdir:-$(dirname "$0")}/../.." && pwd)
builddir=${abs_top_builddir:-$(pwd)/../..}
for f in "$builddir/tests/proto/test_proto_api" "$builddir/tests/proto/test_proto_stress" \
         "$builddir/tests/proto/test_proto_alloc" "$builddir/src/tools/tm_proto_perf"; do
    [[ -e $f ]] || { echo "test_rxe_proto: $f is missing (build first)"; exit 1; }
done

seed=${RXE_MODEL_SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}
cd "$builddir/tests/proto" || exit 1
# shellcheck disable=SC2016 # the script below is expanded by the guest's shell
exec "$top_srcdir/contrib/rxe_qemu.sh" /bin/sh -c '
perf=$1; seed=$2; fab=$3
t0=$(date +%s)
# heading TEXT: a section title with the guest seconds so far (where the minutes go)
heading() { echo "== $* [$(($(date +%s) - t0))s]"; }
# runs gtest program $1 over transports $2 (UCT_TM_PROTO_TEST_TRANSPORTS), $3 names the mode
run() {
    prog=$1; tls=$2; what=$3; shift 3
    heading "$prog over $tls: $what"
    UCT_TM_PROTO_TEST_TRANSPORTS=$tls UCX_TM_RC_PRINT_STATS=y UCX_TM_DC_PRINT_STATS=y \
        timeout 600 ./$prog --gtest_color=no "$@" \
        > /tmp/proto.log 2>&1
    rc=$?
    grep -E "^\[ +(FAILED|PASSED|SKIPPED) +\]|Failure|tests from .* ran" /tmp/proto.log
    n=$(sed -n "s/^\[==========\] \([0-9]*\) tests* from.*ran.*/\1/p" /tmp/proto.log)
    if [ "${n:-0}" -eq 0 ]; then tail -30 /tmp/proto.log; echo "FAIL: no test of $prog ran"; exit 1; fi
    [ $rc -eq 0 ] || { tail -80 /tmp/proto.log; echo "FAIL: $prog over $tls, $what"; exit 1; }
    if grep "tag matching model" /tmp/proto.log | grep -Eq "anomalies [1-9]|violations [1-9]"; then
        grep "tag matching model" /tmp/proto.log | grep -E "anomalies [1-9]|violations [1-9]" | head -5
        echo "FAIL: the tag list driver saw anomalies or the model violations"; exit 1
    fi
    case $what in
    *model*)
        hw=$(sed -n "s/.*tag matching model.* hw_matches \([0-9]*\).*/\1/p" /tmp/proto.log |
             awk "{ n += \$1 } END { print n + 0 }")
        echo "the model matched $hw messages"
        # the API suites post to the list by design (ProtoOrdering checks it);
        # the stress test keeps source-filtered receives posted, which keep
        # later ones in software, so its count may be 0
        if [ "$prog" = test_proto_api ] && [ "$hw" -eq 0 ]; then
            echo "FAIL: the model matched nothing"; exit 1
        fi ;;
    esac
    echo "PASS: $prog over $tls, $what"
}
# the suites of the libfabric provider (tests/fabric) over its domain tm_dc, $1 names the mode
fabric() {
    [ -x ../fabric/test_fabric ] && [ -e "$fab/libtm-fi.so" ] ||
        { echo "not run: test_fabric over tm_dc (the provider is not built)"; return 0; }
    heading "test_fabric over tm_dc: $1"
    (cd ../fabric && TEST_FABRIC_DOMAIN=tm_dc FI_PROVIDER_PATH=$fab UCX_TM_DC_PRINT_STATS=y \
        timeout 900 ./test_fabric --gtest_color=no --gtest_filter="$fabric_tests") > /tmp/fabric.log 2>&1
    rc=$?
    grep -E "^\[ +(FAILED|PASSED|SKIPPED) +\]|Failure|tests from .* ran" /tmp/fabric.log
    [ $rc -eq 0 ] || { tail -60 /tmp/fabric.log; echo "FAIL: test_fabric over tm_dc, $1"; exit 1; }
    case $1 in
    *model*)
        if grep "tag matching model" /tmp/fabric.log | grep -Eq "anomalies [1-9]|violations [1-9]"; then
            echo "FAIL: the tag list driver saw anomalies or the model violations"; exit 1
        fi
        hw=$(sed -n "s/.*tag matching model.* hw_matches \([0-9]*\).*/\1/p" /tmp/fabric.log |
             awk "{ n += \$1 } END { print n + 0 }")
        echo "the model matched $hw messages"
        [ "$hw" -gt 0 ] || { echo "FAIL: the model matched nothing under the provider"; exit 1; } ;;
    esac
    echo "PASS: test_fabric over tm_dc, $1"
}
# every call, completion format and error path (a peer killed: env/); one
# CQ format and AV type of the data suite (the host runs all eight)
fabric_tests="formats/FabricPair.*/7:FabricErrors.*:FabricMultiRecv.*:FabricTrio.*:FabricCntr.*:FabricAv.*:env/FabricPeerDeath.*"
# the suites parameterized on the transport (ProtoWire.* runs its own, on the host)
api="--gtest_filter=transports/*:peer_failure/*"
# the stress with buffered receives in software matching only (the guest is slow)
stress="--gtest_filter=*RandomTrafficEveryMessageOnce*"
mode() {
    for tl in tm_rc tm_dc; do
        run test_proto_api $tl "$1" "$api"
        run test_proto_stress $tl "$1" "$stress"
    done
    (export UCX_TM_DC_NUM_DCI=1
     run test_proto_stress tm_dc "$1, UCX_TM_DC_NUM_DCI=1" "$stress"
     if ! grep -q "evictions [1-9]" /tmp/proto.log; then
         grep "evictions" /tmp/proto.log; echo "FAIL: no connection was evicted"; exit 1
     fi) || exit 1
}
mode "software matching"
fabric "software matching"
for tl in tm_rc tm_dc; do
    run test_proto_stress $tl "software matching, buffered receives" "--gtest_filter=*Buffered*"
done
run test_proto_api tm_rc+sw "software matching, offload off" "$api"
run test_proto_alloc tm_rc+sw "software matching, offload off"
# a send queue of 8: a vectored rendezvous written in 40 pieces is refused
# midway, and the data go by push once the pieces started are done
(export UCX_TM_RC_TX_QUEUE_LEN=8
 run test_proto_api tm_rc "software matching, UCX_TM_RC_TX_QUEUE_LEN=8" \
     "--gtest_filter=transports/ProtoIov.*") || exit 1
heading "two processes: tm_proto_perf -x tm_rc --check"
timeout 300 $perf -x tm_rc -t tag_lat -s 8,4k,64k,1m -n 50 --check || { echo "FAIL: tm_proto_perf"; exit 1; }
timeout 300 $perf -x tm_rc -t tag_bw -s 8,64k -n 200 -w 16 --check -u || { echo "FAIL: tm_proto_perf -u"; exit 1; }
echo "PASS: tm_proto_perf over tm_rc"
timeout 300 $perf -x tm_dc -t tag_lat -s 8,4k,64k,1m -n 50 --check || { echo "FAIL: tm_proto_perf -x tm_dc"; exit 1; }
timeout 300 $perf -x tm_dc -t tag_bw -s 8,64k -n 200 -w 16 --check -u || { echo "FAIL: tm_proto_perf -x tm_dc -u"; exit 1; }
echo "PASS: tm_proto_perf over tm_dc"
export UCX_TM_RC_TM_MODEL=y UCX_TM_DC_TM_MODEL=y
mode "tag matching model, fixed order"
fabric "tag matching model, fixed order"
export UCX_TM_RC_TM_MODEL_SEED=$seed UCX_TM_DC_TM_MODEL_SEED=$seed
# (the peer-failure suite, 8-10 s a run for the keepalive to find the dead
# peer, ran in the two modes above: the order of the model events is not
# what it tests)
api="--gtest_filter=transports/*"
mode "tag matching model, random order, TM_MODEL_SEED=$seed"
' test_rxe_proto "$builddir/src/tools/tm_proto_perf" "$seed" "$builddir/src/fabric/.libs"
