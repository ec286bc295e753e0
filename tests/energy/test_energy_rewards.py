"""The energy rewards on hand-made EvalResults."""

from __future__ import annotations

import itertools
import math

import pytest

from energy_helpers import result
from kernelpro.api import Reward, RewardContext
from kernelpro.records import Verdict
from kernelpro_plugins_energy.rewards import (
    EnergyAtMatchedSpeedReward,
    EnergyReward,
    EnergyRewardSettings,
    MatchedSpeedSettings,
    fastest_correct_ms,
)

FLOOR = Reward.floor
CTX = RewardContext(baseline_ms=2.0)


def test_energy_is_log_of_the_reference_over_the_candidate():
    reward = EnergyReward()
    assert reward.score(result(energy_j=0.5, reference_j=1.0), CTX) == pytest.approx(math.log(2.0))
    assert reward.score(result(energy_j=2.0, reference_j=1.0), CTX) == pytest.approx(-math.log(2.0))


def test_less_energy_scores_higher_whatever_the_speed():
    reward = EnergyReward()
    frugal_slow = result(runtime_ms=3.0, energy_j=0.8, reference_j=1.0)
    hungry_fast = result(runtime_ms=0.5, energy_j=0.9, reference_j=1.0)
    assert reward.score(frugal_slow, CTX) > reward.score(hungry_fast, CTX)


def test_energy_is_clamped_to_the_cap():
    reward = EnergyReward(EnergyRewardSettings(cap=3.0))
    assert reward.score(result(energy_j=1e-6, reference_j=1.0), CTX) == 3.0
    assert reward.score(result(energy_j=1e6, reference_j=1.0), CTX) == -3.0


@pytest.mark.parametrize("verdict", [Verdict.INCORRECT, Verdict.COMPILE_ERROR, Verdict.TIMEOUT])
@pytest.mark.parametrize("cls", [EnergyReward, EnergyAtMatchedSpeedReward])
def test_anything_not_correct_scores_the_floor(cls, verdict):
    assert cls().score(result(energy_j=0.1, reference_j=1.0, verdict=verdict), CTX) == FLOOR


def test_the_baseline_measurement_is_used_without_an_in_process_reference():
    ctx = RewardContext(baseline_ms=2.0, baseline_measurements={"energy": {"energy_j_per_call": 4.0}})
    assert EnergyReward().score(result(energy_j=1.0), ctx) == pytest.approx(math.log(4.0))
    # the reference measured next to the candidate wins over the run's baseline
    assert EnergyReward().score(result(energy_j=1.0, reference_j=2.0), ctx) == pytest.approx(math.log(2.0))


@pytest.mark.parametrize("cls", [EnergyReward, EnergyAtMatchedSpeedReward])
def test_no_energy_falls_back_to_log_speedup(cls):
    # runtime 0.5 ms against a 2 ms reference: ln(4)
    assert cls().score(result(runtime_ms=0.5), CTX) == pytest.approx(math.log(4.0))
    # a non-positive energy (possible after idle subtraction) counts as missing
    assert cls().score(result(runtime_ms=0.5, energy_j=-0.1, reference_j=1.0), CTX) == pytest.approx(math.log(4.0))


def test_without_fallback_no_energy_is_correct_but_unranked():
    reward = EnergyReward(EnergyRewardSettings(fallback_to_speed=False, cap=5.0))
    score = reward.score(result(runtime_ms=0.5), CTX)
    assert score == pytest.approx(FLOOR + 0.025 * 5.0)
    assert FLOOR < score < reward.score(result(energy_j=1e6, reference_j=1.0), CTX)


def _population(*runtimes_energies):
    return tuple(result(runtime_ms=t, energy_j=e, reference_j=1.0) for t, e in runtimes_energies)


def test_matched_speed_ranks_by_energy_within_the_slowdown():
    reward = EnergyAtMatchedSpeedReward(MatchedSpeedSettings(slowdown=0.02))
    pop = _population((1.0, 0.9), (1.015, 0.6), (1.03, 0.3))
    ctx = RewardContext(baseline_ms=2.0, population=pop)
    fastest, matched, slow = (reward.score(r, ctx) for r in pop)
    assert fastest == pytest.approx(math.log(1 / 0.9))
    assert matched == pytest.approx(math.log(1 / 0.6))
    assert matched > fastest  # within 2 % of the fastest, and less energy
    assert slow < fastest  # least energy, but 3 % slower than the fastest


def test_matched_speed_slow_band_formula():
    cap = 5.0
    reward = EnergyAtMatchedSpeedReward(MatchedSpeedSettings(slowdown=0.02, cap=cap))
    ctx = RewardContext(baseline_ms=2.0, population=_population((1.0, 1.0)))
    slow = result(runtime_ms=2.04, energy_j=0.1, reference_j=1.0)
    limit = 1.02
    expected = -cap - (10.0 - cap) * (0.05 + 0.9 * (1 - limit / 2.04))
    assert reward.score(slow, ctx) == pytest.approx(expected)


