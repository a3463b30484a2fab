#!/usr/bin/python3
"""Draws PNG curves from contrib/sweep_sm.sh's CSV (medians over rounds):
latency and bandwidth against message size for tm_sm and UCX, and tm_sm
latency against posted-queue depth; and a markdown table of tm_sm / UCX
latency per size from each round's runs (tag_lat_ratios.md, also printed).

Usage: plot_perftest.py SWEEP_CSV OUT_DIR [UCX_PEER_LABEL]
Needs matplotlib (Debian: python3-matplotlib; installed on demand as root)."""
import csv
import os
import statistics
import subprocess
import sys

try:
    import matplotlib
except ImportError:
    if os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-qq", "python3-matplotlib"],
                       check=False, stdout=subprocess.DEVNULL)
    import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

path, out = sys.argv[1], sys.argv[2]
peer = sys.argv[3] if len(sys.argv) > 3 else "ucx"
rows = list(csv.DictReader(open(path)))


def runs(test, impl, key, col):
    """(row[key], round, value) of one tool's runs that measured a number."""
    for r in rows:
        if r["test"] == test and r["impl"] == impl:
            try:
                v = float(r[col])
            except ValueError:
                continue
            if v == v:
                yield int(r[key]), r["round"], v


def series(test, impl, key, col):
    acc = {}
    for x, _, v in runs(test, impl, key, col):
        acc.setdefault(x, []).append(v)
    xs = sorted(acc)
    return xs, [statistics.median(acc[x]) for x in xs]


def label(impl):
    if impl == "tm_sm":
        return "tm_sm (UCT tag, tm_perftest)"
    if impl == "line_lat":
        return "no transport (line_lat: 8 B flag; above, two plain copies)"
    return "UCX %s (UCP tag, ucx_perftest)" % peer


def size_axis(ax):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.grid(True, which="both", alpha=0.3)


outputs = []
fig, ax = plt.subplots(figsize=(7, 4.5))
for impl in ("ucx", "tm_sm", "line_lat"):
    xs, ys = series("tag_lat", impl, "size", "lat_us")
    if xs:
        ax.plot(xs, ys, marker="o", label=label(impl), linestyle=":" if impl == "line_lat" else "-")
size_axis(ax)
ax.set_yscale("log")
ax.set_ylabel("one-way latency (us, median)")
ax.set_title("Tagged ping-pong latency")
ax.legend()
fig.tight_layout()
outputs.append(os.path.join(out, "tag_lat.png"))
fig.savefig(outputs[-1], dpi=110)

fig, ax = plt.subplots(figsize=(7, 4.5))
for impl in ("ucx", "tm_sm"):
    xs, ys = series("tag_bw", impl, "size", "MBps")
    if xs:
        ax.plot(xs, [y / 1000 for y in ys], marker="o", label=label(impl))
size_axis(ax)
ax.set_ylabel("bandwidth (GB/s, median)")
ax.set_title("Tagged streaming bandwidth, malloc'd buffers")
ax.legend()
fig.tight_layout()
outputs.append(os.path.join(out, "tag_bw.png"))
fig.savefig(outputs[-1], dpi=110)

xs, ys = series("tag_lat_depth", "tm_sm", "depth", "lat_us")
if xs:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot([max(x, 1) for x in xs], ys, marker="o", label="tm_sm, 8 B, exact receives posted")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("non-matching receives posted (depth; 0 plotted at 1)")
    ax.set_ylabel("one-way latency (us, median)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Latency against posted-queue depth")
    ax.legend()
    fig.tight_layout()
    outputs.append(os.path.join(out, "tag_lat_depth.png"))
    fig.savefig(outputs[-1], dpi=110)


def per_round(test, impl, col):
    """{size: {round: value}} of one tool's runs."""
    acc = {}
    for size, rnd, v in runs(test, impl, "size", col):
        acc.setdefault(size, {})[rnd] = v
    return acc


# tm_sm / UCX latency per size, each round's runs against each other (run back
# to back, they share the host's mode more often than medians over rounds do).
tm, ucx = per_round("tag_lat", "tm_sm", "lat_us"), per_round("tag_lat", "ucx", "lat_us")
lines = ["| size (B) | tm_sm / UCX per round: median | min-max | rounds above 0.8x |",
         "|---:|---:|---|---:|"]
for size in sorted(set(tm) & set(ucx)):
    ratios = sorted(tm[size][k] / ucx[size][k] for k in set(tm[size]) & set(ucx[size]) if ucx[size][k] > 0)
    if ratios:
        lines.append("| %d | %.2f | %.2f-%.2f | %d of %d |" % (
            size, statistics.median(ratios), ratios[0], ratios[-1],
            sum(1 for x in ratios if x > 0.8), len(ratios)))
outputs.append(os.path.join(out, "tag_lat_ratios.md"))
with open(outputs[-1], "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
for o in outputs:
    print(o)
