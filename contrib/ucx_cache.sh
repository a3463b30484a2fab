#!/usr/bin/env bash
# Builds a UCX source tree once into a cache and prints its install prefix.
#
#   contrib/ucx_cache.sh TREE [TREE...]    one prefix per tree, in order
#
# TREE is a UCX source tree as a user has it: a checkout of openucx/ucx at a
# release tag, or `git archive v1.22.0 | tar -x` of one. The tree is copied
# into the cache and built there (the user's tree is not touched), with UCX's
# own release settings (contrib/configure-release: no logging, assertions or
# parameter checks — what sites run) plus --enable-mt as distributions build
# it, and only the transports this machine can use (shared memory, CMA, TCP).
# The cache key is the release and a hash of the tree's contents, so a tree
# edited in place builds again. Next to the install, internal/ keeps the
# tree's headers and the build's config.h: contrib/ucx_layout.sh reads UCX's
# private layouts off them.
#
#   UCX_CACHE     the cache directory (default ~/.cache/uct-tm/ucx)
#   UCX_JOBS      make -j (default: nproc)
#   UCX_FLAVOR    release (default) or checked: UCX's plain configure, which
#                 keeps assertions and parameter checks on as distributions
#                 such as Debian ship it, so that UCP's own checks guard what
#                 uct-tm does under it; cached apart from the release build
#
# Nothing here is part of uct-tm: the cache holds only builds of trees the
# user pointed at.
set -euo pipefail

cache=${UCX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/uct-tm/ucx}
jobs=${UCX_JOBS:-$(nproc)}
flavor=${UCX_FLAVOR:-release}
case $flavor in
release) configure=../contrib/configure-release tag= ;;
checked) configure=../configure tag=-checked ;;
*) echo "ucx_cache: UCX_FLAVOR=$flavor: release or checked" >&2; exit 2 ;;
esac

. "$(dirname "$0")/ucx_tree.sh"

build_one() {
    local tree release key dir log
    tree=$(cd "$1" && pwd)
    [[ -f "$tree/configure.ac" && -d "$tree/src/uct" ]] ||
        { echo "ucx_cache: $1 is not a UCX source tree (no configure.ac, src/uct)" >&2; return 1; }
    release=$(ucx_release "$tree") ||
        { echo "ucx_cache: cannot read the UCX release from $tree/configure.ac" >&2; return 1; }
    key="$release$tag-$(tree_hash "$tree")"
    dir="$cache/$key"
    if [[ -f "$dir/.built" && -f "$dir/internal/config.h" ]]; then
        echo "$dir/install"
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    log="$dir/build.log"
    echo "ucx_cache: building UCX $release ($flavor) from $tree into $dir (log: $log)" >&2
    cp -a "$tree" "$dir/src"
    rm -rf "$dir/src/.git"
    if ! (cd "$dir/src" && ./autogen.sh && mkdir -p build && cd build &&
          "$configure" --prefix="$dir/install" --enable-mt \
              --without-java --without-go --disable-doxygen-doc \
              --without-cuda --without-rocm --without-verbs --without-rdmacm \
              --without-knem --without-xpmem --without-ugni --without-ze \
              --disable-static &&
          make -j"$jobs" && make install) >"$log" 2>&1; then
        echo "ucx_cache: UCX $release failed to build; the end of $log:" >&2
        tail -20 "$log" >&2
        return 1
    fi
    # Keep the private headers (and the configuration they depend on), not
    # the objects: the cache stays small.
    mkdir -p "$dir/internal"
    (cd "$dir/src" && find src -name '*.h' -o -name '*.inl' | xargs cp --parents -t "$dir/internal") &&
        cp "$dir/src/build/config.h" "$dir/internal/config.h"
    rm -rf "$dir/src"
    touch "$dir/.built"
    echo "$dir/install"
}

[[ $# -ge 1 ]] || { sed -n '2,21p' "$0" >&2; exit 2; }
for tree in "$@"; do
    build_one "$tree"
done
