#!/usr/bin/env bash
# Run the tag-matcher benchmarks (tests/bench/bench_matcher) and summarise them.
#
# Usage: contrib/bench_matcher.sh [BUILD_DIR] [extra Google Benchmark flags...]
#   BUILD_DIR  an out-of-tree build directory (default: $BUILD_DIR, else the
#              source tree's build/, as contrib/build.sh makes it); a relative
#              path is taken from the current directory, e.g. from the root:
#                contrib/bench_matcher.sh build
#                contrib/bench_matcher.sh /tmp/build --benchmark_filter=exact
# Environment:
#   BENCH_OUT       JSON result file (default: BUILD_DIR/bench_matcher.json)
#   BENCH_NO_BUILD  set to 1 to skip the `make` of src/match and tests/bench
#
# Prints a human summary (case x depth -> median ns per matched message, bytes
# per queued entry), then a markdown section for docs/perf.md. Times are CPU
# time (single thread): on a shared machine real time also counts preemption.
# Runs 7 cases x 6 depths x 3 repetitions and two memory probes: about 80 s on a
# 2-core machine.
set -euo pipefail

src_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$src_dir/build}
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    build_dir=$1
    shift
fi
if [ ! -d "$build_dir" ]; then
    echo "bench_matcher.sh: build directory '$build_dir' not found" >&2
    echo "  build one first: contrib/build.sh [BUILD_DIR]" >&2
    exit 2
fi
build_dir=$(cd "$build_dir" && pwd)
bench=$build_dir/tests/bench/bench_matcher
out=${BENCH_OUT:-$build_dir/bench_matcher.json}

if [ "${BENCH_NO_BUILD:-0}" != 1 ] && [ -f "$build_dir/tests/bench/Makefile" ]; then
    make -s -C "$build_dir/src/match" >&2
    make -s -C "$build_dir/tests/bench" bench_matcher >&2
fi
if [ ! -x "$bench" ]; then
    echo "bench_matcher.sh: $bench not built (make -C '$build_dir/tests/bench')" >&2
    exit 2
fi
command -v python3 >/dev/null || { echo "bench_matcher.sh: python3 is required" >&2; exit 2; }

echo "running $bench (3 repetitions, JSON to $out) ..." >&2
start=$(date +%s)
"$bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_format=json "$@" >"$out"
echo "done in $(( $(date +%s) - start )) s" >&2

revision=$(git -C "$src_dir" rev-parse -q --verify --short HEAD 2>/dev/null || echo unknown)

python3 - "$out" "$revision" <<'PY'
import json, re, sys

path, revision = sys.argv[1], sys.argv[2]
with open(path) as f:
    doc = json.load(f)
ctx = doc.get("context", {})

CASES = [  # (benchmark, short description, queue whose bytes are reported)
    ("exact_oldest", "exact random tags, arrive matches oldest (FIFO)", "posted"),
    ("exact_oldest_seq", "exact sequential tags, arrive matches oldest (FIFO)", "posted"),
    ("exact_newest", "exact tags, arrive matches newest", "posted"),
    ("mask4_oldest", "4 mask classes round-robin, FIFO", "posted"),
    ("unexp_post_oldest", "unexpected first, exact post takes oldest", "unexpected"),
    ("unexp_claim_mask", "unexpected, claim() mask 0xffffffff00000000", "unexpected"),
    ("exact_oldest_burst16", "exact random tags, FIFO; arrivals in bursts of 16 via arrive_batch(), "
     "posts one at a time", "posted"),
]
# Not the matcher: one random cache line in a 64 MiB array (latency, throughput).
MACHINE = ("machine_dependent_line", "machine_independent_line")
SCALE = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

def ns_of(b):
    return None if b is None else b["cpu_time"] * SCALE.get(b.get("time_unit", "ns"), 1.0)

res = {}  # (case, depth) -> dict
for b in doc.get("benchmarks", []):
    run = b.get("run_name", b["name"])
    m = re.match(r"BM_([A-Za-z0-9_]+)/depth:(\d+)", run)
    if not m:
        continue
    key = (m.group(1), int(m.group(2)))
    r = res.setdefault(key, {})
    if b.get("error_occurred"):
        r["error"] = b.get("error_message", "error")
        continue
    agg = b.get("aggregate_name")
    if agg is None and b.get("run_type") == "iteration":
        agg = "median"  # run without aggregates (e.g. 1 repetition)
    if agg in ("median", "cv"):
        r[agg] = b

