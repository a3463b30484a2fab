"""Statistics shared by the contrib/bench_*.sh summaries.

This host switches between two cross-core regimes (a cache line crosses in
~34 ns or ~200 ns; docs/perf.md), drawn per process pair and holding for a whole
run, so a figure's rounds form two clusters. A ratio of medians then says as
much about which regime each tool drew more often as about its speed. Besides
it, the summaries compare like with like: each tool's rounds split into their
slow and fast cluster, and the clusters' medians compared.
"""
import math
import statistics

# Two clusters only if their closest members are this far apart...
MIN_GAP = 1.3
# ...and each holds at least this share of the rounds (and two of them).
MIN_SHARE = 0.15


def regimes(values, better):
    """(slow, fast) lists if `values` form two clusters, else None.

    better: "lower" (latency: the slow regime holds the high values) or
    "higher" (rate, bandwidth: the slow regime holds the low ones).
    """
    v = sorted(x for x in values if x > 0)
    n = len(v)
    least = max(2, math.ceil(MIN_SHARE * n))
    best, cut = 0.0, None
    for i in range(least - 1, n - least):
        gap = v[i + 1] / v[i]
        if gap > best:
            best, cut = gap, i + 1
    if cut is None or best < MIN_GAP:
        return None
    low, high = v[:cut], v[cut:]
    return (high, low) if better == "lower" else (low, high)


def regime_ratios(ref, meas, better):
    """Per regime, median(meas) / median(ref): (slow, fast), or None unless
    both tools show both regimes."""
    a, b = regimes(ref, better), regimes(meas, better)
    if a is None or b is None:
        return None
    return tuple(statistics.median(y) / statistics.median(x) for x, y in zip(a, b))


def regime_cell(ref, meas, better):
    """Markdown cell: per-regime ratios and round counts, or why there are none."""
    a, b = regimes(ref, better), regimes(meas, better)
    if a is None or b is None:
        return "one regime" if a is None and b is None else "-"
    r = regime_ratios(ref, meas, better)
    return "slow %.2fx (%d/%d rounds), fast %.2fx (%d/%d)" % (
        r[0], len(a[0]), len(b[0]), r[1], len(a[1]), len(b[1]))


def meets(ratio, better, target):
    return ratio <= target if better == "lower" else ratio >= target
