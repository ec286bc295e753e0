"""Paired Wilcoxon signed-rank test (two-sided), implemented here to keep the benchmark
free of scipy.

Zero differences are dropped (Wilcoxon's method). Ties share their mean rank. With at most
25 non-zero pairs and no ties the exact null distribution of W+ is enumerated by dynamic
programming; otherwise the normal approximation with tie correction and a continuity
correction of 0.5 is used (as in Hollander & Wolfe, Nonparametric Statistical Methods).
"""

from __future__ import annotations

import math
from typing import Sequence

import attrs


@attrs.frozen
class WilcoxonResult:
    n: int  # non-zero pairs
    w_plus: float  # rank sum of positive differences
    p_value: float  # two-sided
    method: str  # exact | normal


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the mean of the ranks they span (also used by
    benchmarks/ncu_calibration/run.py's Spearman correlation)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = mean_rank
        i = j + 1
    return ranks


def wilcoxon_signed_rank(x: Sequence[float], y: Sequence[float]) -> WilcoxonResult:
    """Test whether the paired differences ``x - y`` are symmetric about zero."""
    if len(x) != len(y):
        raise ValueError("wilcoxon: x and y must have the same length")
    diffs = [a - b for a, b in zip(x, y) if a - b != 0]
    n = len(diffs)
    if n == 0:
        return WilcoxonResult(0, 0.0, 1.0, "exact")
    abs_d = [abs(d) for d in diffs]
    ranked = ranks(abs_d)
    w_plus = sum(r for r, d in zip(ranked, diffs) if d > 0)
    has_ties = len(set(abs_d)) < n
    if n <= 25 and not has_ties:
        # counts[s] = number of sign assignments with W+ = s
        total = n * (n + 1) // 2
        counts = [0] * (total + 1)
        counts[0] = 1
        for r in range(1, n + 1):
            for s in range(total, r - 1, -1):
                counts[s] += counts[s - r]
        w = round(w_plus)
        lower = sum(counts[: min(w, total - w) + 1])
        p = min(1.0, 2 * lower / 2**n)
        return WilcoxonResult(n, w_plus, p, "exact")
    mean = n * (n + 1) / 4
    tie_term = 0.0
    for value in set(abs_d):
        t = abs_d.count(value)
        tie_term += t**3 - t
    var = n * (n + 1) * (2 * n + 1) / 24 - tie_term / 48
    if var <= 0:
        return WilcoxonResult(n, w_plus, 1.0, "normal")
    z = (abs(w_plus - mean) - 0.5) / math.sqrt(var)
    p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return WilcoxonResult(n, w_plus, min(1.0, p), "normal")
