#!/usr/bin/env bash
# tm_sm against UCX's shared-memory transports, interleaved in one run.
#
# Usage: contrib/bench_sm.sh [BUILD_DIR]
# Environment:
#   ROUNDS     rounds of the whole A/B sequence (default 5)
#   UCX_PEER   UCX_TLS of the reference (default posix,cma,self)
#   OUT        output directory for CSV, markdown and plots (default BUILD_DIR/bench_sm)
#   QUICK=1    fewer iterations (the quick start's short run)
#
# Each round runs, for every case, ucx_perftest over UCX_PEER then tm_perftest
# over tm_sm, back to back: this machine's cross-core latency changes by 4x
# within seconds (the host migrates the vCPUs), so only ratios of neighbours
# mean something. Reports medians over rounds with min/max, the ratio of
# medians, and the targets of issue "tm_sm" (docs/perf.md).
set -euo pipefail

# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh" bench_sm "$@"
tm=$build_dir/src/tools/tm_perftest
command -v ucx_perftest >/dev/null || { echo "bench_sm.sh: ucx_perftest missing (apt-get install ucx-utils)" >&2; exit 2; }
[ -x "$tm" ] || { echo "bench_sm.sh: $tm not built (contrib/build.sh)" >&2; exit 2; }

if [ "${QUICK:-0}" = 1 ]; then
    n_lat=20000 n_rate=500000 n_bw=500
else
    n_lat=200000 n_rate=4000000 n_bw=3000
fi
# case: name test size iterations
cases=(
    "lat_8B tag_lat 8 $n_lat"
    "rate_8B tag_bw 8 $n_rate"
    "bw_1MiB tag_bw 1048576 $n_bw"
    "bw_4MiB tag_bw 4194304 $((n_bw / 3))"
)

# One ucx_perftest run; prints "lat_us msg_rate MBps" (latency: 50th
# percentile of one-way; bandwidth and rate: overall).
ucx_run() {
    local test=$1 size=$2 iters=$3 port line
    port=$((20000 + RANDOM % 20000))
    UCX_TLS=$peer ucx_perftest -p "$port" -t "$test" -s "$size" -n "$iters" >/dev/null 2>&1 &
    local server=$!
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        line=$(UCX_TLS=$peer timeout 300 ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$size" \
               -n "$iters" 2>/dev/null | grep '^Final:' || true)
        [ -n "$line" ] && break
    done
    wait "$server" 2>/dev/null || true
    [ -n "$line" ] || { echo "nan nan nan"; return; }
    # Final: iters  lat50  lat_avg  lat_overall  bw_avg  bw_overall  rate_avg  rate_overall
    # perftest reports MiB/s: convert to MB/s (10^6 B/s) like tm_perftest.
    echo "$line" | awk '{printf "%s %s %.1f\n", $3, $9, $7 * 1.048576}'
}

# One tm_perftest run; same three figures.
tm_run() {
    local test=$1 size=$2 iters=$3
    "$tm" -t "$test" -s "$size" -n "$iters" --no-header 2>/dev/null |
        awk 'NF == 6 {print $3, $5, $6}'
}

echo "round,case,impl,lat_us,msg_rate,MBps" >"$raw"
for r in $(seq 1 "$rounds"); do
    for c in "${cases[@]}"; do
        set -- $c
        name=$1 test=$2 size=$3 iters=$4
        read -r lat rate bw < <(ucx_run "$test" "$size" "$iters")
        echo "$r,$name,ucx,$lat,$rate,$bw" >>"$raw"
        read -r lat rate bw < <(tm_run "$test" "$size" "$iters")
        echo "$r,$name,tm_sm,$lat,$rate,$bw" >>"$raw"
    done
    round_done "$r"
done

python3 - "$raw" "$out" "$peer" "$revision" "$rounds" "$src_dir/contrib" <<'PY'
import csv, statistics, sys, datetime
raw, out, peer, revision, rounds = sys.argv[1:6]
sys.path.insert(0, sys.argv[6])
from bench_stats import meets, regime_cell, regime_ratios
rows = list(csv.DictReader(open(raw)))
ref = "ucx"
# case -> (metric column, better, target ratio tm/ucx, description)
spec = {
    "lat_8B":  ("lat_us",   "lower",  0.8, "8 B one-way tag latency (us)"),
    "rate_8B": ("msg_rate", "higher", 1.2, "8 B message rate (msg/s)"),
    "bw_1MiB": ("MBps",     "higher", 1.5, "1 MiB bandwidth, malloc'd buffers (MB/s)"),
    "bw_4MiB": ("MBps",     "higher", 1.5, "4 MiB bandwidth, malloc'd buffers (MB/s)"),
}
def vals(case, impl, col):
    v = []
    for r in rows:
        if r["case"] == case and r["impl"] == impl:
            try:
                x = float(r[col])
                if x == x:
                    v.append(x)
            except ValueError:
                pass
    return v
def fmt(x):
    return "%.3f" % x if x < 10 else ("%.0f" % x)
lines, checks = [], []
lines.append("| case | UCX `%s` median [min-max] | tm_sm median [min-max] | tm_sm / UCX | per regime | target |" % peer)
lines.append("|---|---:|---:|---:|---|---|")
ratios_per_round = {}
for case, (col, better, target, desc) in spec.items():
    u, t = vals(case, ref, col), vals(case, "tm_sm", col)
    if not u or not t:
        lines.append("| %s | - | - | - | - | - |" % desc)
        continue
    mu, mt = statistics.median(u), statistics.median(t)
    ratio = mt / mu
    ok = meets(ratio, better, target)
    # Per-round ratios of neighbours: the robust comparison on this machine.
    pr = []
    for r in range(1, int(rounds) + 1):
        a = [float(x[col]) for x in rows if x["case"] == case and x["impl"] == ref and int(x["round"]) == r and x[col] not in ("nan", "")]
        b = [float(x[col]) for x in rows if x["case"] == case and x["impl"] == "tm_sm" and int(x["round"]) == r and x[col] not in ("nan", "")]
        if a and b and a[0] > 0:
            pr.append(b[0] / a[0])
    ratios_per_round[case] = pr
    sign = "<=" if better == "lower" else ">="
    lines.append("| %s | %s [%s-%s] | %s [%s-%s] | **%.2fx** (per-round median %.2fx) | %s | %s %.1fx |" % (
        desc, fmt(mu), fmt(min(u)), fmt(max(u)), fmt(mt), fmt(min(t)), fmt(max(t)), ratio,
        statistics.median(pr) if pr else float("nan"), regime_cell(u, t, better), sign, target))
    checks.append(("%s: tm_sm/UCX %.3fx by medians (target %s %.1fx)" % (desc, ratio, sign, target), ok))
    rr = regime_ratios(u, t, better)
    if rr is not None:  # information, not a target: the split is by the figures themselves
        checks.append(("%s: slow regime %.2fx, fast regime %.2fx" % (desc, rr[0], rr[1]), None))
md = []
md.append("Revision %s, %s, %s rounds, each case run as ucx_perftest (`UCX_TLS=%s`, UCP tag API) then "
          "tm_perftest (UCT tag API over tm_sm) back to back." % (revision, datetime.date.today(), rounds, peer))
md.append("")
md += lines
md.append("")
open(out + "/summary.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
print()
print("Targets")
for name, ok in checks:
    print("  [%s] %s" % ("info" if ok is None else "ok" if ok else "MISS", name))
PY
echo "raw figures: $raw; markdown: $out/summary.md" >&2
