#!/usr/bin/env bash
# Protocol layer vs raw UCT vs UCP, interleaved rounds (docs/perf.md "Protocol layer").
#   proto: tm_proto_perf -u over tm_sm, receives offloaded to tm_sm's tag list (the default),
#          requests in the program's memory (UCT_TM_PROTO_OP_USER_REQUEST, as UCP's
#          UCP_OP_ATTR_FIELD_REQUEST); PROTO_ARGS= (empty) measures handles instead
#   sw:    the same with UCX_TM_PROTO_OFFLOAD=n (our matcher, data over AM)
#   uct:   tm_perftest over tm_sm (the UCT tag API driven directly)
#   ucp:   ucx_perftest over UCX_PEER (default posix,cma,self)
# Usage: contrib/bench_proto.sh [build-dir]; ROUNDS (default 5), QUICK=1 for a short check,
# OUT=dir keeps the raw per-round figures (bench_proto.raw: round test size impl lat_us MBps).
# Prints the median over rounds of: one-way latency (us, each tool's median) and bandwidth (MB/s).
set -euo pipefail

src_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-${BUILD_DIR:-$src_dir/build}}" && pwd)
rounds=${ROUNDS:-5}
peer=${UCX_PEER:-posix,cma,self}
proto_args=${PROTO_ARGS--u}
proto=$build_dir/src/tools/tm_proto_perf
uct=$build_dir/src/tools/tm_perftest
command -v ucx_perftest >/dev/null || { echo "bench_proto.sh: ucx_perftest missing (apt-get install ucx-utils)" >&2; exit 2; }
for t in "$proto" "$uct"; do
    [ -x "$t" ] || { echo "bench_proto.sh: $t not built (contrib/build.sh)" >&2; exit 2; }
done
if [ "${QUICK:-0}" = 1 ]; then n_lat=5000 n_bw=200; else n_lat=100000 n_bw=2000; fi
cases=("tag_lat 8 $n_lat" "tag_lat 1024 $n_lat" "tag_lat 65536 $((n_lat / 10))"
       "tag_lat 1048576 $((n_bw / 2))" "tag_bw 65536 $n_bw" "tag_bw 1048576 $n_bw")

ucp_run() { # test size iters -> "lat_us MBps"
    local port line
    port=$((20000 + RANDOM % 20000))
    UCX_TLS=$peer ucx_perftest -p "$port" -t "$1" -s "$2" -n "$3" >/dev/null 2>&1 &
    local server=$!
    line=
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        line=$(UCX_TLS=$peer timeout 300 ucx_perftest 127.0.0.1 -p "$port" -t "$1" -s "$2" -n "$3" \
               2>/dev/null | grep '^Final:' || true)
        [ -n "$line" ] && break
    done
    wait "$server" 2>/dev/null || true
    # Final: iters lat50 lat_avg lat_overall bw_avg(MiB/s) bw_overall rate_avg rate_overall
    [ -n "$line" ] && echo "$line" | awk '{printf "%s %.1f\n", $3, $7 * 1.048576}' || echo "nan nan"
}
uct_run() {
    "$uct" -t "$1" -s "$2" -n "$3" --no-header 2>/dev/null | awk 'NF == 6 {print $3, $6}'
}
sw_run() { UCX_TM_PROTO_OFFLOAD=n proto_run "$@"; }
proto_run() {
    "$proto" $proto_args -t "$1" -s "$2" -n "$3" 2>/dev/null |
        awk -v t="$1" '$1 ~ /^[0-9]+$/ {if (t == "tag_lat") print $3, "nan"; else print "nan", $3}'
}

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
impls=(proto sw uct ucp)
for r in $(seq 1 "$rounds"); do
    for c in "${cases[@]}"; do
        set -- $c
        # the order rotates from round to round: no tool always runs right
        # after the same other one (or first after a size change)
        for k in 0 1 2 3; do
            impl=${impls[$(( (r + k) % 4 ))]}
            read -r lat bw < <("${impl}_run" "$1" "$2" "$3")
            echo "$r $1 $2 $impl $lat $bw" >>"$raw"
        done
    done
done
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT" && cp "$raw" "$OUT/bench_proto.raw"; fi
python3 - "$raw" "$rounds" "$peer" "$src_dir/contrib" <<'PY'
import statistics, sys
raw, rounds, peer = sys.argv[1:4]
sys.path.insert(0, sys.argv[4])
from bench_stats import regime_cell
# round test size impl lat_us MBps
rows = [l.split() for l in open(raw) if l.strip()]
impls = ("proto", "sw", "uct", "ucp")
pairs = (("proto", "uct"), ("sw", "uct"), ("proto", "ucp"), ("sw", "ucp"))
def fig(r, col):
    try:
        x = float(r[col])
    except ValueError:
        return None
    return x if x == x and x > 0 else None
print("# median of %s rounds; tag_lat: one-way us (each tool's median), lower is better; "
      "tag_bw: MB/s, higher is better; ucp over %s" % (rounds, peer))
print("# ratios: of the medians, then [the median of the per-round ratios: runs back to back "
      "share the host's regime more often]")
print("%-8s %8s %9s %9s %9s %9s  %s" % ("test", "size", *impls, "  ".join("%-16s" % ("%s/%s" % p) for p in pairs)))
cases = []
for r in rows:
    if (r[1], r[2]) not in cases:
        cases.append((r[1], r[2]))
notes = []
for test, size in cases:
    col = 4 if test == "tag_lat" else 5
    v = {i: {} for i in impls}
    for r in rows:
        x = fig(r, col)
        if r[1] == test and r[2] == size and x is not None:
            v[r[3]][r[0]] = x
    med = {i: statistics.median(v[i].values()) if v[i] else float("nan") for i in impls}
    cells = []
    for a, b in pairs:
        pr = [v[a][k] / v[b][k] for k in v[a] if k in v[b]]
        cells.append("%-16s" % ("%.2f [%.2f]" % (med[a] / med[b], statistics.median(pr)) if pr else "-"))
    def fmt(x):
        return "%.3f" % x if x < 10 else "%.1f" % x
    print("%-8s %8s %9s %9s %9s %9s  %s" % (test, size, *(fmt(med[i]) for i in impls), "  ".join(cells)))
    better = "lower" if test == "tag_lat" else "higher"
    for a, b in (("proto", "uct"), ("proto", "ucp")):
        cell = regime_cell(list(v[b].values()), list(v[a].values()), better)
        if cell not in ("one regime", "-"):
            notes.append("#   %s %s %s/%s per regime: %s" % (test, size, a, b, cell))
if notes:
    print("# rounds in two regimes (contrib/bench_stats.py):")
    print("\n".join(notes))
PY
