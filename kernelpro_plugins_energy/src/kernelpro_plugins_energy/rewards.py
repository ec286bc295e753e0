"""Rewards on measured energy: ``energy`` and ``energy_at_matched_speed``.

Both read the candidate's joules per call from ``result.measurements["energy"]``
(``energy_j_per_call``) and the reference's from the same dict
(``reference_energy_j_per_call``, measured in the same worker process just before the
candidate), else from ``context.baseline_measurements["energy"]["energy_j_per_call"]``.

Scores (``cap`` is a setting, ``floor`` = :attr:`kernelpro.api.Reward.floor` = -10,
``w = -cap - floor`` is the room between the lowest ranked score and the floor):

``energy``
    correct, with energy:   ``clamp(ln(E_ref / E), -cap, +cap)``
``energy_at_matched_speed``
    ``limit = (1 + slowdown) * fastest``, where ``fastest`` is the least runtime of the
    correct results in ``context.population`` and the scored result itself. The runtime is
    ``result.runtime_ms`` (the evaluator's timing, ``speed_source: timing``) or, with
    ``speed_source: energy_loop``, the time per call during the energy windows
    (``time_per_call_ms``, seconds of sustained calls; the timing where a result has none).
    At the power limit the two differ: on the H200 a kernel 1.35 % from another in timing
    was 10.7 % slower in the energy loop (docs/validation/energy.md).

    correct, ``runtime <= limit``, with energy: ``clamp(ln(E_ref / E), -cap, +cap)``

    correct, ``runtime > limit``: ``-cap - w * (0.05 + 0.9 * (1 - limit / runtime))``,
    in ``(-cap - 0.95 w, -cap - 0.05 w)``: below every matched candidate, above the floor,
    and lower the slower it is.
both
    not correct: ``floor``.

    correct without usable energy numbers (measurement unavailable, or a non-positive
    value after idle subtraction): with ``fallback_to_speed`` (default) the log-speedup
    ``clamp(ln(baseline_ms / runtime_ms), -cap, +cap)`` takes the place of the energy term
    (so a run without energy numbers is ranked on speed alone); without it, the score is
    ``floor + 0.025 w``, below every ranked correct candidate and above the floor.

Scores are pure functions of ``(result, context)``. With ``energy_at_matched_speed`` a
score depends on the population (a faster candidate found later can push an earlier one
out of the matched set); core scores every candidate again at the end of the run, with the
whole population, to pick ``best.py``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs

from kernelpro.api import EvalResult, Reward, RewardContext

MEASUREMENT = "energy"
KEY = "energy_j_per_call"
REFERENCE_KEY = "reference_energy_j_per_call"


def _cap_in_range(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not 0 < value < -Reward.floor:
        raise ValueError(f"{attribute.name}: expected a value in (0, {-Reward.floor:g}), got {value!r}")


def _non_negative(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not value >= 0:
        raise ValueError(f"{attribute.name}: expected a value >= 0, got {value!r}")


@attrs.frozen
class EnergyRewardSettings:
    # ln(148) = 5: energy ratios beyond 148x are treated alike; < 10 keeps scores above the floor
    cap: float = attrs.field(default=5.0, validator=_cap_in_range)
    fallback_to_speed: bool = True


SPEED_SOURCES = ("timing", "energy_loop")


def _speed_source(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in SPEED_SOURCES:
        raise ValueError(f"{attribute.name}: expected one of {', '.join(SPEED_SOURCES)}, got {value!r}")


@attrs.frozen
class MatchedSpeedSettings:
    # "matched speed": within 2 % of the fastest correct candidate, the example
    slowdown: float = attrs.field(default=0.02, validator=_non_negative)
    cap: float = attrs.field(default=5.0, validator=_cap_in_range)
    fallback_to_speed: bool = True
    speed_source: str = attrs.field(default="timing", validator=_speed_source)


def _positive_number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        if math.isfinite(value) and value > 0:
            return value
    return None


def candidate_energy_j(result: EvalResult) -> float | None:
    """The candidate's joules per call, or None when absent or not positive."""
    return _positive_number(result.measurements.get(MEASUREMENT, {}).get(KEY))


def reference_energy_j(result: EvalResult, context: RewardContext) -> float | None:
    """The reference's joules per call: measured next to this candidate if available,
    else the run's baseline measurement."""
    own = _positive_number(result.measurements.get(MEASUREMENT, {}).get(REFERENCE_KEY))
    if own is not None:
        return own
    return _positive_number(context.baseline_measurements.get(MEASUREMENT, {}).get(KEY))


def _clamp(value: float, cap: float) -> float:
    return max(-cap, min(cap, value))


