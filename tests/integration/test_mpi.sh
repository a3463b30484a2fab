#!/usr/bin/env bash
# Open MPI's pml ucx over tm_sm: mpi_tag_test with 2 and 4 ranks, and with 2 ranks where every
# receive is posted to tm_sm and every message is UCP's software rendezvous (UCX_RNDV_THRESH=0
# UCX_TM_THRESH=0 UCX_TM_SW_RNDV=y: the setting under which UCP 1.13.1 aborted). Checks rank 0's verdict
# line and, from tm_sm's counters (one line per rank), that tm_sm carried the traffic and
# that UCP posted the deep queue's receives into tm_sm's tag list: all 4096 where the list holds
# them (UCX_TM_SM_TAG_LIST_SIZE=4096), a full list of 1024 by default (4 ranks), the rest kept
# and matched in UCP's software queue.
# PLUGIN: the libuct_tm.so to load (preloaded before UCX 1.22, through UCX_PLUGIN_PATH from
# 1.22); MPIRUN: mpirun (skip when missing). With a UCX outside the system's library path
# (configure --with-ucx), the ranks get its libraries through LD_LIBRARY_PATH: Debian's
# Open MPI then runs with that release's libucp.
set -u
[ "${INTEGRATION_TESTS:-yes}" != no ] || { echo "SKIP: INTEGRATION_TESTS=no"; exit 77; }
plugin=${PLUGIN:?set PLUGIN to the libuct_tm.so to preload}
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null || { echo "SKIP: mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; }
[ -x ./mpi_tag_test ] || { echo "SKIP: mpi_tag_test not built (mpicc missing at configure time)"; exit 77; }
[ -e "$plugin" ] || { echo "FAIL: plugin $plugin not found"; exit 1; }
. "$(dirname "$0")/../common/ucx_release.sh"
loading=$(plugin_loading "$plugin")
echo "loading the plugin with $loading (UCX $(ucx_release))"
fail=0
deep=4096   # DEEP_RECVS in mpi_tag_test.c
default_list=1024   # UCX_TM_SM_TAG_LIST_SIZE's default
runs=("2 UCX_TM_SM_TAG_LIST_SIZE=$deep" "4"
      "2 UCX_TM_SM_TAG_LIST_SIZE=$deep UCX_RNDV_THRESH=0 UCX_TM_THRESH=0 UCX_TM_SW_RNDV=y")
for run in "${runs[@]}"; do
    read -r np settings <<<"$run"
    extra=()
    for v in $settings; do extra+=(-x "$v"); done
    want_posted=$default_list
    [[ $settings == *TAG_LIST_SIZE=$deep* ]] && want_posted=$deep
    # pml ucx only (it selects itself without RDMA devices only with tls/devices "any");
    # btl self only and no osc ucx, so nothing else opens UCX or carries messages.
    out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
          "$mpirun" -np "$np" --oversubscribe \
          --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
          --mca btl self --mca osc '^ucx' \
          -x "$loading" ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH} -x UCX_TLS=tm_sm,self -x UCX_TM_SM_PRINT_STATS=y \
          "${extra[@]}" ./mpi_tag_test 2>&1)
    rc=$?
    echo "$out" | grep -v '^tm_sm iface'
    verdict=$(grep -c "^mpi_tag_test: PASS ($np ranks" <<<"$out")
    stats=$(grep '^tm_sm iface' <<<"$out")
    lines=$(grep -c . <<<"$stats")
    max_posted=$(sed -n 's/.*tag list: \([0-9]*\) posted.*/\1/p' <<<"$stats" | sort -n | tail -1)
    cancelled=$(sed -n 's/.* \([0-9]*\) cancelled.*/\1/p' <<<"$stats" | awk '{s += $1} END {print s + 0}')
    if [ "$rc" -ne 0 ] || [ "$verdict" -ne 1 ]; then
        echo "FAIL: $np ranks: exit $rc, verdict line missing"; echo "$out" | tail -20; fail=1
    elif [ "$lines" -ne "$np" ]; then
        echo "FAIL: $np ranks: $lines tm_sm counter lines, expected one per rank"; fail=1
    elif [ "${max_posted:-0}" -lt "$want_posted" ]; then
        echo "FAIL: $np ranks: rank 0 posted ${max_posted:-0} receives into tm_sm, expected >= $want_posted"; fail=1
    elif [ "$cancelled" -lt 1 ]; then
        echo "FAIL: $np ranks: MPI_Cancel did not reach tm_sm's tag list"; fail=1
    else
        echo "ok: $np ranks over tm_sm${settings:+ ($settings)}; rank 0 posted $max_posted receives into tm_sm, $cancelled cancelled there"
    fi
done
exit $fail
