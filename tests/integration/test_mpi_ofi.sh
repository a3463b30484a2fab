#!/usr/bin/env bash
# Open MPI over the libfabric provider tm: pml cm with mtl ofi, the provider named
# (mtl_ofi_provider_include tm, found through FI_PROVIDER_PATH at the build's src/fabric/.libs),
# mpi_tag_test with 2 and 4 ranks: wildcards, truncation, cancel, probe/mprobe, deep unexpected
# queues, derived datatypes. Open MPI asks for FI_LOCAL_COMM and FI_REMOTE_COMM: the provider
# offers it one domain, "tm_sm,tcp". Checks rank 0's verdict line, that every rank opened that
# domain (mtl_base_verbose's "mtl:ofi:provider" line) and, from tm_sm's counters, that tm_sm
# carried the messages (every rank received over it). Then mpi_threads under
# MPI_THREAD_MULTIPLE (Open MPI then asks for FI_THREAD_SAFE): 4 threads per rank exchanging at
# once, 2 and 4 ranks. Skips (77) without Open MPI's mtl ofi or a built provider.
# PROVIDER_PATH: the directory holding libtm-fi.so.
set -u
[ "${INTEGRATION_TESTS:-yes}" != no ] || { echo "SKIP: INTEGRATION_TESTS=no"; exit 77; }
mpirun=${MPIRUN:-mpirun}
provider_path=${PROVIDER_PATH:?set PROVIDER_PATH to the directory of libtm-fi.so}
command -v "$mpirun" >/dev/null || { echo "SKIP: Open MPI not installed"; exit 77; }
[ -x ./mpi_tag_test ] || { echo "SKIP: mpi_tag_test not built"; exit 77; }
[ -e "$provider_path/libtm-fi.so" ] || { echo "SKIP: no provider at $provider_path (configure found no libfabric)"; exit 77; }
ompi_info --param mtl ofi 2>/dev/null | grep -q 'MCA mtl' || { echo "SKIP: Open MPI has no mtl ofi"; exit 77; }

# run_ofi NP PROGRAM: the program's output over pml cm, mtl ofi and the provider tm (tm_sm's
# counters printed at exit); the exit status is mpirun's.
run_ofi() {
    local extra=()
    for v in ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH} FI_PROVIDER_PATH="$provider_path" UCX_TM_SM_PRINT_STATS=y; do
        extra+=(-x "$v")
    done
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
        "$mpirun" -np "$1" --oversubscribe --mca pml cm --mca mtl ofi \
        --mca mtl_ofi_provider_include tm --mca mtl_base_verbose 1 --mca btl self \
        --mca osc '^ucx' "${extra[@]}" "$2" 2>&1
}

fail=0
for np in 2 4; do
    out=$(run_ofi "$np" ./mpi_tag_test)
    rc=$?
    domains=$(grep -c 'mtl:ofi:provider: tm_sm,tcp$' <<<"$out")
    # the iface of each rank's endpoint (the provider's probes of fi_getinfo print lines of 0)
    carried=$(grep '^tm_sm iface' <<<"$out" | grep -vc ': 0 messages received')
    if [ "$rc" -ne 0 ] || [ "$(grep -c "^mpi_tag_test: PASS ($np ranks" <<<"$out")" -ne 1 ]; then
        echo "FAIL: Open MPI mtl ofi over tm, $np ranks: exit $rc, verdict line missing"
        grep -v '^tm_sm iface' <<<"$out" | tail -20
        fail=1
    elif [ "$domains" -ne "$np" ]; then
        echo "FAIL: $domains of $np ranks opened the domain tm_sm,tcp"
        grep 'mtl:ofi:provider' <<<"$out"
        fail=1
    elif [ "$carried" -ne "$np" ]; then
        echo "FAIL: tm_sm carried messages to $carried of $np ranks"
        grep '^tm_sm iface' <<<"$out"
        fail=1
    else
        echo "ok: Open MPI pml cm, mtl ofi, provider tm (domain tm_sm,tcp), $np ranks; $(grep "^mpi_tag_test: PASS" <<<"$out")"
    fi
done
# MPI_THREAD_MULTIPLE: the verdict line and that every rank opened the domain.
[ -x ./mpi_threads ] || { echo "FAIL: mpi_threads not built"; exit 1; }
for np in 2 4; do
    out=$(run_ofi "$np" ./mpi_threads)
    rc=$?
    domains=$(grep -c 'mtl:ofi:provider: tm_sm,tcp$' <<<"$out")
    if [ "$rc" -ne 0 ] || [ "$(grep -c "^mpi_threads: PASS ($np ranks" <<<"$out")" -ne 1 ] ||
        [ "$domains" -ne "$np" ]; then
        echo "FAIL: Open MPI mtl ofi over tm, MPI_THREAD_MULTIPLE, $np ranks: exit $rc, $domains domains"
        grep -v '^tm_sm iface' <<<"$out" | tail -20
        fail=1
    else
        echo "ok: Open MPI mtl ofi over tm, MPI_THREAD_MULTIPLE; $(grep "^mpi_threads: PASS" <<<"$out")"
    fi
done
exit $fail