def _log_speedup(result: EvalResult, context: RewardContext) -> float | None:
    runtime = result.runtime_ms
    base = result.baseline_ms if result.baseline_ms is not None else context.baseline_ms
    if runtime is None or runtime <= 0 or not base or base <= 0:
        return None
    return math.log(base / runtime)


def _room(cap: float) -> float:
    """``w``: the distance from the lowest ranked score (-cap) down to the floor."""
    return -cap - Reward.floor


class _EnergyScore:
    """The energy term shared by both rewards (or its fallback)."""

    settings: Any
    floor: float
    #: the measurement these rewards read; without it they rank on speed (fallback)
    requires_measurements: ClassVar[tuple[str, ...]] = (MEASUREMENT,)

    def _energy_term(self, result: EvalResult, context: RewardContext) -> float:
        cap = self.settings.cap
        energy = candidate_energy_j(result)
        reference = reference_energy_j(result, context)
        if energy is not None and reference is not None:
            return _clamp(math.log(reference / energy), cap)
        if self.settings.fallback_to_speed:
            speed = _log_speedup(result, context)
            if speed is not None:
                return _clamp(speed, cap)
        return self.floor + 0.025 * _room(cap)


#: what reduces a kernel's energy at a given time, for the generators' objective; the
#: energy findings (kernelpro_plugins_energy.levers) name the one a profile shows
LEVERS_TEXT = (
    "Energy levers: move fewer DRAM bytes (every byte costs energy, even when its time is hidden: read each "
    "input once, keep reused data on chip); issue fewer instructions per byte on memory-bound kernels (16-byte "
    "vector loads and stores, less index arithmetic); keep fewer warps resident just waiting on memory (block "
    "and grid shapes that reach the same bandwidth with fewer active warps, persistent grids); compute products "
    "on tensor cores where the evaluator's tolerance allows; never busy-wait. The energy findings below, when "
    "present, say which of these the profile shows, with the numbers."
)


class EnergyReward(_EnergyScore, Reward):
    name = "energy"
    description = "ln(reference energy / candidate energy) per call for correct candidates; the floor otherwise"
    Settings = EnergyRewardSettings

    def score(self, result: EvalResult, context: RewardContext) -> float:
        if not result.correct:
            return self.floor
        return self._energy_term(result, context)

    def goal(self) -> str:
        return ("Least GPU energy per call: correct versions are ranked by the joules one forward call takes "
                "(the GPU's energy counter over seconds of back-to-back calls), against the reference's, "
                "whatever their speed. " + LEVERS_TEXT)


def runtime_ms(result: EvalResult, source: str = "timing") -> float | None:
    """The result's time per call from ``source`` (see :class:`MatchedSpeedSettings`)."""
    if source == "energy_loop":
        loop = _positive_number(result.measurements.get(MEASUREMENT, {}).get("time_per_call_ms"))
        if loop is not None:
            return loop
    value = result.runtime_ms
    return value if value is not None and value > 0 else None


def fastest_correct_ms(result: EvalResult, context: RewardContext, source: str = "timing") -> float | None:
    """The least runtime among the correct results of the population and ``result``."""
    times = [t for t in (runtime_ms(r, source) for r in (*context.population, result) if r.correct) if t is not None]
    return min(times) if times else None


class EnergyAtMatchedSpeedReward(_EnergyScore, Reward):
    name = "energy_at_matched_speed"
    description = (
        "least energy among correct candidates within `slowdown` of the fastest correct one; "
        "slower correct candidates rank below them, above the floor"
    )
    Settings = MatchedSpeedSettings

    def score(self, result: EvalResult, context: RewardContext) -> float:
        if not result.correct:
            return self.floor
        source = self.settings.speed_source
        runtime = runtime_ms(result, source)
        fastest = fastest_correct_ms(result, context, source)
        if runtime is None or fastest is None:
            return self._energy_term(result, context)
        limit = (1.0 + self.settings.slowdown) * fastest
        if runtime <= limit:
            return self._energy_term(result, context)
        cap = self.settings.cap
        excess = 1.0 - limit / runtime  # in (0, 1): how much slower than the limit
        return -cap - _room(cap) * (0.05 + 0.9 * excess)

    def goal(self) -> str:
        pct = f"{self.settings.slowdown * 100:g} %"
        return (f"Least GPU energy per call at matched speed: among correct versions at most {pct} slower than the "
                "fastest correct one so far, the one whose forward call takes the fewest joules (the GPU's energy "
                f"counter over seconds of back-to-back calls) wins; a version more than {pct} slower ranks below "
                "all of them. Keep the speed of the version you improve and spend the change on energy. "
                + LEVERS_TEXT)
