#!/usr/bin/env bash
# UCP and Open MPI over tm_sm against UCX's own shared-memory transports, interleaved.
#
# Usage: contrib/bench_ucp.sh [BUILD_DIR]
# Environment:
#   ROUNDS     rounds of the whole A/B sequence (default 5)
#   UCX_PEER   UCX_TLS of the reference (default posix,cma,self)
#   OUT        output directory (default BUILD_DIR/bench_ucp)
#   QUICK=1    short runs (to check the script, not for figures)
#
# Each round runs every case over the reference, then over tm_sm (UCX_TLS=tm_sm,self, plugin
# preloaded), back to back: cross-core latency on this machine changes by 4x within seconds,
# so only neighbours compare. Cases:
#   lat_8B     ucx_perftest tag_lat 8 B, typical one-way latency
#   bw_1MiB    ucx_perftest tag_bw 1 MiB with malloc'd buffers (UCX_ALLOC_PRIO=heap: user
#              buffers, not memory UCX allocated in shared memory for itself)
#   mpi_8B     Open MPI pml ucx, 8 B ping-pong one-way latency (tests/integration/mpi_pingpong.c)
#   deep_*     ucp_queue_depth over tm_sm (one thread, two workers, thread CPU time): cost
#              per message with 64 Ki posted receives vs a shallow queue, tag offload active
#              (all receives posted into tm_sm), the matched receives oldest or newest
# Reports medians over rounds with min/max, ratios and the targets of issue 4 (docs/perf.md).
set -euo pipefail

# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh" bench_ucp "$@"
plugin=$build_dir/uct_tm/.libs/libuct_tm.so
depth_bin=$build_dir/tests/integration/ucp_queue_depth
command -v ucx_perftest >/dev/null || { echo "bench_ucp.sh: ucx_perftest missing (contrib/deps.sh)" >&2; exit 2; }
[ -e "$plugin" ] && [ -x "$depth_bin" ] || { echo "bench_ucp.sh: build first (contrib/build.sh)" >&2; exit 2; }
have_mpi=0
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    mpicc -O2 -o "$out/mpi_pingpong" "$src_dir/tests/integration/mpi_pingpong.c" && have_mpi=1
fi

if [ "${QUICK:-0}" = 1 ]; then
    n_lat=20000 n_bw=300 n_mpi=2000 depth_rounds=1
else
    n_lat=200000 n_bw=3000 n_mpi=20000 depth_rounds=3
fi

# tls_env IMPL: the environment of one side of the comparison.
tls_env() {
    if [ "$1" = tm_sm ]; then echo "LD_PRELOAD=$plugin UCX_TLS=tm_sm,self"; else echo "UCX_TLS=$peer"; fi
}

# perftest IMPL TEST SIZE ITERS [VAR=VALUE...]: prints "lat_us MBps" (typical latency, overall
# bandwidth in MB/s) or "nan nan".
perftest() {
    local impl=$1 test=$2 size=$3 iters=$4 port line
    shift 4
    port=$((20000 + RANDOM % 20000))
    # shellcheck disable=SC2046
    env $(tls_env "$impl") "$@" ucx_perftest -p "$port" -t "$test" -s "$size" -n "$iters" >/dev/null 2>&1 &
    local server=$! line=""
    for _ in $(seq 10); do
        sleep 0.2
        # shellcheck disable=SC2046
        line=$(env $(tls_env "$impl") "$@" timeout 300 ucx_perftest 127.0.0.1 -p "$port" -t "$test" \
               -s "$size" -n "$iters" 2>/dev/null | grep '^Final:' || true)
        [ -n "$line" ] && break
    done
    wait "$server" 2>/dev/null || true
    [ -n "$line" ] || { echo "nan nan"; return; }
    # Final: iters lat50 lat_avg lat_overall bw_avg bw_overall(MiB/s) rate_avg rate_overall
    awk '{printf "%s %.1f\n", $3, $7 * 1.048576}' <<<"$line"
}

# mpi IMPL: one-way 8 B ping-pong latency in us over pml ucx.
mpi() {
    local impl=$1
    [ "$have_mpi" = 1 ] || { echo nan; return; }
    local exports=()
    for var in $(tls_env "$impl"); do exports+=(-x "$var"); done
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
        mpirun -np 2 --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        --mca btl self --mca osc '^ucx' "${exports[@]}" \
        "$out/mpi_pingpong" 8 "$n_mpi" 11 2>/dev/null | awk '/^mpi_pingpong/ {print $4; found=1} END {if (!found) print "nan"}'
}

