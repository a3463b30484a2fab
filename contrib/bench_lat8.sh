#!/usr/bin/env bash
# 8 B one-way latency against its floor and against a UCX built for release,
# interleaved, one row per round (docs/perf.md, "Where the 8 B time goes"):
#   floor      tm_perftest -t line_lat: one cache line between the two processes
#   old        (OLD set) OLD's tm_perftest tag_lat over tm_sm, this build's library
#   tm_sm      tm_perftest tag_lat over tm_sm (UCT tag API, receive posted one ahead)
#   tm_sm_rel  the same built against UCX_PREFIX (REL_BUILD)
#   am_lat     UCX_PREFIX's ucx_perftest am_lat over posix (UCT, untagged)
#   ucp_tm_sm  UCX_PREFIX's ucx_perftest tag_lat, UCX_TLS=tm_sm,self (REL_BUILD's plugin)
#   ucp_posix  the same over posix,cma,self
# Usage: contrib/bench_lat8.sh BUILD UCX_PREFIX REL_BUILD [ROUNDS]   (default 15)
#   UCX_PREFIX: a UCX built for release (contrib/ucx_cache.sh); REL_BUILD: uct-tm
#   configured --with-ucx=UCX_PREFIX. Server on CPU 1, client on CPU 0. Rows on stdout,
#   per-column medians and per-round ratio medians at the end.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
build=$(cd "$1" && pwd) ucx=$(cd "$2" && pwd) rel=$(cd "$3" && pwd) rounds=${4:-15}
old=${OLD:-}
uct_lat() { # BUILD TOOL [LD_LIBRARY_PATH prefix]
    LD_LIBRARY_PATH=$1/uct_tm/.libs:$1/src/proto/.libs${3:+:$3} LD_PRELOAD=$1/uct_tm/.libs/libuct_tm.so \
        "$2" -t tag_lat -s 8 -n 100000 -c 0,1 --no-header 2>/dev/null | awk 'NF == 6 {print $3}'
}
ucx_lat() { # "VAR=VALUE ..." ucx_perftest options: the client's average one-way latency
    local port=$((20000 + RANDOM % 20000)) vars=$1
    shift
    # shellcheck disable=SC2086 # $vars is a list of assignments
    env LD_LIBRARY_PATH="$ucx/lib" $vars taskset -c 1 "$ucx/bin/ucx_perftest" -p $port "$@" >/dev/null 2>&1 &
    sleep 0.3
    # shellcheck disable=SC2086
    env LD_LIBRARY_PATH="$ucx/lib" $vars taskset -c 0 timeout 60 "$ucx/bin/ucx_perftest" -p $port "$@" \
        -n 100000 127.0.0.1 2>/dev/null | awk '/^Final:/ {print $4}'
    wait || true
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "round floor old tm_sm tm_sm_rel am_lat ucp_tm_sm ucp_posix" | tee "$out"
for r in $(seq 1 "$rounds"); do
    f=$("$build/src/tools/tm_perftest" -t line_lat -c 0,1 -n 200000 --no-header | awk '{print $3}')
    o=-
    if [ $((r % 2)) = 1 ]; then
        [ -n "$old" ] && o=$(uct_lat "$build" "$old/src/tools/.libs/tm_perftest")
        n=$(uct_lat "$build" "$build/src/tools/.libs/tm_perftest")
    else
        n=$(uct_lat "$build" "$build/src/tools/.libs/tm_perftest")
        [ -n "$old" ] && o=$(uct_lat "$build" "$old/src/tools/.libs/tm_perftest")
    fi
    n2=$(uct_lat "$rel" "$rel/src/tools/.libs/tm_perftest" "$ucx/lib")
    a=$(ucx_lat "UCX_WARN_UNUSED_ENV_VARS=n" -t am_lat -x posix -d memory -s 8)
    tm="LD_PRELOAD=$rel/uct_tm/.libs/libuct_tm.so UCX_TLS=tm_sm,self"
    if [ $((r % 2)) = 1 ]; then
        t=$(ucx_lat "$tm" -t tag_lat -s 8); p=$(ucx_lat "UCX_TLS=posix,cma,self" -t tag_lat -s 8)
    else
        p=$(ucx_lat "UCX_TLS=posix,cma,self" -t tag_lat -s 8); t=$(ucx_lat "$tm" -t tag_lat -s 8)
    fi
    echo "$r $f $o $n $n2 ${a:--} ${t:--} ${p:--}" | tee -a "$out"
done
python3 - "$out" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
head, rows = rows[0], rows[1:]
col = {h: [float(r[i]) if r[i] != '-' else None for r in rows] for i, h in enumerate(head)}
for h in head[1:]:
    v = [x for x in col[h] if x is not None]
    if v:
        print(f"{h:10s} median {st.median(v):.3f} us [{min(v):.3f}-{max(v):.3f}]")
for a, b in [("tm_sm", "old"), ("tm_sm", "am_lat"), ("tm_sm_rel", "am_lat"), ("ucp_tm_sm", "ucp_posix"),
             ("tm_sm", "floor"), ("am_lat", "floor")]:
    r = sorted(x / y for x, y in zip(col[a], col[b]) if x and y)
    if len(r) >= 4:
        q = st.quantiles(r, n=4)
        print(f"{a}/{b}: per-round median {st.median(r):.2f} (quartiles {q[0]:.2f} / {q[2]:.2f})")
PY
