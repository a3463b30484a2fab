#!/usr/bin/env bash
# Reads the UCX-internal layout facts uct-tm mirrors off a UCX release's own
# headers, and checks them against uct-tm's compat header for that release.
#
#   contrib/ucx_layout.sh TREE            print the facts (static assertions)
#   contrib/ucx_layout.sh --check TREE    compare with uct_tm/compat/ucx_<M>_<m>.h;
#                                         exit 1 and show the difference if any
#
# TREE is a UCX source tree (see contrib/ucx_cache.sh, which builds it once:
# the facts depend on its configuration, e.g. statistics). The facts block of
# a compat header is this script's output, pasted between its
# "layout facts" markers when a release is added.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
check=no
if [[ "${1:-}" == "--check" ]]; then
    check=yes
    shift
fi
[[ $# -eq 1 ]] || { sed -n '2,13p' "$0" >&2; exit 2; }

prefix=$("$src/contrib/ucx_cache.sh" "$1")
entry=$(dirname "$prefix")
internal=$entry/internal
[[ -f "$internal/config.h" ]] || { echo "ucx_layout: no internal headers in $entry" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CXX:-g++} -std=c++17 -include "$internal/config.h" -I"$internal/src" -I"$prefix/include" \
    "$src/contrib/ucx_layout_probe.cc" -o "$tmp/probe"
"$tmp/probe" >"$tmp/facts"

if [[ $check == no ]]; then
    cat "$tmp/facts"
    exit 0
fi
release=$(sed -n 's#^/\* UCX \([0-9]*\)\.\([0-9]*\),.*#\1_\2#p' "$tmp/facts")
header=$src/uct_tm/compat/ucx_$release.h
[[ -f "$header" ]] || { echo "ucx_layout: no compat header $header for this release" >&2; exit 1; }
sed -n '/^\/\* ---- layout facts: begin/,/^\/\* ---- layout facts: end/p' "$header" |
    sed '1d;$d' >"$tmp/pinned"
if diff -u "$tmp/pinned" "$tmp/facts"; then
    echo "ucx_layout: $(basename "$header") matches UCX ${release/_/.}'s headers ($(grep -c static_assert "$tmp/facts") facts)"
else
    echo "ucx_layout: $(basename "$header") differs from UCX ${release/_/.}'s headers (above: - pinned, + read)" >&2
    exit 1
fi
