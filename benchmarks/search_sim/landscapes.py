"""Synthetic optimization landscapes standing in for a kernel's design space.

A program is a strategy and its knobs: ``(s, k1, ..., kDIMS)``. The strategy ``s`` (one of
``n_strategies``: think "shared-memory tiling", "tensor cores via WMMA", "vectorized
elementwise", ...) is chosen when writing from the reference and kept by refinements; the
knobs (tile sizes, vector width, unroll factor, pipeline stages, ...) each take ``LEVELS``
values and are what refinements change. Within a strategy the true log speedup is the
highest of its peaks, each falling off linearly with the distance of the scaled knobs
``u = k / (LEVELS - 1)`` from its centre, floored at ``base_log``. Each peak is drawn from
two numbers: what a plain first attempt (knobs low) measures and how far the strategy can
go; when the two disagree across strategies the landscape is deceptive. The chance of failing to
compile or verify depends on the strategy and on the region (aggressive configurations fail
more often). Measurements carry multiplicative log-normal timing noise.

Families (each instance is drawn from a seed):

* ``deceptive``: a decoy strategy whose plain first attempt measures 1.3x tops out at 2.2x;
  the best strategy's first attempt measures 0.8x (slower than the reference) and it rises
  to 7x; three others start at 0.6-1.2x and top out at 1.3-3x.
* ``rugged``: every strategy has several optima of random height and width.
* ``failure_wall``: as ``deceptive``, and the best strategy's programs fail to compile or
  verify much more often (aggressive code).
* ``smooth``: a strategy's first attempt measures ``top ** 0.35``, so first attempts rank
  strategies correctly; a greedy hill-climber's home ground.
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

Point = tuple[int, ...]  # (strategy, knob_1, ..., knob_DIMS)


@attrs.frozen
class Peak:
    center: tuple[float, ...]  # scaled knob coordinates in [0, 1]^DIMS
    height_log: float  # log speedup at the centre
    slope_log: float  # log speedup lost per scaled unit of distance


@attrs.frozen
class Strategy:
    peaks: tuple[Peak, ...]
    p_compile: float  # chance a program fails to compile
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
    base_log: float  # log speedup far from every optimum
    strategies: tuple[Strategy, ...]
    noise_sigma: float  # multiplicative timing noise, log scale
    # aggressive corner: programs with every knob above this (scaled) fail this much more
    aggressive_threshold: float = 0.8
    aggressive_extra_fail: float = 0.3

    @property
    def n_strategies(self) -> int:
        return len(self.strategies)

    def true_log_speedup(self, x: Point) -> float:
        strategy = self.strategies[x[0]]
        u = scaled(x[1:])
        best = self.base_log
        for p in strategy.peaks:
            best = max(best, p.height_log - p.slope_log * math.dist(u, p.center))
        return best

    def failure_probabilities(self, x: Point) -> tuple[float, float]:
        strategy = self.strategies[x[0]]
        p_c = strategy.p_compile
        if min(scaled(x[1:])) > self.aggressive_threshold:
            p_c = min(0.95, p_c + self.aggressive_extra_fail)
        return p_c, strategy.p_incorrect

    def evaluate(self, x: Point) -> Outcome:
        """Evaluate program ``x``. Deterministic per (landscape, program): every policy sees
        the same outcome for the same program (common random numbers)."""
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
        """Best true speedup over every program (failure-prone ones included)."""
        return max(
            math.exp(self.true_log_speedup((s, *knobs)))
            for s in range(self.n_strategies)
            for knobs in all_knobs()
        )


def scaled(knobs: Sequence[int]) -> tuple[float, ...]:
    return tuple(v / (LEVELS - 1) for v in knobs)


def all_knobs():
    def rec(prefix: tuple[int, ...]):
        if len(prefix) == DIMS:
            yield prefix
            return
        for v in range(LEVELS):
            yield from rec(prefix + (v,))

    return rec(())


def _center(rng: random.Random) -> tuple[float, ...]:
    # optima sit at middle-to-high knob settings, away from the plain first attempts
    return tuple(rng.uniform(0.4, 0.9) for _ in range(DIMS))


# where plain first attempts sit (knobs at level 1 of 0..LEVELS-1): see sim.NAIVE_LEVELS
NAIVE_CENTER = tuple(1 / (LEVELS - 1) for _ in range(DIMS))


def _peak(rng: random.Random, first: float, top: float) -> Peak:
    """A peak of speedup ``top`` whose slope makes a plain first attempt measure ``first``."""
    center = _center(rng)
    slope = (math.log(top) - math.log(first)) / math.dist(NAIVE_CENTER, center)
    return Peak(center, math.log(top), slope)


def make_landscape(family: str, seed: int) -> Landscape:
    """Draw one instance of ``family`` from ``seed``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown landscape family {family!r}; known: {', '.join(FAMILIES)}")
    rng = random.Random(f"landscape:{family}:{seed}")
    noise = 0.05  # ~5% run-to-run timing noise, typical of GPU kernel timing without pinning
    p_c, p_i = 0.12, 0.05  # base compile-failure and wrong-result rates of a rewrite

    def plain(first: float, top: float, fail: tuple[float, float] = (p_c, p_i)) -> Strategy:
        return Strategy((_peak(rng, first, top),), *fail)

    strategies: list[Strategy]
    if family in ("deceptive", "noisy", "failure_wall"):
        decoy = plain(first=1.3, top=2.2)  # looks best at first, tops out early
        best_fail = (0.45, 0.15) if family == "failure_wall" else (p_c, p_i)
        best = plain(first=0.8, top=7.0, fail=best_fail)  # slower than the reference at first
        others = [plain(rng.uniform(0.6, 1.2), rng.uniform(1.3, 3.0)) for _ in range(3)]
        strategies = [decoy, best, *others]
        if family == "noisy":
            noise = 0.15
    elif family == "rugged":
        strategies = [
            Strategy(
                tuple(
                    _peak(rng, rng.uniform(0.5, 1.3), rng.uniform(1.3, 5.0))
                    for _ in range(rng.randint(2, 4))
                ),
                p_c,
                p_i,
            )
            for _ in range(5)
        ]
    else:  # smooth: a first attempt ranks its strategy correctly (first = top ** 0.35)
        tops = [rng.uniform(1.5, 5.0) for _ in range(5)]
        strategies = [plain(top**0.35, top) for top in tops]
    rng.shuffle(strategies)
    return Landscape(
        family=family,
        seed=seed,
        base_log=math.log(0.3),  # a rewrite far from anything good runs at 0.3x
        strategies=tuple(strategies),
        noise_sigma=noise,
    )
