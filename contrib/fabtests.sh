#!/usr/bin/env bash
# Builds libfabric's fabtests once into a cache and runs a few of them
# against the provider "tm" of a uct-tm build (docs/fabric.md).
#
#   contrib/fabtests.sh BUILD_DIR [TEST...]
#
# BUILD_DIR is a configured and built uct-tm tree (its src/fabric/.libs holds
# libtm-fi.so). TESTs default to fi_rdm_tagged_pingpong and
# fi_rdm_tagged_peek; each runs as a server and a client on this host, over
# FI_TM_DOMAIN (default tm_sm), with out-of-band address exchange (-E: the
# provider resolves no node names).
#
#   LIBFABRIC_SRC    a git repository or URL of libfabric (default: GitHub)
#   FABTESTS_TAG     the release whose fabtests to build (default v1.17.0,
#                    as Debian 12's libfabric)
#   FABTESTS_CACHE   where the build goes (default ~/.cache/uct-tm/fabtests)
#   FI_TM_DOMAIN     the domain (transport) to run over (default tm_sm)
#   FABTESTS_TIMEOUT seconds each side may run (default 120)
#   FABTESTS_ARGS    more options for every test (e.g. "-v -S all": check
#                    the data of every size)
#
# The source is cloned and built in the cache, outside uct-tm's tree.
set -euo pipefail

build=${1:?usage: contrib/fabtests.sh BUILD_DIR [TEST...]}
shift
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(fi_rdm_tagged_pingpong fi_rdm_tagged_peek)
src=${LIBFABRIC_SRC:-https://github.com/ofiwg/libfabric.git}
tag=${FABTESTS_TAG:-v1.17.0}
cache=${FABTESTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uct-tm/fabtests}
domain=${FI_TM_DOMAIN:-tm_sm}
provdir=$(cd "$build/src/fabric/.libs" && pwd)
[ -f "$provdir/libtm-fi.so" ] || { echo "no libtm-fi.so in $provdir" >&2; exit 1; }

tree=$cache/libfabric-$tag
prefix=$cache/install-$tag
if [ ! -x "$prefix/bin/fi_rdm_tagged_pingpong" ]; then
    mkdir -p "$cache"
    [ -d "$tree" ] || git clone --quiet --depth 1 --branch "$tag" "$src" "$tree"
    (cd "$tree/fabtests" && ./autogen.sh >/dev/null &&
        ./configure --quiet --prefix="$prefix" --with-libfabric=/usr &&
        nice -n 19 make --quiet -j2 && make --quiet install) >"$cache/build-$tag.log" 2>&1 ||
        { echo "fabtests build failed: $cache/build-$tag.log" >&2; exit 1; }
fi

export FI_PROVIDER_PATH=$provdir FI_PROVIDER=tm
status=0
for t in "${tests[@]}"; do
    port=$((20000 + RANDOM % 20000))
    common=(-p tm -d "$domain" -E"$port" ${FABTESTS_ARGS:-})
    timeout "${FABTESTS_TIMEOUT:-120}" "$prefix/bin/$t" "${common[@]}" >"$cache/$t.server.log" 2>&1 &
    server=$!
    sleep 1
    if timeout "${FABTESTS_TIMEOUT:-120}" "$prefix/bin/$t" "${common[@]}" 127.0.0.1 >"$cache/$t.client.log" 2>&1 &&
        wait "$server"; then
        echo "PASS: $t ($domain)"
    else
        echo "FAIL: $t ($domain): $cache/$t.{server,client}.log"
        status=1
        kill "$server" 2>/dev/null || true
    fi
    cat "$cache/$t.client.log"
done
exit $status
