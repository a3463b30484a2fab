# Sourced by the contrib/bench_*.sh scripts: source and build directories, rounds, the UCX
# reference transports and the output directory. Usage: source bench_common.sh NAME "$@"
# (NAME: the output subdirectory, BUILD_DIR/NAME unless OUT is set).
bench_name=$1
shift
src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-${BUILD_DIR:-$src_dir/build}}
build_dir=$(cd "$build_dir" && pwd)
rounds=${ROUNDS:-5}
# The UCX the build was configured against (--with-ucx): its ucx_perftest is
# the reference, and its libraries are what every process loads.
ucx_bindir=$(sed -n 's/^UCX_BINDIR = //p' "$build_dir/Makefile" 2>/dev/null)
ucx_libdir=$(sed -n 's/^UCX_LIBDIR = //p' "$build_dir/Makefile" 2>/dev/null)
if [ -n "$ucx_bindir" ]; then
    export PATH="$ucx_bindir:$PATH"
    export LD_LIBRARY_PATH="$ucx_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
ucx_version=$(sed -n 's/^UCX_VERSION = //p' "$build_dir/Makefile" 2>/dev/null)
peer=${UCX_PEER:-posix,cma,self}
out=${OUT:-$build_dir/$bench_name}
mkdir -p "$out"
raw=$out/raw.csv
revision=$(git -C "$src_dir" rev-parse -q --verify --short HEAD 2>/dev/null || echo unknown)
bench_start=$(date +%s)

# round_done R: progress line on stderr.
round_done() {
    echo "round $1/$rounds done ($(( $(date +%s) - bench_start )) s)" >&2
}
