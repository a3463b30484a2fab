#!/usr/bin/env bash
# Curves: tm_sm (tm_perftest) and UCX (ucx_perftest over UCX_PEER) from 8 B
# to 4 MiB, each size measured back to back, with tm_perftest -t line_lat at
# each size (no transport: a flag line -- the floor at 8 B -- after two plain
# copies through shared memory above 8 B, a reference for how the host moves
# copied data between the cores); and tm_sm latency against the depth of
# posted receives. Writes CSV and, through contrib/plot_perftest.py,
# PNG plots.
#
# Usage: contrib/sweep_sm.sh [BUILD_DIR]     (OUT, UCX_PEER, SIZES, DEPTHS, ROUNDS)
#
# The UCX compared with is the one the build was configured against (--with-ucx, e.g. a
# release build from contrib/ucx_cache.sh): its ucx_perftest and libraries (bench_common.sh).
set -euo pipefail
ROUNDS=${ROUNDS:-3}
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh" sweep_sm "$@"
sizes=${SIZES:-8 64 512 4096 32768 262144 1048576 4194304}
depths=${DEPTHS:-0 16 256 4096 65536}
tm=$build_dir/src/tools/tm_perftest
csv=$out/sweep.csv
echo "round,test,impl,size,depth,lat_us,msg_rate,MBps" >"$csv"

ucx_run() { # test size -> "lat rate MBps"
    local port=$((20000 + RANDOM % 20000)) line iters
    iters=$(( $2 >= 1048576 ? 1000 : ($2 >= 65536 ? 10000 : 100000) ))
    UCX_TLS=$peer ucx_perftest -p "$port" -t "$1" -s "$2" -n "$iters" >/dev/null 2>&1 &
    local server=$!
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        line=$(UCX_TLS=$peer timeout 300 ucx_perftest 127.0.0.1 -p "$port" -t "$1" -s "$2" \
               -n "$iters" 2>/dev/null | grep '^Final:' || true)
        [ -n "$line" ] && break
    done
    wait "$server" 2>/dev/null || true
    [ -n "$line" ] && echo "$line" | awk '{printf "%s %s %.1f\n", $3, $9, $7 * 1.048576}' || echo "nan nan nan"
}
tm_run() { # test size depth -> "lat rate MBps"
    local iters=$(( $2 >= 1048576 ? 1000 : ($2 >= 65536 ? 10000 : 100000) )) line
    # the depth's receives stay posted in tm_sm's tag list (TAG_LIST_SIZE, 1024 by default)
    line=$(UCX_TM_SM_TAG_LIST_SIZE=$(( $3 + 1024 )) "$tm" -t "$1" -s "$2" -n "$iters" -D "$3" \
           --no-header 2>/dev/null | awk 'NF == 6 {print $3, $5, $6}' || true)
    echo "${line:-nan nan nan}"
}

for r in $(seq 1 "$rounds"); do
    for test in tag_lat tag_bw; do
        for size in $sizes; do
            read -r l m b < <(ucx_run "$test" "$size"); echo "$r,$test,ucx,$size,0,$l,$m,$b" >>"$csv"
            read -r l m b < <(tm_run "$test" "$size" 0); echo "$r,$test,tm_sm,$size,0,$l,$m,$b" >>"$csv"
            if [ "$test" = tag_lat ]; then # the host's reference in the same round
                read -r l m b < <(tm_run line_lat "$size" 0); echo "$r,$test,line_lat,$size,0,$l,$m,$b" >>"$csv"
            fi
        done
    done
    for depth in $depths; do
        read -r l m b < <(tm_run tag_lat 8 "$depth"); echo "$r,tag_lat_depth,tm_sm,8,$depth,$l,$m,$b" >>"$csv"
    done
    echo "round $r/$rounds done" >&2
done
"$src_dir/contrib/plot_perftest.py" "$csv" "$out" "$peer"
