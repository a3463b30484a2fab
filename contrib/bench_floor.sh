#!/usr/bin/env bash
# The protocol layer's floor at small sizes (docs/perf.md, Protocol layer, "How close a layer of this shape can get"):
# interleaved one-way latency of
#   raw:      tm_perftest over tm_sm (tag_eager_short at 8 B, bcopy at 1 KiB)
#   raw_imm:  the same sending small messages as the layer must (inline tag_eager_zcopy with
#             an imm carrying the source id); needs the floor build
#   layer:    tm_proto_perf -u (requests in the caller's memory)
#   floor:    tm_proto_perf -u built with docs/experiments/proto_floor.patch: no argument
#             checks, no list of live caller-memory receives, no refusal-path state, no
#             statistics -- NOT a valid layer, only the bound any layer of this shape meets
# Usage: contrib/bench_floor.sh build-dir floor-build-dir; ROUNDS (default 40), SIZES
# (default "8 1024"), N (iterations per run, default 20000). The floor build:
#   git worktree add --detach /tmp/floor && cd /tmp/floor && git apply docs/experiments/proto_floor.patch
#   contrib/build.sh /tmp/floor/build
set -euo pipefail

[ $# -eq 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
floor=$(cd "$2" && pwd)
rounds=${ROUNDS:-40}
iters=${N:-20000}
for t in "$build/src/tools/tm_perftest" "$build/src/tools/tm_proto_perf" \
         "$floor/src/tools/tm_perftest" "$floor/src/tools/tm_proto_perf"; do
    [ -x "$t" ] || { echo "bench_floor.sh: $t not built" >&2; exit 2; }
done

uct_lat() { "$1/src/tools/tm_perftest" -t tag_lat -s "$2" -n "$iters" --no-header 2>/dev/null |
            awk 'NF == 6 {print $3}'; }
proto_lat() { "$1/src/tools/tm_proto_perf" -u -t tag_lat -s "$2" -n "$iters" 2>/dev/null |
              awk '$1 ~ /^[0-9]+$/ {print $3}'; }
raw_run()     { uct_lat "$build" "$1"; }
raw_imm_run() { TM_FLOOR_IMM=1 uct_lat "$floor" "$1"; }
layer_run()   { proto_lat "$build" "$1"; }
floor_run()   { proto_lat "$floor" "$1"; }

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
impls=(raw raw_imm layer floor)
for r in $(seq 1 "$rounds"); do
    for size in ${SIZES:-8 1024}; do
        for k in 0 1 2 3; do # the order rotates from round to round
            impl=${impls[$(( (r + k) % 4 ))]}
            echo "$r $size $impl $("${impl}_run" "$size")" >>"$raw"
        done
    done
done
python3 - "$raw" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 4]
impls = ("raw", "raw_imm", "layer", "floor")
print("# one-way latency (us) over %d rounds: minimum, 10th/25th percentile (the host's fast "
      "regime), median; ratios to raw" % len({r[0] for r in rows}))
for size in sorted({int(r[1]) for r in rows}):
    v = {i: {r[0]: float(r[3]) for r in rows if int(r[1]) == size and r[2] == i} for i in impls}
    def q(i, f):
        x = sorted(v[i].values())
        return x[int(f * (len(x) - 1))]
    print("size %d" % size)
    print("  %-8s %7s %7s %7s %7s   %-9s %-9s %-9s" %
          ("", "min", "p10", "p25", "median", "/raw med", "per round", "at p10"))
    for i in impls:
        if not v[i]:
            continue
        per = [v[i][k] / v["raw"][k] for k in v[i] if k in v["raw"]]
        print("  %-8s %7.3f %7.3f %7.3f %7.3f   %-9.3f %-9.3f %-9.3f" %
              (i, q(i, 0), q(i, 0.1), q(i, 0.25), statistics.median(v[i].values()),
               statistics.median(v[i].values()) / statistics.median(v["raw"].values()),
               statistics.median(per), q(i, 0.1) / q("raw", 0.1)))
PY