line_ns = {k[0]: ns_of(r.get("median")) for k, r in res.items() if k[0] in MACHINE}
res = {k: r for k, r in res.items() if k[0] not in MACHINE}
depths = sorted({d for (_, d) in res})
cases = [c for c in CASES if any(k[0] == c[0] for k in res)]
known = {c[0] for c in CASES}
cases += [(n, n, "posted") for n in sorted({k[0] for k in res}) if n not in known]

def dname(d):
    if d >= 1 << 20 and d % (1 << 20) == 0:
        return "%d Mi" % (d >> 20)
    if d >= 1 << 10 and d % (1 << 10) == 0:
        return "%d Ki" % (d >> 10)
    return str(d)

def ns(case, depth):
    b = res.get((case, depth), {}).get("median")
    return None if b is None else b["cpu_time"] * SCALE.get(b.get("time_unit", "ns"), 1.0)

def real_ns(case, depth):
    b = res.get((case, depth), {}).get("median")
    return None if b is None else b["real_time"] * SCALE.get(b.get("time_unit", "ns"), 1.0)

def counter(case, depth, name, agg="median"):
    b = res.get((case, depth), {}).get(agg)
    return None if b is None else b.get(name)

def cell_ns(case, depth):
    r = res.get((case, depth))
    if r is None:
        return "-"
    if "error" in r:
        return "ERROR"
    v = ns(case, depth)
    return "-" if v is None else ("%.1f" % v if v < 1000 else "%.0f" % v)

def cell_bytes(case, queue, depth):
    v = counter(case, depth, "bytes_per_posted_recv" if queue == "posted" else "bytes_per_unexpected")
    if v is None:
        return "-"
    return "%.1f" % v if v < 1000 else "%.0f" % v

def table(header, rows, md):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    def line(cells):
        if md:
            return "| " + " | ".join(str(c) for c in cells) + " |"
        return "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(header)]
    out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|" if md
               else "  ".join("-" * w for w in widths))
    out += [line(r) for r in rows]
    return "\n".join(out)

hdr = ["case"] + [dname(d) for d in depths]
ns_rows = [[c] + [cell_ns(c, d) for d in depths] for c, _, _ in cases]
by_rows = [[c + (" (per posted recv)" if q == "posted" else " (per unexpected msg)")]
           + [cell_bytes(c, q, d) for d in depths] for c, _, q in cases]
empty = [counter(c, d, "bytes_empty_matcher") for c, _, _ in cases for d in depths]
empty = [v for v in empty if v is not None]
fixed_note = ("; an empty matcher holds %.0f bytes" % max(empty)) if empty else ""

# Health notes: errors, allocations or linear fallbacks while timed, noisy runs.
notes, busy = [], []
for (c, d), r in sorted(res.items()):
    if "error" in r:
        notes.append("%s depth %s: ERROR %s" % (c, dname(d), r["error"]))
        continue
    a = counter(c, d, "allocs_per_msg")
    if a:
        notes.append("%s depth %s: %.3g allocations per message while timed" % (c, dname(d), a))
    f = counter(c, d, "fallback_scans_per_msg")
    if f and d > 32:
        notes.append("%s depth %s: %.3g linear fallback scans per message" % (c, dname(d), f))
    cv = res[(c, d)].get("cv")
    if cv and cv.get("cpu_time", 0) > 0.10:
        notes.append("%s depth %s: noisy, CV %.0f%% over repetitions" % (c, dname(d), 100 * cv["cpu_time"]))
    cpu, real = ns(c, d), real_ns(c, d)
    if cpu and real and real > 1.1 * cpu:
        busy.append("%s/%s %.0f%%" % (c, dname(d), 100 * (real / cpu - 1)))
if busy:
    notes.append("real time above CPU time by >10%% in %d of %d runs (other processes were "
                 "running; rerun on a quiet machine): %s" % (len(busy), len(res), ", ".join(busy)))

# Targets (docs/perf.md): exact <= 20 ns at every depth with 1 Mi within 1.5x of
# depth 1; four mask classes <= 60 ns at 64 Ki; <= 64 B per posted receive.
# exact_oldest_burst16 is the batched variant of exact_oldest, checked the same way.
checks = []
for c in ("exact_oldest", "exact_oldest_seq", "exact_newest", "exact_oldest_burst16"):
    vals = [(d, ns(c, d)) for d in depths if ns(c, d) is not None]
    if vals:
        worst = max(vals, key=lambda x: x[1])
        checks.append(("%s <= 20 ns at every depth" % c, worst[1] <= 20,
                       "worst %.1f ns at %s" % (worst[1], dname(worst[0]))))
    if ns(c, 1) and ns(c, 1 << 20):
        ratio = ns(c, 1 << 20) / ns(c, 1)
        checks.append(("%s 1 Mi within 1.5x of depth 1" % c, ratio <= 1.5, "%.2fx" % ratio))
