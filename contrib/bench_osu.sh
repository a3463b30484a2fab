#!/usr/bin/env bash
# The OSU micro-benchmarks over MPI on UCX: tm_sm against UCX's own shared memory, interleaved.
#
#   contrib/bench_osu.sh --osu OSU_SRC [--ucx-prefix PREFIX]... [UCX_TREE]...
#
# Measures, per message size (1 B to 4 MiB), the ratio tm_sm / UCX shared memory of
#   osu_latency        2 ranks, one-way latency (us; lower is better)
#   osu_bw             2 ranks, streaming bandwidth (MB/s; higher is better)
#   osu_bibw           2 ranks, bidirectional bandwidth (MB/s; higher is better)
#   osu_mbw_mr-2       osu_mbw_mr with 2 ranks (1 pair), bandwidth and message rate (higher)
#   osu_mbw_mr-4       osu_mbw_mr with 4 ranks (2 pairs)
#   osu_multi_lat-4    osu_multi_lat with 4 ranks (2 pairs), latency (lower)
# over two MPIs on the same release-built UCX:
#   openmpi   Debian's Open MPI (mpirun.openmpi, pml ucx, btl self only, osc ^ucx)
#   mpich     Debian's MPICH (mpirun.mpich, ch4:ucx; MPIR_CVAR_NOLOCAL=1 so that ranks on this
#             host talk through UCX, not MPICH's own shared memory)
# Both MPIs are built against Debian's UCX and reach the release UCX through
# LD_LIBRARY_PATH=PREFIX/lib. The two sides of a comparison:
#   posix     UCX_TLS=$UCX_PEER (default posix,cma,self)
#   tm_sm     UCX_TLS=tm_sm,self with the uct-tm plugin loaded the release's way
#             (LD_PRELOAD before UCX 1.22, UCX_PLUGIN_PATH from 1.22)
# Each round runs every benchmark once over posix, then over tm_sm, back to back (the host's
# speed drifts within seconds, so only neighbours compare); the report gives per size the
# median over rounds of the per-round ratios tm_sm / posix, marked against the targets:
#   osu_latency        <= 1.0x, and <= 0.7x from 8 KiB
#   osu_bw, osu_mbw_mr >= 1.0x, and >= 1.5x from 8 KiB
#   osu_bibw           >= 1.0x
#   osu_multi_lat      <= 1.0x
#
# Arguments:
#   --osu OSU_SRC        an OSU micro-benchmarks source tree the user fetched (a release tarball
#                        or a checkout with its configure); built once per MPI in the work dir
#   UCX_TREE             a UCX source tree, built release-style by contrib/ucx_cache.sh
#   --ucx-prefix PREFIX  an already built UCX install (configure-release) instead
# uct-tm is configured --with-ucx=PREFIX and built in the work dir for each UCX.
#
# Environment:
#   ROUNDS       rounds (default 3; QUICK=1: 1)
#   QUICK=1      few iterations, a check of the script in a few minutes (not figures)
#   BENCHES      the benchmarks, from the names above (default all; osu_mbw_mr selects both)
#   MPIS         the MPIs (default "openmpi mpich")
#   SIZES        the sizes in the table and plots (default 1 2 4 ... 4194304; OSU runs all)
#   UCX_PEER     UCX_TLS of the reference (default posix,cma,self: the same transports on
#                every release; sm,self and shm,self work too, but from 1.22 pick sysv)
#   TM_ENV       VAR=VALUE settings, space-separated, for the tm_sm side only (a setting's
#                effect: one table with it, one without)
#   NOISE=1      run tm_sm twice per round (tm_sm, then tm_sm_again): summary.md adds, per
#                row, the range over sizes of the median tm_sm_again / tm_sm, the spread of
#                identical runs that a ratio above must exceed to mean anything
#   OSU_TIMEOUT  seconds per benchmark run before it counts as a hang (default 300; QUICK 120)
#   OSU_LAT_ITERS, OSU_MLAT_ITERS, OSU_BW_ITERS   OSU's options for osu_latency, osu_multi_lat
#                and the bandwidth tests (default "-x 200 -i 3000", "-x 100 -i 1000",
#                "-x 10 -i 60": a full run, 2 MPIs x 2 releases x 3 rounds, about 35 min here)
#   OSU_WORK     builds (default ~/.cache/uct-tm/osu)
#   OUT          the results (default OSU_WORK/results-DATE): raw.csv (every size of every
#                run), runs.csv (one line per run: exit status, seconds, log), ratios.csv,
#                summary.md, osu_*.png, logs/
#   UCX_JOBS     make -j (default: nproc)
# A run that exits non-zero or outlives OSU_TIMEOUT (killed: "hang") leaves its sizes without
# a figure, is listed under the table, and the rest go on; the exit status is then 1.
# Nothing of OSU or UCX is part of uct-tm: the work dir holds builds of trees the user named.
# The script pins nothing; the MPIs bind as they do by default (4 ranks oversubscribe 2 cores).
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
work=${OSU_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/uct-tm/osu}
quick=${QUICK:-0}
if [[ $quick == 1 ]]; then rounds=${ROUNDS:-1}; else rounds=${ROUNDS:-3}; fi
if [[ $quick == 1 ]]; then run_timeout=${OSU_TIMEOUT:-120}; else run_timeout=${OSU_TIMEOUT:-300}; fi
all_benches="osu_latency osu_bw osu_bibw osu_mbw_mr-2 osu_mbw_mr-4 osu_multi_lat-4"
mpis=${MPIS:-openmpi mpich}
sizes=${SIZES:-$(for ((s = 1; s <= 4194304; s *= 2)); do printf '%d ' $s; done)}
peer=${UCX_PEER:-posix,cma,self}
impls="posix tm_sm"
[[ ${NOISE:-0} == 1 ]] && impls="posix tm_sm tm_sm_again"
jobs=${UCX_JOBS:-$(nproc)}
python=/usr/bin/python3

