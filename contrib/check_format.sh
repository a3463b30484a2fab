#!/usr/bin/env bash
# Checks that the C/C++ lines changed since a base are formatted as .clang-format
# says: the tree as a whole is not (it predates the file), so only the changed
# lines are held to it. Prints what clang-format would change and fails if
# anything. Usage: contrib/check_format.sh [base]
#   base  a commit; default FORMAT_BASE, else the merge-base with origin/main,
#         else (no origin/main, or HEAD is on it) HEAD~1: the newest commit
# The working tree is compared with the base: uncommitted edits count too.
# Needs clang-format and clang-format-diff (Debian: clang-format, contrib/deps.sh).
# Exit status 77 when there is nothing to compare with (no git checkout, no base).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "check_format: not a git checkout: nothing to compare with, skipped"
    exit 77
fi
base=${1:-${FORMAT_BASE:-}}
if [[ -z $base ]]; then
    head=$(git rev-parse HEAD)
    if git rev-parse -q --verify origin/main >/dev/null &&
        base=$(git merge-base HEAD origin/main) && [[ $base != "$head" ]]; then
        :
    elif git rev-parse -q --verify HEAD~1 >/dev/null; then
        base=HEAD~1
    else
        echo "check_format: no base (no origin/main, no HEAD~1): nothing to check, skipped"
        exit 77
    fi
fi

format_diff=
for c in clang-format-diff clang-format-diff-14 /usr/share/clang/clang-format-14/clang-format-diff.py; do
    if command -v "$c" >/dev/null; then
        format_diff=$c
        break
    fi
done
binary=$(command -v clang-format || command -v clang-format-14 || true)
if [[ -z $format_diff || -z $binary ]]; then
    echo "check_format: clang-format or clang-format-diff missing (contrib/deps.sh installs them)" >&2
    exit 2
fi

files=(-- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp')
echo "check_format: lines changed since $(git rev-parse --short "$base"), $(git diff --name-only "$base" "${files[@]}" | wc -l) files"
# clang-format-diff exits 0 either way: what it prints is the verdict.
out=$(git diff -U0 --no-color --no-ext-diff "$base" "${files[@]}" |
    python3 "$(command -v "$format_diff")" -p1 -binary "$binary")
if [[ -n $out ]]; then
    printf '%s\n' "$out"
    echo "check_format: the lines above are not formatted as .clang-format says;" \
         "to fix them: git diff -U0 $base | $format_diff -p1 -i" >&2
    exit 1
fi
echo "check_format: ok"
