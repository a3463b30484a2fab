#!/usr/bin/env bash
# Configures and builds uct-tm out of tree. Usage: contrib/build.sh [build-dir] [configure args...]
# Reconfigures only when the build system changed; idempotent.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
shift || true

cd "$src"
if [[ ! -x configure || configure.ac -nt configure || Makefile.am -nt configure ]]; then
    ./autogen.sh >/dev/null 2>&1 || ./autogen.sh
fi
mkdir -p "$build"
cd "$build"
if [[ ! -f Makefile || "$src/configure" -nt config.status ]]; then
    "$src/configure" --enable-werror "$@"
fi
make -j"$(nproc)" >/dev/null || make