echo "round,case,impl,value" >"$raw"
for r in $(seq 1 "$rounds"); do
    for impl in ucx tm_sm; do
        read -r lat _ < <(perftest "$impl" tag_lat 8 "$n_lat")
        echo "$r,lat_8B,$impl,$lat" >>"$raw"
    done
    for impl in ucx tm_sm; do
        read -r _ bw < <(perftest "$impl" tag_bw 1048576 "$n_bw" UCX_ALLOC_PRIO=heap)
        echo "$r,bw_1MiB,$impl,$bw" >>"$raw"
    done
    for impl in ucx tm_sm; do
        echo "$r,mpi_8B,$impl,$(mpi "$impl")" >>"$raw"
    done
    for order in oldest newest; do
        # RECV_MIN=0: tm_sm takes the 1 KiB receives (by default UCP keeps those)
        LD_PRELOAD=$plugin UCX_TLS=tm_sm UCX_TM_SM_TAG_LIST_SIZE=131072 UCX_TM_SM_RECV_MIN=0 timeout 600 \
            "$depth_bin" -d 65536 -m 4096 -s 1024 -r "$depth_rounds" -o "$order" 2>/dev/null |
            awk -v r="$r" -v o="$order" '$1 == "round" {print r "," ($4 == 0 ? "shallow" : "deep") "_" o ",tm_sm," $6}' >>"$raw"
    done
    round_done "$r"
done

python3 - "$raw" "$out" "$peer" "$revision" "$rounds" "$src_dir/contrib" <<'PY'
import csv, statistics, sys, datetime
raw, out, peer, revision, rounds = sys.argv[1:6]
sys.path.insert(0, sys.argv[6])
from bench_stats import regime_cell
rows = list(csv.DictReader(open(raw)))
def vals(case, impl):
    v = []
    for r in rows:
        if r["case"] == case and r["impl"] == impl:
            try:
                x = float(r["value"])
            except ValueError:
                continue
            if x == x:
                v.append(x)
    return v
def fmt(x):
    return "%.3f" % x if x < 10 else "%.0f" % x
def cell(v):
    return "%s [%s-%s]" % (fmt(statistics.median(v)), fmt(min(v)), fmt(max(v))) if v else "-"
# case, description, A (reference), B (measured), better, target ratio B/A
spec = [
    ("lat_8B", "ucx_perftest tag_lat 8 B (us)", ("lat_8B", "ucx"), ("lat_8B", "tm_sm"), "lower", 1.0),
    ("bw_1MiB", "ucx_perftest tag_bw 1 MiB, user buffers (MB/s)", ("bw_1MiB", "ucx"), ("bw_1MiB", "tm_sm"), "higher", 1.0),
    ("mpi_8B", "Open MPI pml ucx ping-pong 8 B (us)", ("mpi_8B", "ucx"), ("mpi_8B", "tm_sm"), "lower", 1.0),
    ("deep_oldest", "UCP over tm_sm, CPU per message, 64 Ki posted vs shallow, match oldest (ns)", ("shallow_oldest", "tm_sm"), ("deep_oldest", "tm_sm"), "lower", 2.0),
    ("deep_newest", "UCP over tm_sm, CPU per message, 64 Ki posted vs shallow, match newest (ns)", ("shallow_newest", "tm_sm"), ("deep_newest", "tm_sm"), "lower", 2.0),
]
# The latency cases draw a cross-core regime per run (bench_stats.py): the
# per-regime ratios compare like with like where the ratio of medians cannot.
lines = ["| case | reference median [min-max] | tm_sm median [min-max] | ratio | per regime | target |",
         "|---|---:|---:|---:|---|---|"]
checks = []
for case, desc, a, b, better, target in spec:
    va, vb = vals(*a), vals(*b)
    if not va or not vb:
        lines.append("| %s | %s | %s | - | - | - |" % (desc, cell(va), cell(vb)))
        checks.append(("%s: no figures" % desc, False))
        continue
    ratio = statistics.median(vb) / statistics.median(va)
    ok = ratio <= target if better == "lower" else ratio >= target
    sign = "<=" if better == "lower" else ">="
    lines.append("| %s | %s | %s | **%.2fx** | %s | %s %.1fx |" % (desc, cell(va), cell(vb), ratio,
                                                               regime_cell(va, vb, better), sign, target))
    checks.append(("%s: %.2fx (target %s %.1fx)" % (desc, ratio, sign, target), ok))
md = ["Revision %s, %s, %s rounds; reference `UCX_TLS=%s`, tm_sm `UCX_TLS=tm_sm,self` with the plugin "
      "preloaded; each case run on both back to back (deep queue: shallow and deep alternate inside "
      "one ucp_queue_depth run)." % (revision, datetime.date.today(), rounds, peer), ""] + lines + [""]
open(out + "/summary.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
print("Targets")
for name, ok in checks:
    print("  [%s] %s" % ("ok" if ok else "MISS", name))
PY
echo "raw figures: $raw; markdown: $out/summary.md" >&2