def test_every_slow_candidate_is_below_every_matched_one_and_above_the_floor():
    reward = EnergyAtMatchedSpeedReward(MatchedSpeedSettings(slowdown=0.02, cap=5.0))
    matched = [result(runtime_ms=t, energy_j=e, reference_j=1.0)
               for t, e in itertools.product([1.0, 1.01, 1.02], [1e-9, 1.0, 1e9])]
    matched.append(result(runtime_ms=1.01))  # no energy: log-speedup fallback, still matched
    slow = [result(runtime_ms=t, energy_j=e, reference_j=1.0)
            for t, e in itertools.product([1.0201, 1.5, 40.0, 1e6], [1e-9, 1.0])]
    ctx = RewardContext(baseline_ms=2.0, population=tuple(matched + slow))
    matched_scores = [reward.score(r, ctx) for r in matched]
    slow_scores = [reward.score(r, ctx) for r in slow]
    assert min(matched_scores) > max(slow_scores)
    assert min(slow_scores) > FLOOR
    # among slow ones, slower scores lower
    by_time = [reward.score(result(runtime_ms=t, energy_j=1.0, reference_j=1.0), ctx) for t in (1.1, 1.5, 4.0)]
    assert by_time == sorted(by_time, reverse=True)


def test_the_fastest_includes_the_scored_result_and_ignores_incorrect_ones():
    incorrect_fast = result(runtime_ms=0.1, energy_j=0.1, reference_j=1.0, verdict=Verdict.INCORRECT)
    cand = result(runtime_ms=1.0, energy_j=0.5, reference_j=1.0)
    ctx = RewardContext(baseline_ms=2.0, population=(incorrect_fast,))
    assert fastest_correct_ms(cand, ctx) == 1.0
    assert EnergyAtMatchedSpeedReward().score(cand, ctx) == pytest.approx(math.log(2.0))
    assert fastest_correct_ms(cand, RewardContext(baseline_ms=None)) == 1.0


def test_zero_slowdown_matches_only_the_fastest():
    reward = EnergyAtMatchedSpeedReward(MatchedSpeedSettings(slowdown=0.0))
    pop = _population((1.0, 1.0), (1.0001, 0.1))
    ctx = RewardContext(baseline_ms=2.0, population=pop)
    assert reward.score(pop[0], ctx) > reward.score(pop[1], ctx)


def test_scores_are_pure_functions_of_result_and_context():
    reward = EnergyAtMatchedSpeedReward()
    pop = _population((1.0, 0.9), (1.01, 0.6), (1.5, 0.3))
    forward = RewardContext(baseline_ms=2.0, population=pop)
    backward = RewardContext(baseline_ms=2.0, population=tuple(reversed(pop)))
    first = [reward.score(r, forward) for r in pop]
    assert first == [reward.score(r, forward) for r in pop]
    assert first == [reward.score(r, backward) for r in pop]


def test_a_later_faster_candidate_can_unmatch_an_earlier_one():
    reward = EnergyAtMatchedSpeedReward()
    early = result(runtime_ms=1.0, energy_j=0.5, reference_j=1.0)
    during = reward.score(early, RewardContext(baseline_ms=2.0, population=(early,)))
    faster = result(runtime_ms=0.8, energy_j=0.9, reference_j=1.0)
    at_end = reward.score(early, RewardContext(baseline_ms=2.0, population=(early, faster)))
    assert during == pytest.approx(math.log(2.0))
    assert at_end < -5.0


@pytest.mark.parametrize("cap", [0.0, 10.0, -1.0])
def test_cap_is_validated(cap):
    with pytest.raises(ValueError, match="cap: expected a value in"):
        EnergyRewardSettings(cap=cap)
    with pytest.raises(ValueError, match="cap: expected a value in"):
        MatchedSpeedSettings(cap=cap)


def test_negative_slowdown_is_refused():
    with pytest.raises(ValueError, match="slowdown"):
        MatchedSpeedSettings(slowdown=-0.01)


def test_matched_speed_on_the_energy_loop_time():
    """Short timings match, but one candidate is 10 % slower in the sustained energy loop."""
    def with_loop(runtime, energy, loop):
        r = result(runtime_ms=runtime, energy_j=energy, reference_j=1.0)
        r.measurements["energy"]["time_per_call_ms"] = loop
        return r

    steady = with_loop(1.00, 0.9, 1.02)
    throttled = with_loop(1.01, 0.8, 1.12)  # 1 % off in timing, 10 % off in the loop
    ctx = RewardContext(baseline_ms=2.0, population=(steady, throttled))
    by_timing = EnergyAtMatchedSpeedReward(MatchedSpeedSettings(speed_source="timing"))
    by_loop = EnergyAtMatchedSpeedReward(MatchedSpeedSettings(speed_source="energy_loop"))
    assert by_timing.score(throttled, ctx) > by_timing.score(steady, ctx)
    assert by_loop.score(throttled, ctx) < by_loop.score(steady, ctx)
    assert by_loop.score(throttled, ctx) < -5.0  # in the slow band
    # a result without loop time is matched on its timing
    no_loop = result(runtime_ms=1.0, energy_j=0.5, reference_j=1.0)
    assert by_loop.score(no_loop, ctx) == pytest.approx(math.log(2.0))


def test_speed_source_is_validated():
    with pytest.raises(ValueError, match="speed_source: expected one of timing, energy_loop"):
        MatchedSpeedSettings(speed_source="wall")
