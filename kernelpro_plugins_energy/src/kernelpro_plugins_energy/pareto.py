"""The time-energy Pareto front of a run's correct candidates."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import attrs


@attrs.frozen
class Point:
    id: str
    runtime_ms: float
    energy_j: float  # joules per call


def dominates(a: Point, b: Point) -> bool:
    """``a`` is no worse than ``b`` in time and energy and better in at least one."""
    return (
        a.runtime_ms <= b.runtime_ms
        and a.energy_j <= b.energy_j
        and (a.runtime_ms < b.runtime_ms or a.energy_j < b.energy_j)
    )


def pareto_front(points: Sequence[Point]) -> list[Point]:
    """The points no other point dominates, by runtime then energy (duplicates all stay)."""
    front = [p for p in points if not any(dominates(q, p) for q in points)]
    return sorted(front, key=lambda p: (p.runtime_ms, p.energy_j, p.id))


def record_energy_j(record: Mapping[str, Any], key: str = "energy_j_per_call") -> float | None:
    """A record's joules per call (``key``) from ``measurements["energy"]``, if usable."""
    value = (record.get("measurements") or {}).get("energy", {}).get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        if math.isfinite(value) and value > 0:
            return value
    return None


def points_from_records(records: Iterable[Mapping[str, Any]]) -> list[Point]:
    """Correct candidates with a runtime and energy per call (as in candidates.jsonl)."""
    points = []
    for rec in records:
        runtime = rec.get("runtime_ms")
        energy = record_energy_j(rec)
        if rec.get("correct") and isinstance(runtime, (int, float)) and runtime > 0 and energy is not None:
            points.append(Point(id=str(rec.get("id")), runtime_ms=float(runtime), energy_j=energy))
    return points
