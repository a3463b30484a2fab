#!/usr/bin/env bash
# The provider tm against libfabric's shm provider, measured with fabtests'
# own benchmarks (docs/perf.md, "libfabric provider"), server and client on
# this host, the two providers interleaved in every round:
#   latency   fi_rdm_tagged_pingpong -S 8   (one-way, usec per transfer)
#   rate      fi_rdm_tagged_bw -S 8         (messages per second)
#   bandwidth fi_rdm_tagged_bw -S 1048576   (MB/s, 10^6 bytes)
# Prints each round's figures and ratios tm / shm, then the medians of the
# per-round ratios. Time only on a quiet machine.
#
#   contrib/bench_fabtests.sh BUILD_DIR
#
#   ROUNDS        rounds (default 5)
#   ITERS_SMALL   iterations of the 8 B runs (default 200000)
#   ITERS_LARGE   iterations of the 1 MiB run (default 2000)
#   FI_TM_DOMAIN  tm's domain (default tm_sm)
# fabtests come from contrib/fabtests.sh (built on first use, outside the tree).
set -euo pipefail

src_dir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: contrib/bench_fabtests.sh BUILD_DIR}" && pwd)
prefix=$("$src_dir/contrib/fabtests.sh" "$build" --prefix)
logs=$(dirname "$prefix") # where fabtests.sh keeps each run's output
rounds=${ROUNDS:-5}
small=${ITERS_SMALL:-200000}
large=${ITERS_LARGE:-2000}
domain=${FI_TM_DOMAIN:-tm_sm}
export FI_TM_DOMAIN=$domain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs fabtests line $2 ("program options...") for provider $1 through
# contrib/fabtests.sh (server and client here); prints the client's MB/s for
# its one size.
run() {
    FABTESTS_PROVIDER=$1 "$src_dir/contrib/fabtests.sh" "$build" "$2" >"$tmp/out" 2>&1 ||
        { cat "$tmp/out" >&2; return 1; }
    awk '$1 ~ /^[0-9]/ { mbps = $5 } END { print mbps }' "$logs/$(tr ' ' '_' <<<"$2").client.log"
}

echo "fabtests $(basename "$prefix"), tm over $domain, libfabric $(pkg-config --modversion libfabric 2>/dev/null || echo '?')"
echo "round  latency us (tm shm ratio)  rate M msg/s (tm shm ratio)  1 MiB MB/s (tm shm ratio)"
for r in $(seq "$rounds"); do
    line="$r"
    for bench in lat rate bw; do
        for prov in tm shm; do
            case $bench in
            lat) v=$(run $prov "fi_rdm_tagged_pingpong -S 8 -I $small") ;;
            rate) v=$(run $prov "fi_rdm_tagged_bw -S 8 -I $small") ;;
            bw) v=$(run $prov "fi_rdm_tagged_bw -S 1048576 -I $large") ;;
            esac
            eval "${bench}_$prov=$v"
        done
    done
    # MB/s of 8 B transfers: one-way latency 8 / MBps us, rate MBps / 8 M msg/s
    python3 - "$r" "$lat_tm" "$lat_shm" "$rate_tm" "$rate_shm" "$bw_tm" "$bw_shm" <<'EOF' | tee -a "$tmp/rounds"
import sys
r, lt, ls, rt, rs, bt, bs = sys.argv[1], *map(float, sys.argv[2:])
lat_t, lat_s, rate_t, rate_s = 8 / lt, 8 / ls, rt / 8, rs / 8
print(f"{r:>5}  {lat_t:.3f} {lat_s:.3f} {lat_t / lat_s:.2f}x"
      f"          {rate_t:.2f} {rate_s:.2f} {rate_t / rate_s:.2f}x"
      f"          {bt:.0f} {bs:.0f} {bt / bs:.2f}x")
EOF
done
python3 - "$tmp/rounds" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda k: statistics.median(float(r[k].rstrip("x")) for r in rows)
print(f"median of per-round ratios tm/shm: latency {med(3):.2f}x (goal <= 0.4), "
      f"rate {med(6):.2f}x (goal >= 5), 1 MiB bandwidth {med(9):.2f}x (goal >= 1.5)")
EOF
