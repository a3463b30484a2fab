#!/usr/bin/env bash
# tm_rc over real verbs: boots a QEMU guest with a Soft-RoCE device (rxe0,
# contrib/rxe_qemu.sh) and runs there, from this build tree:
#   1. ucx_info with the plugin: MD tm_rxe0 of component tm_ib, transport
#      tm_rc on device tm_rxe0:1; the ABI checks (test_ucx_abi) with a verbs
#      MD present (each component lists its own MDs and transports only);
#   2. the UCT tag conformance suite over tm_rc and over tm_dc (its
#      endpoints connected on demand by iface address; software matching:
#      rxe has no tag matching), tm_dc's provider selection with it
#      (DcProviderTest: on-demand RC, as rxe is no mlx5 device, and why);
#   3. the same suite with the receive side on the device model of a NIC's
#      tag matcher (UCX_TM_RC_TM_MODEL=y): events in a fixed order, then in a
#      random order from a seed printed in the log (RXE_MODEL_SEED to replay);
#      in all three runs TagFaultTest injects a failed rendezvous READ
#      (UCX_TM_RC_FAIL_READ) and a READ the device rejects (UCX_TM_RC_CORRUPT_RKEY)
#      and checks that the connection fails both ways; PeerDeathTest destroys
#      the receiver while a rendezvous send waits for its FIN (the keepalive
#      probe fails the sender) and checks uct_ep_check on a live and a dead peer;
#   4. tm_perftest between two processes over tm_rc, every payload byte
#      verified (eager short/bcopy/zcopy, rendezvous; posted and unexpected),
#      with software matching and with the model (whose counters must show
#      hardware matches and no anomaly);
#   5. tm_mesh: 16 processes each sending to all the others, over tm_rc and
#      over tm_dc with a pool of 4 initiator queue pairs (connections evicted
#      for nearly every message): every message once and intact, and the
#      counters show evictions.
# Exits 77 (SKIP) with the reason when QEMU cannot run here, or RXE_TESTS=no.
set -uo pipefail
[[ ${RXE_TESTS:-yes} != no ]] || { echo "SKIP: RXE_TESTS=no"; exit 77; }
top_srcdir=$(cd "${srcdir:-$(dirname "$0")}/../.." && pwd)
builddir=${abs_top_builddir:-$(pwd)/../..}
plugin=${PLUGIN:-$builddir/uct_tm/.libs/libuct_tm.so}
for f in "$plugin" "$builddir/tests/uct/test_tag_conformance" "$builddir/tests/uct/test_ucx_abi" \
         "$builddir/src/tools/tm_perftest" "$builddir/src/tools/tm_mesh"; do
    [[ -e $f ]] || { echo "test_rxe: $f is missing (build first)"; exit 1; }
done

seed=${RXE_MODEL_SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}
cd "$builddir/tests/uct" || exit 1
exec "$top_srcdir/contrib/rxe_qemu.sh" /bin/sh -c '
plugin=$1; perftest=$2; seed=$3; mesh=$4
echo "== $(ucx_info -v | head -1) ($(command -v ucx_info))"
echo "== devices"
ibv_devices
devices=$(LD_PRELOAD=$plugin ucx_info -d)
if ! printf "%s\n" "$devices" | grep -A1 "Memory domain: tm_rxe0\$" | grep -q "Component: tm_ib\$"; then
    echo "FAIL: ucx_info does not list MD tm_rxe0 of component tm_ib"; exit 1
fi
echo "PASS: ucx_info lists MD tm_rxe0 of component tm_ib"
if ! printf "%s\n" "$devices" | grep -A1 "Transport: tm_rc" | grep -q "Device: tm_rxe0:1"; then
    echo "FAIL: ucx_info does not list tm_rc on tm_rxe0:1"; exit 1
fi
echo "PASS: ucx_info lists tm_rc on tm_rxe0:1"
if ! printf "%s\n" "$devices" | grep -A1 "Transport: tm_dc" | grep -q "Device: tm_rxe0:1"; then
    echo "FAIL: ucx_info does not list tm_dc on tm_rxe0:1"; exit 1
