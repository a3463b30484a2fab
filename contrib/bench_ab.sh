#!/usr/bin/env bash
# Two builds of uct-tm against each other: tm_perftest over tm_sm, latency
# and message rate or bandwidth, interleaved (the order alternates by round).
#
# Usage: contrib/bench_ab.sh OLD_BUILD NEW_BUILD [ROUNDS]   (default 21 rounds)
#
#   SIZES   message sizes (default 8): for each, the one-way tag_lat median;
#           for 8 B the tag_bw message rate, for larger sizes tag_bw MB/s
#   CPUS    sender,receiver CPUs (default 0,1: the two processes on two cores)
#
# This host changes its cross-core latency regime within seconds, so only
# neighbours compare: the report gives, per metric, the medians of each build
# and the quartiles of the per-round new/old ratios. Raw rows in $OUT
# (default /tmp/bench_ab.csv).
set -euo pipefail
old=${1:?old build dir} new=${2:?new build dir} rounds=${3:-21}
out=${OUT:-/tmp/bench_ab.csv}
sizes=${SIZES:-8}
cpus=${CPUS:-0,1}
for b in "$old" "$new"; do
    [ -x "$b/src/tools/tm_perftest" ] || { echo "bench_ab.sh: $b/src/tools/tm_perftest not built" >&2; exit 2; }
done
# iterations by size: short messages need many for a stable median
iters() { if [ "$1" -le 1024 ]; then echo "$2"; else echo $(( $2 / 50 > 2000 ? $2 / 50 : 2000 )); fi; }
echo "round,impl,size,lat_us,rate" >"$out"
for r in $(seq 1 "$rounds"); do
    order="old new"
    [ $((r % 2)) = 0 ] && order="new old"
    for impl in $order; do
        b=$old
        [ "$impl" = new ] && b=$new
        for s in ${sizes//,/ }; do
            bytes=$(numfmt --from=iec "${s^^}")
            lat=$("$b/src/tools/tm_perftest" -t tag_lat -s "$bytes" -n "$(iters "$bytes" 100000)" \
                  -c "$cpus" --no-header 2>/dev/null | awk 'NF == 6 {print $3}')
            # 8 B: messages per second; larger: MB/s
            col=6
            [ "$bytes" -le 8 ] && col=5
            rate=$("$b/src/tools/tm_perftest" -t tag_bw -s "$bytes" -n "$(iters "$bytes" 2000000)" \
                   -c "$cpus" --no-header 2>/dev/null | awk -v c=$col 'NF == 6 {print $c}')
            echo "$r,$impl,$bytes,${lat:-nan},${rate:-nan}" >>"$out"
        done
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
for size in sorted({int(r["size"]) for r in rows}):
    mine = [r for r in rows if int(r["size"]) == size]
    rate = "rate (msg/s, higher is better)" if size <= 8 else "bandwidth (MB/s, higher is better)"
    for col, what in (("lat_us", "%d B latency (us, lower is better)" % size),
                      ("rate", "%d B %s" % (size, rate))):
        med = {i: statistics.median([v for v in (num(r[col]) for r in mine if r["impl"] == i)
                                     if v is not None])
               for i in ("old", "new")}
        ratios = []
        for rnd in sorted({r["round"] for r in mine}, key=int):
            a = [num(r[col]) for r in mine if r["round"] == rnd and r["impl"] == "old"]
            b = [num(r[col]) for r in mine if r["round"] == rnd and r["impl"] == "new"]
            if a and b and a[0] and b[0]:
                ratios.append(b[0] / a[0])
        q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [float("nan")] * 3
        print("%-44s old %.4g  new %.4g  new/old per round: p25 %.3f median %.3f p75 %.3f (%d rounds)"
              % (what, med["old"], med["new"], q[0], statistics.median(ratios), q[2], len(ratios)))
PY
