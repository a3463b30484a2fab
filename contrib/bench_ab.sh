#!/usr/bin/env bash
# Two builds of uct-tm against each other: tm_perftest over tm_sm, 8 B
# latency and 8 B message rate, interleaved (the order alternates by round).
#
# Usage: contrib/bench_ab.sh OLD_BUILD NEW_BUILD [ROUNDS]   (default 21 rounds)
#
# This host changes its cross-core latency regime within seconds, so only
# neighbours compare: the report gives, per metric, the medians of each build
# and the quartiles of the per-round new/old ratios. Raw rows in $OUT
# (default /tmp/bench_ab.csv).
set -euo pipefail
old=${1:?old build dir} new=${2:?new build dir} rounds=${3:-21}
out=${OUT:-/tmp/bench_ab.csv}
for b in "$old" "$new"; do
    [ -x "$b/src/tools/tm_perftest" ] || { echo "bench_ab.sh: $b/src/tools/tm_perftest not built" >&2; exit 2; }
done
echo "round,impl,lat_us,msg_rate" >"$out"
for r in $(seq 1 "$rounds"); do
    order="old new"
    [ $((r % 2)) = 0 ] && order="new old"
    for impl in $order; do
        b=$old
        [ "$impl" = new ] && b=$new
        lat=$("$b/src/tools/tm_perftest" -t tag_lat -s 8 -n 100000 --no-header 2>/dev/null | awk 'NF == 6 {print $3}')
        rate=$("$b/src/tools/tm_perftest" -t tag_bw -s 8 -n 2000000 --no-header 2>/dev/null | awk 'NF == 6 {print $5}')
        echo "$r,$impl,${lat:-nan},${rate:-nan}" >>"$out"
    done
done
python3 - "$out" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def num(x):
    try:
        v = float(x)
        return v if v == v else None
    except ValueError:
        return None
for col, what in (("lat_us", "8 B latency (us, lower is better)"), ("msg_rate", "8 B rate (msg/s, higher is better)")):
    med = {i: statistics.median([v for v in (num(r[col]) for r in rows if r["impl"] == i) if v is not None])
           for i in ("old", "new")}
    ratios = []
    for rnd in sorted({r["round"] for r in rows}, key=int):
        a = [num(r[col]) for r in rows if r["round"] == rnd and r["impl"] == "old"]
        b = [num(r[col]) for r in rows if r["round"] == rnd and r["impl"] == "new"]
        if a and b and a[0] and b[0]:
            ratios.append(b[0] / a[0])
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [float("nan")] * 3
    print("%-36s old %.4g  new %.4g  new/old per round: p25 %.3f median %.3f p75 %.3f (%d rounds)"
          % (what, med["old"], med["new"], q[0], statistics.median(ratios), q[2], len(ratios)))
PY
