"""Synthetic optimization landscapes standing in for a kernel's design space.

A program is a point of a discrete parameter grid: ``DIMS`` knobs (think tile sizes,
vector width, unroll factor, pipeline stages, ...) each taking ``LEVELS`` values. Its true
log speedup over the reference is the highest of several peaks on the scaled coordinates
``u = x / (LEVELS - 1)``, each falling off linearly with distance from its centre (so
every peak has a basin of attraction), floored at ``base_log``. Its chance of failing to
compile or verify depends on the region (aggressive configurations fail more often).
Measurements carry multiplicative log-normal timing noise.

Families (each instance is drawn from a seed):

* ``deceptive``: a wide, gentle basin rising to a ~2.2x local optimum covers most of the
  space; away from it a steep, narrower basin rises to ~7x, but its outskirts measure
  slower than most of the gentle basin (a rewrite that is slow at first and pays off
  after several refinements).
* ``rugged``: many optima of random height and width.
* ``failure_wall``: the best region is also where compile failures and wrong results are
  frequent (aggressive configurations), the safe region holds a ~2x optimum.
* ``smooth``: one broad peak; a greedy hill-climber's home ground.
* ``noisy``: ``deceptive`` with 3x the timing noise.
"""

from __future__ import annotations

import math
import random
from typing import Sequence

import attrs

DIMS = 4
LEVELS = 8
FAMILIES = ("deceptive", "rugged", "failure_wall", "smooth", "noisy")

Point = tuple[int, ...]


@attrs.frozen
class Peak:
    center: tuple[float, ...]  # in scaled coordinates [0, 1]^DIMS
    height_log: float  # log speedup at the centre
    slope_log: float  # log speedup lost per scaled unit of distance


@attrs.frozen
class FailRegion:
    center: tuple[float, ...]
    radius: float  # scaled units
    p_compile: float  # chance a program inside fails to compile
    p_incorrect: float  # chance it compiles but gives wrong results


@attrs.frozen
class Outcome:
    verdict: str  # correct | compile_error | incorrect
    speedup: float | None  # measured, noisy
    true_speedup: float | None


@attrs.frozen
class Landscape:
    family: str
    seed: int
    base_log: float  # log speedup far from every bump
    peaks: tuple[Peak, ...]
    fail_regions: tuple[FailRegion, ...]
    p_compile_base: float
    p_incorrect_base: float
    noise_sigma: float  # multiplicative timing noise, log scale

    def true_log_speedup(self, x: Point) -> float:
        u = scaled(x)
        best = self.base_log
        for p in self.peaks:
            best = max(best, p.height_log - p.slope_log * math.dist(u, p.center))
        return best

    def failure_probabilities(self, x: Point) -> tuple[float, float]:
        u = scaled(x)
        p_c, p_i = self.p_compile_base, self.p_incorrect_base
        for r in self.fail_regions:
            if math.dist(u, r.center) <= r.radius:
                p_c, p_i = max(p_c, r.p_compile), max(p_i, r.p_incorrect)
        return p_c, p_i

    def evaluate(self, x: Point) -> Outcome:
        """Evaluate program ``x``. Deterministic per (landscape seed, point): every policy
        sees the same outcome for the same program (common random numbers)."""
        rng = random.Random(f"eval:{self.family}:{self.seed}:{x}")
        p_c, p_i = self.failure_probabilities(x)
        draw = rng.random()
        if draw < p_c:
            return Outcome("compile_error", None, None)
        if draw < p_c + (1 - p_c) * p_i:
            return Outcome("incorrect", None, None)
        true = math.exp(self.true_log_speedup(x))
        return Outcome("correct", true * math.exp(rng.gauss(0.0, self.noise_sigma)), true)

    def optimum(self) -> float:
        """Best true speedup over the whole grid among programs that can be correct."""
        best = 0.0
        for x in all_points():
            if self.failure_probabilities(x)[0] < 1.0:
                best = max(best, math.exp(self.true_log_speedup(x)))
        return best


def scaled(x: Sequence[int]) -> tuple[float, ...]:
    return tuple(v / (LEVELS - 1) for v in x)


def all_points():
    def rec(prefix: tuple[int, ...]):
        if len(prefix) == DIMS:
            yield prefix
            return
        for v in range(LEVELS):
            yield from rec(prefix + (v,))

    return rec(())


def _point(rng: random.Random, lo: float = 0.0, hi: float = 1.0) -> tuple[float, ...]:
    return tuple(rng.uniform(lo, hi) for _ in range(DIMS))


def _far_point(rng: random.Random, other: tuple[float, ...], min_dist: float) -> tuple[float, ...]:
    for _ in range(1000):
        p = _point(rng, 0.05, 0.95)
        if math.dist(p, other) >= min_dist:
            return p
    raise RuntimeError("could not place a distant point")  # pragma: no cover


def make_landscape(family: str, seed: int) -> Landscape:
    """Draw one instance of ``family`` from ``seed``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown landscape family {family!r}; known: {', '.join(FAMILIES)}")
    rng = random.Random(f"landscape:{family}:{seed}")
    noise = 0.05  # ~5% run-to-run timing noise, typical of GPU kernel timing without pinning
    p_c, p_i = 0.12, 0.05  # base compile-failure and wrong-result rates of a rewrite
    fail_regions: list[FailRegion] = []
    if family in ("deceptive", "noisy"):
        local = _point(rng, 0.2, 0.8)
        glob = _far_point(rng, local, 0.7)
        peaks = [
            Peak(local, math.log(2.2), 0.9),  # gentle: 1.4x half a unit away
            Peak(glob, math.log(7.0), 5.0),  # steep: 0.74x at 0.45 units away
        ]
        if family == "noisy":
            noise = 0.15
    elif family == "rugged":
        peaks = [
            Peak(_point(rng), rng.uniform(math.log(1.3), math.log(5.0)), rng.uniform(1.0, 5.0))
            for _ in range(8)
        ]
    elif family == "failure_wall":
        local = _point(rng, 0.2, 0.8)
        glob = _far_point(rng, local, 0.7)
        peaks = [Peak(local, math.log(2.2), 0.9), Peak(glob, math.log(6.0), 3.5)]
        fail_regions.append(FailRegion(glob, 0.3, p_compile=0.45, p_incorrect=0.15))
    else:  # smooth
        peaks = [Peak(_point(rng, 0.2, 0.8), math.log(4.0), 1.6)]
    return Landscape(
        family=family,
        seed=seed,
        base_log=math.log(0.5),  # far from every optimum a rewrite runs at half speed
        peaks=tuple(peaks),
        fail_regions=tuple(fail_regions),
        p_compile_base=p_c,
        p_incorrect_base=p_i,
        noise_sigma=noise,
    )
