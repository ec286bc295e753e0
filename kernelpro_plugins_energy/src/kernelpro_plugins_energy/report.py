"""The ``## Energy`` section of report.md: per-candidate energy and the time-energy front.

Input is the run's records as in ``candidates.jsonl``: ``id``, ``verdict``, ``correct``,
``runtime_ms``, ``speedup``, ``reward``, ``flags`` and ``measurements["energy"]`` with the
keys of :class:`kernelpro_plugins_energy.measure.EnergyMeasurement` (the candidate's) and
the same keys prefixed ``reference_`` (the reference measured in the same worker).
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from kernelpro_plugins_energy.pareto import Point, pareto_front, points_from_records, record_energy_j

PLOT_WIDTH = 56
PLOT_HEIGHT = 14


def _num(value: Any, fmt: str, scale: float = 1.0) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value * scale, fmt)
    return "-"


def energy_flags(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Distinct flags in which core reported the energy measurement missing or failed."""
    seen: list[str] = []
    for rec in records:
        for flag in rec.get("flags") or ():
            if flag.startswith(("measurement_unavailable: energy", "measurement_failed: energy")):
                if flag not in seen:
                    seen.append(flag)
    return seen


def ascii_plot(points: Sequence[Point], front: Sequence[Point]) -> str:
    """A text scatter plot: runtime (x) against energy per call (y); ``*`` on the front,
    ``o`` off it."""
    t_lo = min(p.runtime_ms for p in points)
    t_hi = max(p.runtime_ms for p in points)
    e_lo = min(p.energy_j for p in points) * 1000
    e_hi = max(p.energy_j for p in points) * 1000
    grid = [[" "] * PLOT_WIDTH for _ in range(PLOT_HEIGHT)]
    on_front = {p.id for p in front}

    def cell(p: Point) -> tuple[int, int]:
        x = 0 if t_hi == t_lo else round((p.runtime_ms - t_lo) / (t_hi - t_lo) * (PLOT_WIDTH - 1))
        e = p.energy_j * 1000
        y = 0 if e_hi == e_lo else round((e - e_lo) / (e_hi - e_lo) * (PLOT_HEIGHT - 1))
        return PLOT_HEIGHT - 1 - y, x

    for p in points:  # front last, so it wins a shared cell
        if p.id not in on_front:
            row, col = cell(p)
            grid[row][col] = "o"
    for p in front:
        row, col = cell(p)
        grid[row][col] = "*"
    label_hi = f"{e_hi:.4g}"
    label_lo = f"{e_lo:.4g}"
    pad = max(len(label_hi), len(label_lo))
    lines = ["energy mJ/call"]
    for i, cells in enumerate(grid):
        label = label_hi if i == 0 else label_lo if i == PLOT_HEIGHT - 1 else ""
        lines.append(f"{label:>{pad}} |{''.join(cells).rstrip()}")
    lines.append(" " * pad + " +" + "-" * PLOT_WIDTH)
    left = f"{t_lo:.4g}"
    right = f"{t_hi:.4g}"
    middle = "runtime ms"
    gap = max(1, PLOT_WIDTH - len(left) - len(right) - len(middle))
    lines.append(" " * (pad + 2) + left + " " * (gap // 2) + middle + " " * (gap - gap // 2) + right)
    return "\n".join(lines)


def energy_section(records: Sequence[Mapping[str, Any]]) -> str | None:
    """The markdown section, or None when the run neither measured energy nor tried to."""
    measured = [r for r in records if (r.get("measurements") or {}).get("energy")]
    flags = energy_flags(records)
    if not measured and not flags:
        return None
    out = ["## Energy", ""]
    if not measured:
        out.append("Energy was not measured; the run was ranked on speed alone. The evaluator said:")
        out.append("")
        out.extend(f"- `{f}`" for f in flags)
        return "\n".join(out) + "\n"

    references = [e for e in (record_energy_j(r, "reference_energy_j_per_call") for r in measured) if e is not None]
    if references:
        out.append(
            f"Reference (eager PyTorch), measured next to each candidate: median "
            f"{statistics.median(references) * 1000:.4g} mJ per call over {len(references)} measurements."
        )
    first = measured[0]["measurements"]["energy"]
    out.append(
        "Energy per call is the median over counter-aligned windows of the NVML total-energy "
        f"counter ({_num(first.get('trials'), '.0f')} windows of about {_num(first.get('window_s'), '.2f')} s); "
        "`loop ms` is the time per call during those windows (sustained; it exceeds the "
        "runtime when the GPU slows at its power limit), `cv` the spread between windows, "
        "`vs ref` the candidate's energy over the reference's."
    )
    out.append("")

    points = points_from_records(records)
    front = pareto_front(points)
    on_front = {p.id for p in front}
    out.append("| id | verdict | runtime ms | loop ms | speedup | energy mJ/call | vs ref | cv % | power W | sampled W | reward | front |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for rec in records:
        m = (rec.get("measurements") or {}).get("energy") or {}
        energy = record_energy_j(rec)
        ref = record_energy_j(rec, "reference_energy_j_per_call")
        ratio = f"{energy / ref:.3f}" if energy is not None and ref is not None else "-"
        out.append(
            "| {id} | {verdict} | {rt} | {loop} | {sp} | {e} | {ratio} | {cv} | {pw} | {spw} | {rw} | {fr} |".format(
                id=rec.get("id"),
                verdict=rec.get("verdict"),
                rt=_num(rec.get("runtime_ms"), ".4g"),
                loop=_num(m.get("time_per_call_ms"), ".4g"),
                sp=_num(rec.get("speedup"), ".3g"),
                e=_num(m.get("energy_j_per_call"), ".4g", 1000.0),
                ratio=ratio,
                cv=_num(m.get("energy_cv"), ".2f", 100.0),
                pw=_num(m.get("power_w"), ".1f"),
                spw=_num(m.get("power_w_sampled"), ".1f"),
                rw=_num(rec.get("reward"), ".3f"),
                fr="*" if str(rec.get("id")) in on_front else "",
            )
        )
    if flags:
        out.append("")
        out.append("Candidates without energy numbers:")
        out.extend(f"- `{f}`" for f in flags)
    out.append("")
    out.append("### Time-energy Pareto front")
    out.append("")
    if not front:
        out.append("No correct candidate has both a runtime and an energy per call.")
        return "\n".join(out) + "\n"
    out.append("Correct candidates no other dominates (none is at least as fast and as frugal and better in one), fastest first:")
    out.append("")
    out.append("| id | runtime ms | energy mJ/call |")
    out.append("|---|---|---|")
    for p in front:
        out.append(f"| {p.id} | {p.runtime_ms:.4g} | {p.energy_j * 1000:.4g} |")
    out.append("")
    out.append("```text")
    out.append(ascii_plot(points, front))
    out.append("```")
    out.append("")
    out.append("`*` on the front, `o` dominated.")
    return "\n".join(out) + "\n"
