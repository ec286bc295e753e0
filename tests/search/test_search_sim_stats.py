"""The benchmark's Wilcoxon signed-rank test and the simulated landscapes."""

from __future__ import annotations

import math
import random

import pytest

import search_helpers  # noqa: F401  (benchmarks on sys.path)
from search_sim.landscapes import DIMS, FAMILIES, LEVELS, make_landscape
from search_sim.stats import wilcoxon_signed_rank


def test_exact_all_positive():
    res = wilcoxon_signed_rank([1, 2, 3, 4, 5], [0, 0, 0, 0, 0])
    assert res.method == "exact" and res.w_plus == 15
    assert res.p_value == pytest.approx(2 / 32)


def test_exact_textbook_example():
    # 15 paired differences with two negatives of ranks 10 and 14: W- = 24; the exact
    # two-sided p is 2 * P(W <= 24) = 0.04126 for n = 15 (Wilcoxon tables)
    d = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
    res = wilcoxon_signed_rank(d, [0] * len(d))
    assert res.w_plus == 96
    assert res.p_value == pytest.approx(0.041259765625)


def test_normal_approximation_agrees_with_exact_for_moderate_n():
    rng = random.Random(1)
    d = [rng.gauss(0.3, 1.0) for _ in range(25)]
    exact = wilcoxon_signed_rank(d, [0] * 25)
    ties = d + [d[0]]  # a tie forces the normal approximation
    approx = wilcoxon_signed_rank(ties, [0] * 26)
    assert exact.method == "exact" and approx.method == "normal"
    assert approx.p_value == pytest.approx(exact.p_value, abs=0.05)


def test_zero_differences_are_dropped_and_symmetric_data_is_not_significant():
    res = wilcoxon_signed_rank([1, 2, 3, -1, -2, -3, 0], [0] * 7)
    assert res.n == 6 and res.p_value == 1.0


@pytest.mark.parametrize("family", FAMILIES)
def test_landscapes_are_deterministic_and_have_structure(family):
    a, b = make_landscape(family, 3), make_landscape(family, 3)
    assert a == b
    x = (1, 2, 3, 4, 5)
    assert a.evaluate(x) == b.evaluate(x)
    assert a.optimum() > 2.0  # something worth finding
    rng = random.Random(0)
    points = [(rng.randrange(a.n_strategies), *(rng.randrange(LEVELS) for _ in range(DIMS)))
              for _ in range(300)]
    outcomes = [a.evaluate(p) for p in points]
    assert any(o.verdict != "correct" for o in outcomes)
    assert all(o.speedup > 0 for o in outcomes if o.verdict == "correct")


def test_unknown_family_is_a_value_error():
    with pytest.raises(ValueError, match="unknown landscape family"):
        make_landscape("nope", 0)


@pytest.mark.parametrize("seed", range(5))
def test_deceptive_first_attempts_rank_strategies_wrongly(seed):
    """The strategy whose plain first attempt measures best is not the one that goes furthest."""
    land = make_landscape("deceptive", seed)
    naive = (1,) * DIMS
    first = [land.true_log_speedup((s, *naive)) for s in range(land.n_strategies)]
    top = [max(p.height_log for p in st.peaks) for st in land.strategies]
    best_first = max(range(land.n_strategies), key=first.__getitem__)
    best_top = max(range(land.n_strategies), key=top.__getitem__)
    assert best_first != best_top
    assert math.exp(first[best_top]) < 1.0 < math.exp(first[best_first])
    assert math.exp(top[best_top]) > 3 * math.exp(top[best_first])