if ns("mask4_oldest", 1 << 16) is not None:
    v = ns("mask4_oldest", 1 << 16)
    checks.append(("mask4_oldest <= 60 ns at 64 Ki", v <= 60, "%.1f ns" % v))
# Memory per posted receive: where the fixed part of a matcher (its object, the
# first pool and index allocations) no longer dominates, from 1 Ki receives up
# (tests/unit: AtMost64BytesPerPostedReceiveFrom1KiUp sweeps 1 Ki .. 1 Mi).
for c in ("exact_oldest", "exact_oldest_seq", "exact_newest"):
    vals = [(d, counter(c, d, "bytes_per_posted_recv")) for d in depths if d >= 1024]
    vals = [(d, v) for d, v in vals if v is not None]
    if vals:
        bad = [dname(d) for d, v in vals if v > 64]
        worst = max(vals, key=lambda x: x[1])
        checks.append(("%s <= 64 B per posted recv (depth >= 1 Ki)" % c, not bad,
                       "over at depth " + ", ".join(bad) if bad
                       else "worst %.1f B at %s" % (worst[1], dname(worst[0]))))

def fmt_ns(v):
    return "?" if v is None else "%.1f" % v
line_note = ("one random cache line in a 64 MiB array costs %s ns when its address depends on "
             "the previous load, %s ns when addresses are known ahead and loads overlap" %
             (fmt_ns(line_ns.get("machine_dependent_line")),
              fmt_ns(line_ns.get("machine_independent_line"))))

caches = ", ".join("L%d%s %d KiB" % (x["level"], "d" if x["type"] == "Data" else "",
                                     x["size"] // 1024)
                   for x in ctx.get("caches", []) if x.get("type") in ("Data", "Unified"))
machine = "%s CPUs @ %s MHz%s" % (ctx.get("num_cpus", "?"), ctx.get("mhz_per_cpu", "?"),
                                  ", " + caches if caches else "")

print("Tag matcher: median ns per matched message (3 repetitions, CPU time)")
print(table(hdr, ns_rows, md=False))
print()
print("Bytes per queued entry (memory_bytes() / queue depth, after building the queue%s)" % fixed_note)
print(table(hdr, by_rows, md=False))
print()
if checks:
    print("Targets")
    for name, ok, detail in checks:
        print("  [%s] %s: %s" % ("ok" if ok else "MISS", name, detail))
    print()
if line_ns:
    print("Machine (same run): " + line_note)
    print()
if notes:
    print("Notes")
    for n in notes:
        print("  " + n)
    print()

print("---- markdown for docs/perf.md ----")
print()
print("### Software tag matcher (`tests/bench/bench_matcher`)")
print()
load = ctx.get("load_avg")
print("Revision %s, %s, %s%s. Median of 3 repetitions, CPU time per matched "
      "message (one post + one arrival or claim) at constant queue depth." %
      (revision, ctx.get("date", "?"), machine,
       ", load average %.2f at start" % load[0] if load else ""))
if busy:
    print()
    print("> Measured on a busy machine: real time exceeded CPU time by more than 10%% "
          "in %d of %d runs; treat the figures as upper bounds." % (len(busy), len(res)))
print()
print("| case | what one message does |")
print("|---|---|")
for c, desc, _ in cases:
    print("| `%s` | %s |" % (c, desc))
print()
print("ns per matched message, by queue depth:")
print()
print(table(hdr, [["`%s`" % r[0]] + r[1:] for r in ns_rows], md=True))
print()
print("Bytes per queued entry (`memory_bytes()` / depth; includes fixed pool and "
      "table overhead, so small depths are dominated by it%s):" % fixed_note)
print()
print(table(hdr, [["`%s` %s" % (r[0].split(" ", 1)[0], r[0].split(" ", 1)[1])] + r[1:]
                  for r in by_rows], md=True))
print()
if checks:
    print("Target checks:")
    print()
    for name, ok, detail in checks:
        print("- %s %s: %s" % ("ok" if ok else "**MISS**", name, detail))
    print()
if line_ns:
    print("Machine, same run (`machine_*_line`): " + line_note + ".")
    print()
PY
