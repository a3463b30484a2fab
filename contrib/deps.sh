#!/usr/bin/env bash
# Installs the Debian 12 packages uct-tm builds, tests and benchmarks with.
# Idempotent: apt runs only when something is missing. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
    build-essential autoconf automake libtool pkg-config python3
    libucx-dev ucx-utils          # libucs/libuct/libucp and the UCT headers, ucx_info, ucx_perftest
    openmpi-bin libopenmpi-dev    # integration tests: mpirun, mpicc (pml ucx over tm_sm)
    mpich libmpich-dev            # mpiexec.mpich, mpicc.mpich (ch4:ucx); mpicc, mpirun stay Open MPI's
    libhwloc-dev                  # topology
    libibverbs-dev                # rdma-core (optional transports)
    libfabric-dev libfabric-bin   # the libfabric provider tm (src/fabric) and fi_info; the .debs Build-Depend on libfabric-dev
    libgtest-dev libgmock-dev     # unit and conformance tests
    libbenchmark-dev              # Google Benchmark
    clang libclang-rt-14-dev      # libFuzzer targets, clang warning build
    clang-format                  # contrib/check_format.sh: clang-format, clang-format-diff
)
# CI's "packages" stage (contrib/packages.sh): the .debs and RPMs of the
# release tarball, built, linted, installed and purged.
if [[ "${CI:-}" == "true" || "${TM_FULL_CHECK:-}" == "1" ]]; then
    PACKAGES+=(dpkg-dev debhelper fakeroot lintian rpm)
    PACKAGES+=(gdb)   # a test that finds a process hung prints its threads' stacks
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
