"""Energy at matched speed over a set of measured candidates: the speed winner, the window
``(1 + max_slowdown) x`` its time, the energy winner inside that window, and the spread of
each number.

Shared by the two-phase search (:mod:`kernelpro_plugins_energy.twophase`, from tree nodes),
the report section and the bench section (from ``candidates.jsonl`` records), so that the
three agree on which candidate is chosen.

Energy is ranked like the ``energy_at_matched_speed`` reward ranks it: by the candidate's
joules per call over the reference's joules per call measured next to it in the same
evaluation (the same conditions: same worker, same inputs, seconds apart), when every
candidate compared has that reference number; otherwise by joules per call.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Mapping, Sequence

import attrs

MEASUREMENT = "energy"


def _positive(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        if math.isfinite(value) and value > 0:
            return value
    return None


def _non_negative(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        if math.isfinite(value) and value >= 0:
            return value
    return None


@attrs.frozen
class Measured:
    """One correct candidate's time and energy, each with its spread (a standard deviation
    estimated from the measurement's own repeats; None where it was not reported)."""

    id: str
    runtime_ms: float
    runtime_sd_ms: float | None = None
    energy_j: float | None = None
    energy_sd_j: float | None = None
    reference_energy_j: float | None = None
    # seconds the energy measurement took in this candidate's evaluation (candidate + reference)
    energy_seconds: float | None = None

    @property
    def energy_ratio(self) -> float | None:
        if self.energy_j is None or self.reference_energy_j is None:
            return None
        return self.energy_j / self.reference_energy_j


def runtime_from(runtime_ms: Any, energy: Mapping[str, Any], speed_source: str) -> float | None:
    """The time a candidate is compared on: the evaluator's timing, or with ``energy_loop``
    the time per call during the energy windows (the timing where there is none)."""
    if speed_source == "energy_loop":
        loop = _positive(energy.get("time_per_call_ms"))
        if loop is not None:
            return loop
    return _positive(runtime_ms)


def energy_fields(energy: Mapping[str, Any]) -> dict[str, float | None]:
    """Joules per call, its spread (the coefficient of variation between windows times the
    median) and the reference's joules per call, from a measurement dict."""
    e = _positive(energy.get("energy_j_per_call"))
    cv = _non_negative(energy.get("energy_cv"))
    seconds = [s for s in (_non_negative(energy.get("measure_s")), _non_negative(energy.get("reference_measure_s")))
               if s is not None]
    return {
        "energy_j": e,
        "energy_sd_j": e * cv if e is not None and cv is not None else None,
        "reference_energy_j": _positive(energy.get("reference_energy_j_per_call")),
        "energy_seconds": sum(seconds) if seconds else None,
    }


def from_record(record: Mapping[str, Any], speed_source: str = "timing") -> Measured | None:
    """A correct record of ``candidates.jsonl`` with a runtime, else None."""
    if not record.get("correct"):
        return None
    energy = (record.get("measurements") or {}).get(MEASUREMENT) or {}
    runtime = runtime_from(record.get("runtime_ms"), energy, speed_source)
    if runtime is None:
        return None
    timing = ((record.get("result") or {}).get("timing")) or {}
    cv = _non_negative(timing.get("cv"))
    if speed_source == "energy_loop" and _positive(energy.get("time_per_call_ms")) is not None:
        cv = None  # the loop time has no spread of its own in the record
    return Measured(id=str(record.get("id")), runtime_ms=runtime,
                    runtime_sd_ms=runtime * cv if cv is not None else None, **energy_fields(energy))


def from_records(records: Iterable[Mapping[str, Any]], speed_source: str = "timing") -> list[Measured]:
    return [m for m in (from_record(r, speed_source) for r in records) if m is not None]


def speed_winner(cands: Sequence[Measured]) -> Measured | None:
    """The fastest candidate (ties: the first)."""
    return min(cands, key=lambda c: c.runtime_ms) if cands else None


def window_ms(winner: Measured, max_slowdown: float) -> float:
    return (1.0 + max_slowdown) * winner.runtime_ms


def within(cands: Sequence[Measured], max_slowdown: float) -> list[Measured]:
    """Candidates no slower than ``(1 + max_slowdown)`` x the fastest."""
    winner = speed_winner(cands)
    if winner is None:
        return []
    limit = window_ms(winner, max_slowdown)
    return [c for c in cands if c.runtime_ms <= limit]


def energy_key(cands: Sequence[Measured]) -> str:
    """``ratio`` when every candidate with energy has the reference's beside it, else ``joules``."""
    measured = [c for c in cands if c.energy_j is not None]
    if measured and all(c.reference_energy_j is not None for c in measured):
        return "ratio"
    return "joules"


def energy_order(cands: Sequence[Measured]) -> list[Measured]:
    """Candidates with energy, least first (by :func:`energy_key`; ties: faster first)."""
    key = energy_key(cands)
    measured = [c for c in cands if c.energy_j is not None]

    def value(c: Measured) -> float:
        ratio = c.energy_ratio
        return ratio if key == "ratio" and ratio is not None else float(c.energy_j or math.inf)

    return sorted(measured, key=lambda c: (value(c), c.runtime_ms))


def energy_winner(cands: Sequence[Measured], max_slowdown: float) -> Measured | None:
    """The least-energy candidate within the window of the fastest; None without energy."""
    ranked = energy_order(within(cands, max_slowdown))
    return ranked[0] if ranked else None


@attrs.frozen
class Difference:
    """``a - b`` with the spread of the difference (root sum of squares of the two)."""

    value: float
    spread: float | None
    relative: float  # (a - b) / b

    @property
    def resolved(self) -> bool | None:
        """Whether the difference exceeds twice its spread (None: spread unknown)."""
        if self.spread is None:
            return None
        return abs(self.value) > 2.0 * self.spread


def difference(a: float, a_sd: float | None, b: float, b_sd: float | None) -> Difference:
    spread = math.hypot(a_sd, b_sd) if a_sd is not None and b_sd is not None else None
    return Difference(value=a - b, spread=spread, relative=(a - b) / b if b else math.nan)


def median_or_none(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return float(statistics.median(got)) if got else None
