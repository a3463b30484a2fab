#!/usr/bin/env bash
# Builds libfabric's fabtests once into a cache and runs a few of them
# against the provider "tm" of a uct-tm build (docs/libfabric.md).
#
#   contrib/fabtests.sh BUILD_DIR [TEST...]
#   contrib/fabtests.sh BUILD_DIR --prefix   (builds them; prints where)
#
# BUILD_DIR is a configured and built uct-tm tree (its src/fabric/.libs holds
# libtm-fi.so). A TEST is a fabtests program with its options, one shell
# word ("fi_cq_data -e rdm"); the default is the list below (less the
# excluded ones, each with its reason). Unit tests
# (fi_*_test) run once, alone; the others run as a server and a client on
# this host, over FI_TM_DOMAIN (default tm_sm), with out-of-band address
# exchange (-E: the provider resolves no node names).
#
#   FABTESTS_SRC     libfabric's source: a source tree (its fabtests/ is
#                    built, whatever release it is), or a git repository or
#                    URL (the release FABTESTS_TAG is cloned from it); default
#                    LIBFABRIC_SRC, else GitHub
#   FABTESTS_TAG     the release whose fabtests to build (default v1.17.0,
#                    as Debian 12's libfabric)
#   FABTESTS_CACHE   where the build goes (default ~/.cache/uct-tm/fabtests)
#   FI_TM_DOMAIN     the domain (transport) to run over (default tm_sm)
#   FABTESTS_PROVIDER another provider to run instead (e.g. shm, for
#                    contrib/bench_fabtests.sh): no domain then
#   FABTESTS_TIMEOUT seconds each side may run (default 120)
#   FABTESTS_LIBFABRIC the libfabric prefix to build fabtests against
#                    (default: BUILD_DIR's --with-libfabric=PREFIX, else the
#                    prefix pkg-config names, else /usr)
#   FABTESTS_ARGS    more options for every test (e.g. "-v -S all": check
#                    the data of every size)
#
# The source is cloned and built in the cache, outside uct-tm's tree.
set -euo pipefail

build=${1:?usage: contrib/fabtests.sh BUILD_DIR [TEST...]}
shift
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
    tests=(fi_getinfo_test "fi_dom_test -n 2" fi_eq_test fi_cq_test fi_mr_test fi_cntr_test
        fi_rdm "fi_rdm -U" fi_rdm_tagged_peek "fi_cq_data -e rdm" "fi_av_xfer -e rdm"
        "fi_multi_ep -e rdm -v" "fi_recv_cancel -e rdm -V" "fi_unexpected_msg -e rdm -I 10"
        "fi_multi_recv -e rdm -I 5" "fi_bw -e rdm -v -T 1" "fi_bw -e rdm -v -T 1 -U"
        "fi_rdm_multi_client -C 10 -I 5" "fi_rdm_cntr_pingpong -I 5")
    for t in fi_rdm_pingpong fi_rdm_tagged_pingpong fi_rdm_tagged_bw; do
        tests+=("$t -I 5" "$t -v" "$t -v -U")
    done
    default=1
