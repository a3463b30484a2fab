#!/usr/bin/env bash
# Open MPI's ping-pong over the libfabric provider tm (pml cm, mtl ofi) against pml ucx over
# UCX's shared memory and over tm_sm, interleaved (docs/libfabric.md, "Open MPI").
#
# Usage: contrib/bench_mpi_ofi.sh [BUILD_DIR]
#   BUILD_DIR  a build with the provider, configured --with-ucx=PREFIX: every process loads
#              that UCX (a release build, e.g. contrib/ucx_cache.sh's; Open MPI's pml ucx too)
# Environment:
#   ROUNDS     rounds (default 5); each runs the three cases back to back
#   SIZE       message bytes (default 8); ITERS round trips per batch (default 20000)
#   UCX_PEER   UCX_TLS of the reference (default posix,cma,self)
#   OUT        output directory (default BUILD_DIR/bench_mpi_ofi)
#   CALLGRIND=1 instead: instructions per 8 B MPI_Send on rank 0 for ofi_tm and ucx_peer
#              (callgrind collecting inside MPI_Send and MPI_Recv only, 3000 minus 1000
#              round trips), ofi_tm's split into Open MPI's own part, the provider's and
#              the layer's with tm_sm's
#
# Cases (tests/integration/mpi_pingpong.c, one-way latency, median of 11 batches):
#   ofi_tm     --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tm
#   ucx_peer   --mca pml ucx, UCX_TLS=UCX_PEER
#   ucx_tm_sm  --mca pml ucx, UCX_TLS=tm_sm,self (the plugin preloaded)
# libfabric's shm provider is no case: it offers no FI_REMOTE_COMM, so mtl ofi cannot use it.
# Prints each round and the medians of the per-round ratios against ucx_peer.
set -euo pipefail

# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh" bench_mpi_ofi "$@"
provider_dir=$build_dir/src/fabric/.libs
plugin=$build_dir/uct_tm/.libs/libuct_tm.so
size=${SIZE:-8}
iters=${ITERS:-20000}
[ -e "$provider_dir/libtm-fi.so" ] && [ -e "$plugin" ] ||
    { echo "bench_mpi_ofi.sh: $build_dir has no provider or plugin (build with libfabric)" >&2; exit 2; }
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    { echo "bench_mpi_ofi.sh: Open MPI (mpicc, mpirun) missing" >&2; exit 2; }
mpicc -O2 -o "$out/mpi_pingpong" "$src_dir/tests/integration/mpi_pingpong.c"

# pingpong CASE [WRAPPER...]: one-way microseconds, or nan.
pingpong() {
    local c=$1
    shift
    local args=(-np 2 --bind-to core --mca btl self --mca osc '^ucx' -x LD_LIBRARY_PATH)
    case $c in
    ofi_tm) args+=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tm
                   -x FI_PROVIDER_PATH="$provider_dir") ;;
    ucx_peer) args+=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
                     -x UCX_TLS="$peer") ;;
    ucx_tm_sm) args+=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
                      -x "UCX_TLS=tm_sm,self" -x LD_PRELOAD="$plugin") ;;
    esac
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
        mpirun "${args[@]}" "$@" "$out/mpi_pingpong" "$size" "$iters" "${batches:-11}" 2>/dev/null |
        awk '/^mpi_pingpong/ {print $4; found = 1} END {if (!found) print "nan"}'
}

# callgrind_runs CASE: two runs of 1000 and 3000 round trips under callgrind, collecting
# inside MPI_Send and MPI_Recv only (the rest is set-up, and cancels in the difference).
callgrind_runs() {
    local n
    for n in 1000 3000; do
        iters=$n batches=1 pingpong "$1" valgrind --tool=callgrind --dump-instr=no \
            --toggle-collect='*MPI_Send' --toggle-collect='*MPI_Recv' \
            --callgrind-out-file="$out/cg.$1.$n.%q{OMPI_COMM_WORLD_RANK}" >/dev/null
    done
}
per_send() { # CASE REGEX: the function's inclusive instructions per MPI_Send
    local n counts=()
    for n in 3000 1000; do
        # the largest of the function's entries (callgrind_annotate splits a function by
        # source file, and by which of those files it finds from its working directory)
        counts+=("$(cd "$out" && callgrind_annotate --inclusive=yes "cg.$1.$n.0" 2>/dev/null |
            awk -v re="$2" '$0 ~ re {gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0} END {print m + 0}')")
    done
    echo $(((counts[0] - counts[1]) / 4000)) # two batches (warm-up and one) of each length
}
if [ "${CALLGRIND:-0}" = 1 ]; then
    command -v valgrind >/dev/null || { echo "bench_mpi_ofi.sh: valgrind missing" >&2; exit 2; }
    for c in ofi_tm ucx_peer; do callgrind_runs "$c"; done
    send=$(per_send ofi_tm 'PMPI_Send \\[')
    fi_send=$(per_send ofi_tm 'fabric::.*::(tinjectdata|tsenddata|tinject|tsend)\\(.*\\[')
    layer=$(per_send ofi_tm '/api.cc:uct_tm_proto_send \\[')
    echo "instructions per 8 B MPI_Send, UCX $ucx_version, revision $revision:"
    echo "  pml cm + mtl ofi over tm: $send (Open MPI $((send - fi_send)), provider $((fi_send - layer)), layer and tm_sm $layer)"
    echo "  pml ucx over $peer: $(per_send ucx_peer 'PMPI_Send \\[')"
    exit 0
fi

cases=(ofi_tm ucx_peer ucx_tm_sm)
echo "round,case,us" >"$raw"
echo "UCX $ucx_version ($ucx_libdir), $size B, revision $revision; one-way us per case"
for r in $(seq "$rounds"); do
    line="round $r:"
    for c in "${cases[@]}"; do
        v=$(pingpong "$c")
        echo "$r,$c,$v" >>"$raw"
        line+=" $c $v"
    done
    echo "$line"
    round_done "$r"
done

python3 - "$raw" <<'PY'
import csv, math, statistics, sys
by = {}
for r in csv.DictReader(open(sys.argv[1])):
    us = float(r["us"])
    if not math.isnan(us):
        by.setdefault(r["round"], {})[r["case"]] = us
for case in ("ofi_tm", "ucx_tm_sm"):
    ratios = [v[case] / v["ucx_peer"] for v in by.values() if case in v and v.get("ucx_peer", 0) > 0]
    if ratios:
        print("%s / ucx_peer per round: median %.2fx (%.2f-%.2f, %d rounds)"
              % (case, statistics.median(ratios), min(ratios), max(ratios), len(ratios)))
for case in ("ofi_tm", "ucx_peer", "ucx_tm_sm"):
    vals = [v[case] for v in by.values() if case in v]
    if vals:
        print("%s: median %.3f us (%.3f-%.3f)" % (case, statistics.median(vals), min(vals), max(vals)))
PY
