#!/usr/bin/env bash
# Protocol layer vs raw UCT vs UCP, interleaved rounds (docs/perf.md "Protocol layer").
#   proto: tm_proto_perf over tm_sm, receives offloaded to tm_sm's tag list (the default)
#   sw:    the same with UCX_TM_PROTO_OFFLOAD=n (our matcher, data over AM)
#   uct:   tm_perftest over tm_sm (the UCT tag API driven directly)
#   ucp:   ucx_perftest over UCX_PEER (default posix,cma,self)
# Usage: contrib/bench_proto.sh [build-dir]; ROUNDS (default 5), QUICK=1 for a short check.
# Prints the median over rounds of: one-way latency (us, each tool's median) and bandwidth (MB/s).
set -euo pipefail

src_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-${BUILD_DIR:-$src_dir/build}}" && pwd)
rounds=${ROUNDS:-5}
peer=${UCX_PEER:-posix,cma,self}
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
    "$proto" -t "$1" -s "$2" -n "$3" 2>/dev/null |
        awk -v t="$1" '$1 ~ /^[0-9]+$/ {if (t == "tag_lat") print $3, "nan"; else print "nan", $3}'
}

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for r in $(seq 1 "$rounds"); do
    for c in "${cases[@]}"; do
        set -- $c
        for impl in proto sw uct ucp; do
            read -r lat bw < <("${impl}_run" "$1" "$2" "$3")
            echo "$1 $2 $impl $lat $bw" >>"$raw"
        done
    done
done
echo "# median of $rounds rounds; tag_lat: one-way us (each tool's median), lower is better; tag_bw: MB/s, higher is better; ucp over $peer"
printf "%-8s %9s %10s %10s %10s %10s %9s %9s %9s %9s\n" test size proto sw uct ucp \
    proto/uct sw/uct proto/ucp sw/ucp
for c in "${cases[@]}"; do
    set -- $c
    col=$([ "$1" = tag_lat ] && echo 4 || echo 5)
    med() { awk -v t="$1" -v s="$2" -v i="$3" -v c="$col" '$1 == t && $2 == s && $3 == i {print $c}' "$raw" |
            sort -g | awk '{v[NR] = $1} END {print (NR ? v[int((NR + 1) / 2)] : "nan")}'; }
    p=$(med "$1" "$2" proto) w=$(med "$1" "$2" sw) u=$(med "$1" "$2" uct) q=$(med "$1" "$2" ucp)
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}'; }
    printf "%-8s %9s %10s %10s %10s %10s %9s %9s %9s %9s\n" "$1" "$2" "$p" "$w" "$u" "$q" \
        "$(ratio "$p" "$u")" "$(ratio "$w" "$u")" "$(ratio "$p" "$q")" "$(ratio "$w" "$q")"
done