log() { echo "bench_osu: $*" >&2; }
die() { log "$*"; exit 2; }
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" >&2; exit 2; }

# ---- arguments and tools -----------------------------------------------------------------
osu_src="" ucx_trees=() ucx_prefixes=()
while (($#)); do
    case $1 in
    --osu) osu_src=${2:?--osu OSU_SRC}; shift 2 ;;
    --ucx-prefix) ucx_prefixes+=("${2:?--ucx-prefix PREFIX}"); shift 2 ;;
    -h | --help) usage ;;
    -*) log "unknown option $1"; usage ;;
    *) ucx_trees+=("$1"); shift ;;
    esac
done
[[ -n $osu_src ]] || { log "--osu OSU_SRC is required"; usage; }
((${#ucx_trees[@]} + ${#ucx_prefixes[@]})) || { log "name at least one UCX"; usage; }
osu_src=$(cd "$osu_src" && pwd) || die "--osu: no directory $osu_src"
[[ -x $osu_src/configure && -d $osu_src/mpi/pt2pt ]] ||
    die "$osu_src is not an OSU micro-benchmarks tree (no configure, mpi/pt2pt)"

benches=""
for b in $all_benches; do
    for want in ${BENCHES:-$all_benches}; do
        [[ $b == "$want" || $b == "$want"-* ]] && { benches+=" $b"; break; }
    done
done
[[ -n $benches ]] || die "BENCHES=$BENCHES: none of $all_benches"

# check_tools: every tool the run needs, before hours are spent.
check_tools() {
    local t m missing=()
    for t in timeout make gcc "$python"; do command -v "$t" >/dev/null || missing+=("$t"); done
    for m in $mpis; do
        case $m in
        openmpi) for t in mpirun.openmpi mpicc.openmpi mpicxx.openmpi ompi_info; do
                command -v "$t" >/dev/null ||
                    missing+=("$t (apt-get install openmpi-bin libopenmpi-dev)")
            done ;;
        mpich) for t in mpirun.mpich mpicc.mpich mpicxx.mpich; do
                command -v "$t" >/dev/null || missing+=("$t (apt-get install mpich libmpich-dev)")
            done ;;
        *) die "MPIS=$mpis: openmpi or mpich, not $m" ;;
        esac
    done
    if ! "$python" -c 'import matplotlib' 2>/dev/null; then
        # as contrib/plot_perftest.py does: Debian's package, installed on demand as root
        [[ $(id -u) == 0 ]] && apt-get install -y -qq python3-matplotlib >/dev/null 2>&1
        "$python" -c 'import matplotlib' 2>/dev/null ||
            missing+=("matplotlib for $python (apt-get install python3-matplotlib)")
    fi
    ((${#missing[@]} == 0)) && return 0
    printf 'bench_osu: missing: %s\n' "${missing[@]}" >&2
    exit 2
}
check_tools

# shellcheck disable=SC1091 # tree_hash
. "$src/contrib/ucx_tree.sh"

# ---- builds ------------------------------------------------------------------------------------
# prefix_release PREFIX -> 1.22.0, from the install's ucx_info
prefix_release() {
    LD_LIBRARY_PATH="$1/lib" "$1/bin/ucx_info" -v 2>/dev/null |
        sed -n 's/^# \(Library version:\|Version\) *\([0-9.]*\).*/\2/p' | head -1
}

at_least_1_22() { # RELEASE
    local major=${1%%.*} rest=${1#*.}
    ((major > 1 || ${rest%%.*} >= 22))
}

# build_uct_tm PREFIX RELEASE -> the plugin's path; uct-tm configured against PREFIX, in the
# work dir (the ABI is chosen at build time); make runs every time, so edits are picked up.
build_uct_tm() {
    local prefix=$1 release=$2 b blog
    b=$work/uct-tm/$release-$(echo "$prefix" | sha1sum | cut -c1-8)
    blog=$b.log
    [[ -x $src/configure ]] || (cd "$src" && ./autogen.sh >/dev/null 2>&1)
    mkdir -p "$b"
    log "UCX $release ($prefix): building uct-tm in $b (log: $blog)"
    (cd "$b" && { [[ -f Makefile ]] || "$src/configure" --with-ucx="$prefix" --without-fuzzer; } &&
        make -j"$jobs") >"$blog" 2>&1 ||
        { log "uct-tm failed to build against $prefix; the end of $blog:"; tail -20 "$blog" >&2
          return 1; }
    echo "$b/uct_tm/.libs/libuct_tm.so"
}

# build_osu MPI -> the directory holding that MPI's osu_* programs
build_osu() {
    local mpi=$1 b blog
    b=$work/$(basename "$osu_src")-$(tree_hash "$osu_src")/$mpi
    blog=$b.log
    if [[ ! -f $b/.built ]]; then
        log "building OSU ($osu_src) with mpicc.$mpi in $b (log: $blog)"
        rm -rf "$b" && mkdir -p "$b"
        # -fcommon: OSU before 5.7 defines globals in headers, which gcc 10 and later reject
        (cd "$b" && "$osu_src/configure" CC="mpicc.$mpi" CXX="mpicxx.$mpi" \
            CFLAGS="-O2 -fcommon" CXXFLAGS="-O2" && make -j"$jobs" -C mpi/pt2pt) >"$blog" 2>&1 ||
            { log "OSU failed to build with mpicc.$mpi; the end of $blog:"; tail -20 "$blog" >&2
              return 1; }
        touch "$b/.built"
    fi
    dirname "$(find "$b/mpi/pt2pt" -type f -name osu_latency -perm -u+x | head -1)"
}

# ---- runs ----------------------------------------------------------------------------------------
# Iterations (OSU's -x warm-up, -i timed; in OSU 5.x -i sets small and large sizes alike):
# 10-20 s per run here with 2 busy CPUs (4 ranks oversubscribe them: osu_multi_lat's
# ping-pongs wait for the scheduler, hence fewer), 1-5 s in QUICK mode.
if [[ $quick == 1 ]]; then
    lat_iters=${OSU_LAT_ITERS:--x 100 -i 1000} bw_iters=${OSU_BW_ITERS:--x 5 -i 10}
    mlat_iters=${OSU_MLAT_ITERS:--x 20 -i 200}
else
    lat_iters=${OSU_LAT_ITERS:--x 200 -i 3000} bw_iters=${OSU_BW_ITERS:--x 10 -i 60}
    mlat_iters=${OSU_MLAT_ITERS:--x 100 -i 1000}
fi

# impl_env RELEASE PLUGIN IMPL PREFIX MPI: the VAR=VALUE settings of the ranks of one side
impl_env() {
    local release=$1 plugin=$2 impl=$3 prefix=$4 mpi=$5
    echo "LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "UCX_WARN_UNUSED_ENV_VARS=n"
    [[ $mpi == mpich ]] && echo "MPIR_CVAR_NOLOCAL=1"
    if [[ $impl == posix ]]; then
        echo "UCX_TLS=$peer"
    else
        echo "UCX_TLS=tm_sm,self"
        if at_least_1_22 "$release"; then echo "UCX_PLUGIN_PATH=$(dirname "$plugin")"
        else echo "LD_PRELOAD=$plugin"; fi
        [[ -z ${TM_ENV:-} ]] || printf '%s\n' $TM_ENV
    fi
}

# launch MPI NP ENVFILE PROGRAM ARGS...: the program on NP ranks, the settings in ENVFILE
# given to the ranks only (not to mpirun), under the timeout.
launch() {
    local mpi=$1 np=$2 envfile=$3 var
    shift 3
    local -a cmd
    if [[ $mpi == openmpi ]]; then
        cmd=(mpirun.openmpi -np "$np" --allow-run-as-root --oversubscribe
             --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
             --mca btl self --mca osc '^ucx')
        while read -r var; do cmd+=(-x "$var"); done <"$envfile"
    else
        cmd=(mpirun.mpich -np "$np")
        while read -r var; do cmd+=(-genv "${var%%=*}" "${var#*=}"); done <"$envfile"
    fi
    echo "${cmd[*]} $*"
    timeout -k 10 "$run_timeout" "${cmd[@]}" "$@"
}

# run_case ROUND RELEASE PREFIX PLUGIN MPI OSU_DIR CASE IMPL: one benchmark run; appends its
# sizes to raw.csv and its outcome to runs.csv.
run_case() {
    local round=$1 release=$2 prefix=$3 plugin=$4 mpi=$5 dir=$6 case=$7 impl=$8
    local bench=${7%-*} np=2 iters=$bw_iters rc=0 t0 secs status name
    [[ $case == *-[0-9]* ]] && np=${case##*-}
    [[ $bench == osu_latency ]] && iters=$lat_iters
    [[ $bench == osu_multi_lat ]] && iters=$mlat_iters
    name=$release-$mpi-$case-r$round-$impl
    impl_env "$release" "$plugin" "$impl" "$prefix" "$mpi" >"$out/logs/$name.env"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # the iteration options are words
    launch "$mpi" "$np" "$out/logs/$name.env" "$dir/$bench" $iters >"$out/logs/$name.log" 2>&1 ||
        rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    case $rc in
    0) status=ok ;;
    124 | 137) status="hang (killed after ${run_timeout} s)"
        sleep 5 ;; # the MPI's daemons end the ranks after mpirun's end
    *) status="exit $rc" ;;
    esac
    # data lines: "size value [messages/s]" (osu_mbw_mr: MB/s, then the message rate)
    awk -v p="$release,$mpi,$case,$round,$impl" '/^[0-9]+[ \t]+[0-9.]+/ {print p "," $1 "," $2}' \
        "$out/logs/$name.log" >>"$out/raw.csv"
    echo "$release,$mpi,$case,$round,$impl,$rc,$status,$secs,logs/$name.log" >>"$out/runs.csv"
    [[ $status == ok ]] || log "$name: $status (log: $out/logs/$name.log)"
}

# ---- setup ---------------------------------------------------------------------------------------
out=${OUT:-$work/results-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/logs"
for tree in ${ucx_trees[@]+"${ucx_trees[@]}"}; do
    prefix=$("$src/contrib/ucx_cache.sh" "$tree") || die "cannot build UCX from $tree"
    ucx_prefixes+=("$prefix")
done
declare -a releases prefixes plugins
declare -A osu_dir
for prefix in "${ucx_prefixes[@]}"; do
    prefix=$(cd "$prefix" && pwd) || die "--ucx-prefix: no directory $prefix"
    [[ -x $prefix/bin/ucx_info && -d $prefix/lib ]] ||
        die "$prefix is not a UCX install (no bin/ucx_info)"
    release=$(prefix_release "$prefix")
    [[ -n $release ]] || die "cannot read the UCX release of $prefix (bin/ucx_info -v)"
    plugin=$(build_uct_tm "$prefix" "$release") || die "uct-tm does not build against UCX $release"
    releases+=("$release") prefixes+=("$prefix") plugins+=("$plugin")
done
for mpi in $mpis; do
    osu_dir[$mpi]=$(build_osu "$mpi") || die "OSU does not build with $mpi"
    [[ -d ${osu_dir[$mpi]} ]] || die "OSU built with $mpi, but no osu_latency in it"
done

# setup_notes: what ran: revision, OSU, and the libucp each MPI loads under each release
setup_notes() {
    local i mpi pml mode=""
    [[ $quick == 1 ]] && mode=", QUICK"
    echo "uct-tm $(git -C "$src" rev-parse -q --short HEAD 2>/dev/null || echo unknown)" \
        "($(git -C "$src" status --porcelain 2>/dev/null | grep -c . || true) files changed)," \
        "$(date -u '+%F %H:%M UTC'), $(nproc) CPUs, $rounds rounds$mode${TM_ENV:+, tm_sm with $TM_ENV}"
    echo "OSU $osu_src ($(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' \
        "$osu_src/configure.ac" 2>/dev/null | head -1)); osu_latency $lat_iters," \
        "osu_multi_lat $mlat_iters, bandwidth $bw_iters"
    for ((i = 0; i < ${#releases[@]}; i++)); do
        echo "UCX ${releases[i]}: ${prefixes[i]}; plugin ${plugins[i]}"
        for mpi in $mpis; do
            pml=${osu_dir[$mpi]}/osu_latency
            [[ $mpi == openmpi ]] &&
                pml=$(ompi_info --parsable --path pkglibdir | cut -d: -f3)/mca_pml_ucx.so
            echo "  $mpi loads $(LD_LIBRARY_PATH="${prefixes[i]}/lib" ldd "$pml" |
                awk '/libucp/ {print $3}')"
        done
    done
}
setup_notes | tee "$out/setup.txt" >&2

# ---- the rounds ----------------------------------------------------------------------------------
echo "release,mpi,case,round,impl,size,value" >"$out/raw.csv"
echo "release,mpi,case,round,impl,rc,status,seconds,log" >"$out/runs.csv"
start=$(date +%s)
log "$rounds rounds of:${benches} over ${mpis} on UCX ${releases[*]}; results in $out"
for ((r = 1; r <= rounds; r++)); do
    for ((i = 0; i < ${#releases[@]}; i++)); do
        for mpi in $mpis; do
            for case in $benches; do
                for impl in $impls; do
                    run_case "$r" "${releases[i]}" "${prefixes[i]}" "${plugins[i]}" "$mpi" \
                        "${osu_dir[$mpi]}" "$case" "$impl"
                done
            done
        done
    done
    el=$(($(date +%s) - start))
    log "round $r/$rounds done ($el s; all rounds: about $((el * rounds / r / 60 + 1)) min)"
done

# ---- the report ----------------------------------------------------------------------------------
"$python" - "$out" "$sizes" "$rounds" "$peer" <<'PY'
import csv, os, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

out, sizes, rounds, peer = sys.argv[1], [int(s) for s in sys.argv[2].split()], int(sys.argv[3]), \
    sys.argv[4]
raw = list(csv.DictReader(open(os.path.join(out, "raw.csv"))))
runs = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
KIB8 = 8192


def target(case, size):
    """(better, target ratio tm_sm / posix) of a case at a size."""
    bench = case.split("-")[0]
    if bench == "osu_latency":
        return "lower", 0.7 if size >= KIB8 else 1.0
    if bench == "osu_multi_lat":
        return "lower", 1.0
    if bench in ("osu_bw", "osu_mbw_mr"):
        return "higher", 1.5 if size >= KIB8 else 1.0
    return "higher", 1.0


def size_name(s):
    return "%d M" % (s >> 20) if s >= 1 << 20 else "%d K" % (s >> 10) if s >= 1024 else str(s)


def collect():
    """{(release, mpi, case): {size: [per-round ratios]}} and the row keys in run order."""
    vals, keys = {}, []
    for r in raw:
        key = (r["release"], r["mpi"], r["case"])
        try:
            v = float(r["value"])
        except ValueError:
            continue
        vals.setdefault(key, {}).setdefault((int(r["size"]), r["round"]), {})[r["impl"]] = v
    for r in runs:
        key = (r["release"], r["mpi"], r["case"])
        if key not in keys:
            keys.append(key)
    ratios, again = {}, {}
    for key, per in vals.items():
        for (size, _), v in per.items():
            if v.get("posix", 0) > 0 and "tm_sm" in v:
                ratios.setdefault(key, {}).setdefault(size, []).append(v["tm_sm"] / v["posix"])
            if v.get("tm_sm", 0) > 0 and "tm_sm_again" in v:
                again.setdefault(key, {}).setdefault(size, []).append(v["tm_sm_again"] / v["tm_sm"])
    return ratios, again, keys


def row_order(key):
    """Rows by benchmark, then MPI, then release."""
    return key[2], key[1], key[0]


def noise(again, keys):
    """Per row, the range over sizes of the median tm_sm_again / tm_sm (NOISE=1)."""
    lines = []
    for key in sorted(keys, key=row_order):
        meds = [statistics.median(rs) for s, rs in again.get(key, {}).items() if s in sizes]
        if meds:
            lines.append("- %s %s UCX %s: %.2f-%.2fx" % (key[2], key[1], key[0], min(meds),
                                                          max(meds)))
    return lines


def failures(key):
    """The runs of a row that did not finish: ["tm_sm r2: hang (...)", ...]."""
    return ["%s r%s: %s" % (r["impl"], r["round"], r["status"]) for r in runs
            if (r["release"], r["mpi"], r["case"]) == key and r["status"] != "ok"]


def cell(case, size, rs, fails):
    if not rs:
        return ("**hang**" if any("hang" in f for f in fails) else
                "**fail**" if fails else "-"), None
    better, tgt = target(case, size)
    m = statistics.median(rs)
    ok = m <= tgt if better == "lower" else m >= tgt
    text = "%.2f" % m + ("✓" if ok else "✗")
    if not ok:
        text = "**%s**" % text
    if len(rs) < rounds:
        text += " (%d/%d)" % (len(rs), rounds)
    return text, ok


def table(ratios, keys):
    head = "| benchmark | MPI | UCX | " + " | ".join(size_name(s) for s in sizes) + " | met |"
    lines = [head, "|---|---|---|" + "---:|" * len(sizes) + "---|"]
    rows, notes, met, total = [], [], 0, 0
    for key in sorted(keys, key=row_order):
        cells, ok_n, n, fails = [], 0, 0, failures(key)
        for s in sizes:
            rs = ratios.get(key, {}).get(s, [])
            text, ok = cell(key[2], s, rs, fails)
            cells.append(text)
            rows.append(list(key) + [s, len(rs)] + (["%.4f" % statistics.median(rs),
                        "%.4f" % min(rs), "%.4f" % max(rs)] if rs else ["", "", ""]) +
                        ["%s %.1f" % (target(key[2], s)[0], target(key[2], s)[1]),
                         "" if ok is None else ("yes" if ok else "no")])
            if ok is not None:
                n, ok_n = n + 1, ok_n + ok
        if fails:
            notes.append("- %s %s UCX %s: %s" % (key[2], key[1], key[0], "; ".join(fails)))
        lines.append("| %s | %s | %s | %s | %s |" % (key[2], key[1], key[0], " | ".join(cells),
                     "%d/%d" % (ok_n, n) + (" FAIL" if fails else "")))
        met, total = met + ok_n, total + n
    return lines, rows, notes, met, total


def plot(ratios, keys):
    written = []
    for case in sorted({k[2] for k in keys}):
        fig, ax = plt.subplots(figsize=(8, 4.8))
        for key in [k for k in keys if k[2] == case]:
            per = ratios.get(key, {})
            xs = [s for s in sizes if per.get(s)]
            if xs:
                ax.plot(xs, [statistics.median(per[s]) for s in xs], marker="o",
                        label="%s, UCX %s" % (key[1], key[0]))
        better = target(case, 1)[0]
        ax.step(sizes, [target(case, s)[1] for s in sizes], where="post", color="grey",
                linestyle="--", label="target (%s is better)" % better)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % v))
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("tm_sm / %s (median of per-round ratios)" % peer)
        ax.set_title("%s: tm_sm against UCX shared memory" % case)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        written.append(os.path.join(out, case + ".png"))
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written


ratios, again, keys = collect()
lines, rows, notes, met, total = table(ratios, keys)
with open(os.path.join(out, "ratios.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["release", "mpi", "case", "size", "rounds", "median_ratio", "min_ratio",
                "max_ratio", "target", "met"])
    w.writerows(rows)
setup = open(os.path.join(out, "setup.txt")).read().strip().splitlines()
md = setup + ["", "Ratio tm_sm / `UCX_TLS=%s` per size: median over rounds of each round's "
              "ratio (the two run back to back). Latency: lower is better; bandwidth and "
              "message rate: higher. ✓ meets the target, **✗** misses it; (n/%d): rounds with "
              "a figure; -: none; hang, fail: no figure, a run hung or failed." % (peer, rounds),
              ""] + lines + [""]
md += ["Targets met: %d of %d cells." % (met, total), ""]
spread = noise(again, keys)
if spread:
    md += ["Identical runs (tm_sm_again / tm_sm, per size the median of the per-round ratios; "
           "the range over sizes):"] + spread + [""]
if notes:
    md += ["Runs that did not finish (their logs are in logs/):"] + notes + [""]
open(os.path.join(out, "summary.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
for p in plot(ratios, keys):
    print(p)
PY
log "raw figures: $out/raw.csv; runs: $out/runs.csv; ratios: $out/ratios.csv;" \
    "table: $out/summary.md; plots: $out/osu_*.png"
failed=$(tail -n +2 "$out/runs.csv" | grep -vc ',ok,' || true)
((failed == 0)) || { log "$failed runs failed or hung (listed in $out/summary.md)"; exit 1; }
