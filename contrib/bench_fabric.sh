#!/usr/bin/env bash
# What the libfabric provider adds over the protocol layer per 8 B message
# (tests/bench/bench_fabric: the calls Open MPI's mtl ofi makes per MPI_Send /
# MPI_Recv, through libfabric and straight through the layer's C API).
#
# Usage: contrib/bench_fabric.sh [BUILD_DIR]
#   BUILD_DIR  a build with libfabric found (default: $BUILD_DIR, else build/)
# Environment:
#   BENCH_FABRIC_DOMAIN  the domain / transports (default tm_sm; e.g. "tm_sm,tcp")
#   ROUNDS               timed rounds, the two loops interleaved (default 5)
#   NO_CALLGRIND=1       skip the instruction counts
#
# Prints instructions per iteration of each loop (callgrind, 60000 minus 20000
# iterations, so set-up cancels) and their difference, and the layer's loop
# with 1000 other receives from the same peer held (a deep MPI queue), and
# an fi_cq_read that finds nothing (a turn of an application's wait loop); then per round the
# time per iteration of each (Google Benchmark, CPU time) and the difference,
# and the medians over rounds.
set -euo pipefail

src_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-${BUILD_DIR:-$src_dir/build}}" && pwd)
bench=$build_dir/tests/bench/bench_fabric
[ -x "$bench" ] || { echo "bench_fabric.sh: $bench not built (libfabric and Google Benchmark needed)" >&2; exit 2; }
export FI_PROVIDER_PATH=$build_dir/src/fabric/.libs
rounds=${ROUNDS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "${NO_CALLGRIND:-0}" != 1 ] && command -v valgrind >/dev/null; then
    for b in Fabric Layer Deep Empty; do
        case $b in
        Fabric) filter='^FabricTaggedInject(/|$)' ;;
        Layer) filter='^LayerTaggedInject/0(/|$)' ;;
        Deep) filter='^LayerTaggedInject/1000(/|$)' ;;
        Empty) filter='^FabricEmptyRead(/|$)' ;;
        esac
        for n in 20000 60000; do
            BENCH_FABRIC_ITERS=$n "$build_dir/libtool" --mode=execute valgrind --tool=callgrind \
                --callgrind-out-file="$tmp/$b.$n" "$bench" --benchmark_filter="$filter" \
                >/dev/null 2>&1
        done
    done
    total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }
    fab=$(( ($(total "$tmp/Fabric.60000") - $(total "$tmp/Fabric.20000")) / 40000 ))
    lay=$(( ($(total "$tmp/Layer.60000") - $(total "$tmp/Layer.20000")) / 40000 ))
    deep=$(( ($(total "$tmp/Deep.60000") - $(total "$tmp/Deep.20000")) / 40000 ))
    echo "instructions per iteration: libfabric $fab, layer $lay, provider $((fab - lay))"
    empty=$(( ($(total "$tmp/Empty.60000") - $(total "$tmp/Empty.20000")) / 40000 ))
    echo "layer with 1000 receives from the peer held: $deep"
    echo "an fi_cq_read that finds nothing (a turn of a wait loop): $empty"
fi

for r in $(seq "$rounds"); do
    "$bench" --benchmark_format=csv 2>/dev/null |
        awk -F, -v r="$r" '/TaggedInject/ {gsub(/"/, "", $1); t[$1] = $4}
            END {f = t["FabricTaggedInject"]; l = t["LayerTaggedInject/0"];
                 printf "round %d: libfabric %.1f ns, layer %.1f ns, provider %.1f ns\n", r, f, l, f - l}'
done | tee "$tmp/rounds"
awk '{f[NR] = $4; l[NR] = $7; d[NR] = $10}
     function median(a, n,   i, j, t) {
         for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) {t = a[i]; a[i] = a[j]; a[j] = t}
         return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     END {printf "median: libfabric %.1f ns, layer %.1f ns, provider %.1f ns\n", median(f, NR), median(l, NR), median(d, NR)}' "$tmp/rounds"
