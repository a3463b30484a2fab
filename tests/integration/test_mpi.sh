#!/usr/bin/env bash
# Open MPI's pml ucx and MPICH's ch4:ucx over tm_sm: mpi_tag_test with 2 and 4 ranks, and with
# 2 ranks where every receive is posted to tm_sm and every message is UCP's software rendezvous
# (UCX_RNDV_THRESH=0 UCX_TM_THRESH=0 UCX_TM_SW_RNDV=y: the setting under which UCP 1.13.1
# aborted), each case under each MPI installed. Checks rank 0's verdict line and, from tm_sm's
# counters (one line per rank), that tm_sm carried the traffic and that UCP posted the deep
# queue's receives into tm_sm's tag list: all 4096 where the list holds them
# (UCX_TM_SM_TAG_LIST_SIZE=4096), a full list of 1024 by default (4 ranks), the rest kept and
# matched in UCP's software queue (for MPICH after exactly one refusal: see mpich_refusals).
# PLUGIN: the libuct_tm.so to load (preloaded before UCX 1.22, through UCX_PLUGIN_PATH from
# 1.22); MPIRUN: Open MPI's mpirun, MPIEXEC_MPICH: MPICH's mpiexec (either is skipped when
# missing). With a UCX outside the system's library path (configure --with-ucx), the ranks get
# its libraries through LD_LIBRARY_PATH: Debian's Open MPI and MPICH then run with that
# release's libucp.
set -u
[ "${INTEGRATION_TESTS:-yes}" != no ] || { echo "SKIP: INTEGRATION_TESTS=no"; exit 77; }
plugin=${PLUGIN:?set PLUGIN to the libuct_tm.so to preload}
mpirun=${MPIRUN:-mpirun}
mpiexec_mpich=${MPIEXEC_MPICH:-mpiexec.mpich}
[ -e "$plugin" ] || { echo "FAIL: plugin $plugin not found"; exit 1; }
. "$(dirname "$0")/../common/ucx_release.sh"
loading=$(plugin_loading "$plugin")
echo "loading the plugin with $loading (UCX $(ucx_release))"
deep=4096   # DEEP_RECVS in mpi_tag_test.c
default_list=1024   # UCX_TM_SM_TAG_LIST_SIZE's default
# The deep queue's 2 KiB receives and the cancelled 4 KiB one reach tm_sm's tag list only with
# UCX_TM_SM_RECV_MIN=0: by default tm_sm asks UCP to post receives above one descriptor
# (SEG_SIZE + 1 B), and the last run checks that MPI passes so, receives still posted there.
runs=("2 UCX_TM_SM_RECV_MIN=0 UCX_TM_SM_TAG_LIST_SIZE=$deep" "4 UCX_TM_SM_RECV_MIN=0"
      "2 UCX_TM_SM_RECV_MIN=0 UCX_TM_SM_TAG_LIST_SIZE=$deep UCX_RNDV_THRESH=0 UCX_TM_THRESH=0 UCX_TM_SW_RNDV=y"
      "2")

# available LAUNCHER PROGRAM NAME PACKAGES: true when both are there, else a SKIP line saying why.
available() {
    command -v "$1" >/dev/null || { echo "SKIP: $3: $1 not installed (apt-get install $4)"; return 1; }
    [ -x "./$2" ] || { echo "SKIP: $3: $2 not built (its compiler missing at configure time)"; return 1; }
}

# launch_ompi NP VAR=VALUE...: pml ucx only (it selects itself without RDMA devices only with
# tls/devices "any"); btl self only and no osc ucx, so nothing else opens UCX or carries messages.
launch_ompi() {
    local np=$1 v extra=()
    shift
    for v in "$loading" ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH} UCX_TLS=tm_sm,self UCX_TM_SM_PRINT_STATS=y "$@"; do
        extra+=(-x "$v")
    done
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
        "$mpirun" -np "$np" --oversubscribe \
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        --mca btl self --mca osc '^ucx' "${extra[@]}" ./mpi_tag_test
}

# launch_mpich NP VAR=VALUE...: MPICH's configure builds ch4:ucx without ch4's own shared
# memory (it cannot mix MPI_ANY_SOURCE across the two), so every message goes through UCX.
# -genv gives the variables to the ranks only (mpiexec itself loads no plugin); the fork
# launcher keeps them on this host, inside a Slurm job too.
launch_mpich() {
    local np=$1 v genv=()
    shift
    for v in "$loading" ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH=$LD_LIBRARY_PATH} UCX_TLS=tm_sm,self UCX_TM_SM_PRINT_STATS=y "$@"; do
        genv+=(-genv "${v%%=*}" "${v#*=}")
    done
    timeout 300 "$mpiexec_mpich" -launcher fork -np "$np" "${genv[@]}" ./mpi_tag_test_mpich
}

