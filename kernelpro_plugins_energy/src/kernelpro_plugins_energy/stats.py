"""Small statistics over trial values and power samples (no numpy needed)."""

from __future__ import annotations

import math
import statistics
from typing import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between order statistics
    (numpy's default method)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def iqr(values: Sequence[float]) -> float:
    """Interquartile range: 75th minus 25th percentile."""
    return percentile(values, 75) - percentile(values, 25)


def spread(values: Sequence[float]) -> float:
    """(max - min) / median; infinite when the median is not positive (nothing agrees)."""
    mid = median(values)
    return (max(values) - min(values)) / mid if mid > 0 else float("inf")


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation: sample standard deviation / mean (0 for one value)."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else 0.0


def integrate_power_w(samples: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Trapezoid integral of ``(time_s, power_w)`` samples.

    Returns ``(energy_j, duration_s)`` between the first and the last sample, or None with
    fewer than two samples or no elapsed time.
    """
    if len(samples) < 2:
        return None
    ordered = sorted(samples)
    energy = 0.0
    for (t_a, p_a), (t_b, p_b) in zip(ordered, ordered[1:]):
        energy += 0.5 * (p_a + p_b) * (t_b - t_a)
    duration = ordered[-1][0] - ordered[0][0]
    if duration <= 0:
        return None
    return energy, duration
