# Sourced by contrib/ucx_cache.sh and contrib/ucx_gtest.sh: facts of a UCX
# source tree as a user has it.

ucx_release() { # TREE -> 1.22.0, from configure.ac's version macros
    local ac=$1/configure.ac major minor patch
    major=$(sed -n 's/^define(\[ucx_ver_major\], \([0-9]*\)).*/\1/p' "$ac")
    minor=$(sed -n 's/^define(\[ucx_ver_minor\], \([0-9]*\)).*/\1/p' "$ac")
    patch=$(sed -n 's/^define(\[ucx_ver_patch\], \([0-9]*\)).*/\1/p' "$ac")
    [[ -n "$major" && -n "$minor" ]] || return 1
    echo "$major.$minor.${patch:-0}"
}

tree_hash() { # TREE -> a short hash of every file the build reads
    (cd "$1" && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z |
        xargs -0 sha1sum) | sha1sum | cut -c1-12
}