# counter STATS WORD: every rank's count before " WORD" in tm_sm's lines, summed.
counter() {
    sed -n "s/.* \([0-9]*\) $2.*/\1/p" <<<"$1" | awk '{s += $1} END {print s + 0}'
}

# mpich_refusals WANT_POSTED STATS: MPICH's receive mask clears its two error bits, so it is never
# UCP_TAG_MASK_FULL: UCP keeps all of MPICH's receives in its one wildcard queue and posts such
# a receive to the transport only while no receive waits in software. When the 1024-entry list
# is full, tm_sm refuses one receive and UCP asks no more (Open MPI's full-mask receives hash
# into 1021 queues that each ask once). Prints a failure, or nothing.
mpich_refusals() {
    local refused
    [ "$1" -eq "$default_list" ] || return   # a list of 4096 holds every receive
    refused=$(counter "$2" refused)
    [ "$refused" -eq 1 ] || echo "tm_sm refused $refused receives, expected 1 (UCP's wildcard queue)"
}

# check_run MPI NP SETTINGS: one run under MPI (ompi or mpich); its verdict and tm_sm's counters.
check_run() {
    local mpi=$1 np=$2 settings=$3 name out rc stats lines max_posted cancelled want_posted why="" every=no
    # shellcheck disable=SC2086  # settings: words, one VAR=VALUE each
    case $mpi in
        ompi)  name="Open MPI"; out=$(launch_ompi "$np" $settings 2>&1) ;;
        mpich) name=MPICH; out=$(launch_mpich "$np" $settings 2>&1) ;;
    esac
    rc=$?
    echo "$out" | grep -v '^tm_sm iface'
    stats=$(grep '^tm_sm iface' <<<"$out")
    lines=$(grep -c . <<<"$stats")
    max_posted=$(sed -n 's/.*tag list: \([0-9]*\) posted.*/\1/p' <<<"$stats" | sort -n | tail -1)
    cancelled=$(counter "$stats" cancelled)
    want_posted=1 # RECV_MIN by default: only the receives above 8 KiB are posted
    if [[ $settings == *RECV_MIN=0* ]]; then
        every=yes want_posted=$default_list
        [[ $settings == *TAG_LIST_SIZE=$deep* ]] && want_posted=$deep
        [ "$mpi" = mpich ] && why=$(mpich_refusals "$want_posted" "$stats")
    fi
    if [ "$rc" -ne 0 ] || [ "$(grep -c "^mpi_tag_test: PASS ($np ranks" <<<"$out")" -ne 1 ]; then
        echo "FAIL: $name, $np ranks: exit $rc, verdict line missing"; echo "$out" | tail -20
    elif [ "$lines" -ne "$np" ]; then
        echo "FAIL: $name, $np ranks: $lines tm_sm counter lines, expected one per rank"
    elif [ "${max_posted:-0}" -lt "$want_posted" ]; then
        echo "FAIL: $name, $np ranks: rank 0 posted ${max_posted:-0} receives into tm_sm, expected >= $want_posted"
    elif [ $every = yes ] && [ "$cancelled" -lt 1 ]; then
        echo "FAIL: $name, $np ranks: MPI_Cancel did not reach tm_sm's tag list"
    elif [ -n "$why" ]; then
        echo "FAIL: $name, $np ranks: $why"
    else
        echo "ok: $name, $np ranks over tm_sm${settings:+ ($settings)}; rank 0 posted $max_posted receives into tm_sm, $cancelled cancelled, $(counter "$stats" refused) refused there"
        return 0
    fi
    return 1
}

mpis=()
available "$mpirun" mpi_tag_test "Open MPI" "openmpi-bin libopenmpi-dev" && mpis+=(ompi)
available "$mpiexec_mpich" mpi_tag_test_mpich MPICH "mpich libmpich-dev" && mpis+=(mpich)
[ ${#mpis[@]} -gt 0 ] || exit 77
fail=0
for mpi in "${mpis[@]}"; do
    for run in "${runs[@]}"; do
        read -r np settings <<<"$run"
        check_run "$mpi" "$np" "${settings:-}" || fail=1
    done
done
exit $fail