fi
# Left out of the default list (named on the command line they run), each
# with the reason it cannot pass:
declare -A excluded=(
    # its no_hints5 and src_dest1 cases want fi_getinfo("localhost", "9228")
    # to fill in a destination address: the provider resolves no node names
    # (a worker's address exists once its endpoint does; names go out of band)
    [fi_getinfo_test]="no node-name resolution (docs/libfabric.md, Limits)"
)
src=${FABTESTS_SRC:-${LIBFABRIC_SRC:-https://github.com/ofiwg/libfabric.git}}
tag=${FABTESTS_TAG:-v1.17.0}
from_tree=
if [ -d "$src/fabtests" ]; then # a source tree: cached under its path's checksum
    src=$(cd "$src" && pwd)
    tag=tree-$(cksum <<<"$src" | cut -d' ' -f1)
    from_tree=1
fi
cache=${FABTESTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uct-tm/fabtests}
prov=${FABTESTS_PROVIDER:-tm}
domain=${FI_TM_DOMAIN:-tm_sm}
where=(-p "$prov" -d "$domain")
if [ "$prov" != tm ]; then
    domain=$prov
    where=(-p "$prov")
fi
provdir=$(cd "$build/src/fabric/.libs" && pwd)
[ -f "$provdir/libtm-fi.so" ] || { echo "no libtm-fi.so in $provdir" >&2; exit 1; }

# fabtests run against the libfabric the provider was built for.
libfabric_prefix() {
    local arg
    arg=$(sed -n "s/^ac_cs_config=.*'--with-libfabric=\([^']*\)'.*/\1/p" "$build/config.status" 2>/dev/null || true)
    case "$arg" in
    /*) echo "$arg" ;;
    *) pkg-config --variable=prefix libfabric 2>/dev/null || echo /usr ;;
    esac
}
libfabric=${FABTESTS_LIBFABRIC:-$(libfabric_prefix)}

tree=$cache/libfabric-$tag
prefix=$cache/install-$tag
[ "$libfabric" = /usr ] || prefix=$prefix-$(tr / _ <<<"$libfabric")
if [ ! -x "$prefix/bin/fi_rdm_tagged_pingpong" ]; then
    mkdir -p "$cache"
    if [ -d "$tree" ]; then
        : # copied or cloned before, its build failed or was removed: build again
    elif [ -n "$from_tree" ]; then
        mkdir -p "$tree" && cp -a "$src/fabtests" "$tree/"
    else
        git -c advice.detachedHead=false clone --quiet --depth 1 --branch "$tag" "$src" "$tree"
    fi
    (cd "$tree/fabtests" && ./autogen.sh >/dev/null &&
        ./configure --quiet --prefix="$prefix" --with-libfabric="$libfabric" &&
        nice -n 19 make --quiet -j2 && make --quiet install) >"$cache/build-$tag.log" 2>&1 ||
        { echo "fabtests build failed: $cache/build-$tag.log" >&2; exit 1; }
fi
if [ "${tests[0]}" = --prefix ]; then
    echo "$prefix"
    exit 0
fi

# Waits (up to 10 s) until something listens on TCP port $1 or process $2
# is gone: the server takes the out-of-band connection there, so a probe
# connecting would be taken for the client.
wait_listen() {
    local hex i
    hex=$(printf ':%04X' "$1")
    for ((i = 0; i < 100; i++)); do
        awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
            /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || return 0
        sleep 0.1
    done
}

export FI_PROVIDER_PATH=$provdir FI_PROVIDER=$prov
status=0
passed=0
skipped=0
for line in "${tests[@]}"; do
    if [ -n "${default:-}" ] && [ -n "${excluded[$line]:-}" ]; then
        echo "EXCLUDED: $line: ${excluded[$line]}"
        skipped=$((skipped + 1))
        continue
    fi
    read -r -a cmd <<<"$line"
    t=${cmd[0]}
    log=$cache/$(tr ' ' '_' <<<"$line")
    if [[ $t == *_test ]]; then
        # unit tests take no address options and need no peer
        if timeout -k 5 "${FABTESTS_TIMEOUT:-120}" "$prefix/bin/$t" "${cmd[@]:1}" "${where[@]}" \
            ${FABTESTS_ARGS:-} >"$log.log" 2>&1; then
            echo "PASS: $line ($domain)"
            passed=$((passed + 1))
        else
            echo "FAIL: $line ($domain): $log.log"
            status=1
            tail -n 20 "$log.log"
        fi
        continue
    fi
    port=$((20000 + RANDOM % 20000))
    # fabtests drop the first character of -E's argument (the "=")
    common=("${cmd[@]:1}" "${where[@]}" -E="$port" ${FABTESTS_ARGS:-})
    # shm names its region after the source port: the client's must differ
    client=("${common[@]}")
    [ "$prov" = shm ] && client+=(-B $((port + 1)))
    timeout -k 5 "${FABTESTS_TIMEOUT:-120}" "$prefix/bin/$t" "${common[@]}" >"$log.server.log" 2>&1 &
    server=$!
    wait_listen "$port" "$server"
    if timeout -k 5 "${FABTESTS_TIMEOUT:-120}" "$prefix/bin/$t" "${client[@]}" 127.0.0.1 >"$log.client.log" 2>&1 &&
        wait "$server"; then
        echo "PASS: $line ($domain)"
        passed=$((passed + 1))
    else
        echo "FAIL: $line ($domain): $log.{server,client}.log"
        status=1
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
        tail -n 20 "$log.server.log" "$log.client.log"
    fi
done
echo "$passed of $((${#tests[@]} - skipped)) passed ($domain), $skipped excluded"
exit $status