fi
echo "PASS: ucx_info lists tm_dc on tm_rxe0:1"
echo "== ABI checks with a verbs MD"
./test_ucx_abi --gtest_color=no > /tmp/abi.log 2>&1 || { tail -40 /tmp/abi.log; echo "FAIL: test_ucx_abi"; exit 1; }
grep -E "^\[ +(PASSED|SKIPPED) +\]" /tmp/abi.log
# suite TL MODE: the conformance suite over transport TL (tm_rc, tm_dc)
suite() {
    echo "== conformance suite over $1: $2"
    ./test_tag_conformance --gtest_filter="*$1*" --gtest_color=no > /tmp/conformance.log 2>&1
    rc=$?
    grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|tests from .* ran" /tmp/conformance.log
    n=$(sed -n "s/^\[==========\] \([0-9]*\) tests.*ran.*/\1/p" /tmp/conformance.log)
    if [ "${n:-0}" -eq 0 ]; then echo "FAIL: no $1 conformance test ran"; tail -30 /tmp/conformance.log; exit 1; fi
    [ $rc -eq 0 ] || { tail -60 /tmp/conformance.log; echo "FAIL: conformance over $1, $2"; exit 1; }
}
for tl in tm_rc tm_dc; do
    prefix=UCX_$(echo $tl | tr a-z A-Z)_
    suite $tl "software matching"
    (export "${prefix}TM_MODEL=y"; suite $tl "tag matching model, fixed order") || exit 1
    (export "${prefix}TM_MODEL=y" "${prefix}TM_MODEL_SEED=$seed"
     suite $tl "tag matching model, random order, ${prefix}TM_MODEL_SEED=$seed") || exit 1
done
echo "== two processes: tm_perftest -x tm_rc --check"
LD_PRELOAD=$plugin timeout 300 $perftest -x tm_rc -t tag_lat -s 8,4k,64k,1m -n 50 --check || exit 1
LD_PRELOAD=$plugin timeout 300 $perftest -x tm_rc -t tag_lat -s 8,4k,1m -n 50 -U --check || exit 1
echo "PASS: tm_perftest over tm_rc"
echo "== two processes: tm_perftest -x tm_dc --check (connected on demand by iface address)"
LD_PRELOAD=$plugin timeout 300 $perftest -x tm_dc -t tag_lat -s 8,4k,64k,1m -n 50 --check || exit 1
LD_PRELOAD=$plugin timeout 300 $perftest -x tm_dc -t tag_bw -s 8,64k -n 200 -w 32 -U --check || exit 1
echo "PASS: tm_perftest over tm_dc"
echo "== 16 processes, each sending to all the others: tm_mesh"
LD_PRELOAD=$plugin timeout 300 $mesh -x tm_rc -n 16 -m 4 > /tmp/mesh.log
rc=$?; head -2 /tmp/mesh.log; tail -1 /tmp/mesh.log
[ $rc -eq 0 ] || { cat /tmp/mesh.log; echo "FAIL: tm_mesh over tm_rc"; exit 1; }
UCX_TM_DC_QP_POOL_SIZE=4 LD_PRELOAD=$plugin timeout 300 $mesh -x tm_dc -n 16 -m 4 > /tmp/mesh.log
rc=$?; head -3 /tmp/mesh.log; tail -1 /tmp/mesh.log
[ $rc -eq 0 ] || { cat /tmp/mesh.log; echo "FAIL: tm_mesh over tm_dc"; exit 1; }
evictions=$(awk "\$1 == \"median\" { print \$6 }" /tmp/mesh.log)
[ "${evictions:-0}" -gt 0 ] || { echo "FAIL: tm_mesh over tm_dc evicted no connection"; exit 1; }
echo "PASS: tm_mesh over tm_rc and tm_dc (median evictions per process: $evictions)"
echo "== two processes: tm_perftest -x tm_rc --check, tag matching model (random order, seed $seed)"
export UCX_TM_RC_TM_MODEL=y UCX_TM_RC_TM_MODEL_SEED=$seed UCX_TM_RC_PRINT_STATS=y
LD_PRELOAD=$plugin timeout 300 $perftest -x tm_rc -t tag_lat -s 8,4k,64k,1m -n 50 --check 2> /tmp/stats.log || { cat /tmp/stats.log; exit 1; }
LD_PRELOAD=$plugin timeout 300 $perftest -x tm_rc -t tag_lat -s 8,4k,1m -n 50 -U --check 2>> /tmp/stats.log || { cat /tmp/stats.log; exit 1; }
grep "tag matching model" /tmp/stats.log
grep -q "hw_matches [1-9]" /tmp/stats.log || { echo "FAIL: the model matched nothing"; exit 1; }
if grep "tag matching model" /tmp/stats.log | grep -Eq "anomalies [1-9]|violations [1-9]"; then
    echo "FAIL: the tag list driver saw anomalies or the model violations"; exit 1
fi
echo "PASS: tm_perftest over tm_rc with the tag matching model"
' test_rxe "$plugin" "$builddir/src/tools/tm_perftest" "$seed" "$builddir/src/tools/tm_mesh"
