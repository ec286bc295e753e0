"""The ``## Energy`` section of report.md: per-candidate energy and the time-energy front.

Input is the run's records as in ``candidates.jsonl``: ``id``, ``verdict``, ``correct``,
``runtime_ms``, ``speedup``, ``reward``, ``flags`` and ``measurements["energy"]`` with the
keys of :class:`kernelpro_plugins_energy.measure.EnergyMeasurement` (the candidate's) and
the same keys prefixed ``reference_`` (the reference measured in the same worker).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from kernelpro_plugins_energy import matched
from kernelpro_plugins_energy.svg import front_svg
from kernelpro_plugins_energy.pareto import Point, pareto_front, points_from_records, record_energy_j

SVG_NAME = "energy_front.svg"
PLOT_WIDTH = 56
PLOT_HEIGHT = 14


def _num(value: Any, fmt: str, scale: float = 1.0) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value * scale, fmt)
    return "-"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


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
        pooled = [r["measurements"]["energy"] for r in measured
                  if (_number(r["measurements"]["energy"].get("reference_pooled_windows")) or 0) > 0]
        if pooled:
            ages = [a for a in (_number(m.get("reference_pooled_age_s")) for m in pooled) if a is not None]
            out.append(
                f"{len(pooled)} of them took {_num(pooled[0].get('reference_trials'), '.0f')} fresh window(s) pooled "
                "with the reference's windows measured beside earlier candidates on the same GPU, which they agreed "
                f"with within the early-stop spread (oldest pooled window {max(ages) if ages else 0:.0f} s old; "
                "`measurement_params.energy.reference_windows: 0` measures the reference in full each time)."
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


# --- energy at matched speed -------------------------------------------------------------


def _pm(value: float | None, sd: float | None, fmt: str, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    text = format(value * scale, fmt)
    return f"{text} ± {format(sd * scale, fmt)}" if sd is not None else text


def _signed_pct(diff: matched.Difference) -> str:
    return f"{diff.relative * 100:+.2f} %"


def measurement_cost(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Lines comparing the energy measurement's seconds with the rest of each evaluation."""
    energy_s: list[float] = []
    own_s: list[float] = []
    for rec in records:
        fields = matched.energy_fields((rec.get("measurements") or {}).get("energy") or {})
        spent = fields["energy_seconds"]
        evaluate = (rec.get("seconds") or {}).get("evaluate")
        if spent is None or not isinstance(evaluate, (int, float)):
            continue
        energy_s.append(spent)
        own_s.append(max(0.0, float(evaluate) - spent))
    if not energy_s:
        return []
    e_med = statistics.median(energy_s)
    o_med = statistics.median(own_s)
    over = sum(1 for e, o in zip(energy_s, own_s) if e > o)
    lines = [
        f"Energy measurement cost: median {e_med:.2f} s per candidate (the candidate's and the reference's "
        f"measurements together; {min(energy_s):.2f}-{max(energy_s):.2f} s), against a median {o_med:.2f} s for "
        f"the rest of the evaluation ({len(energy_s)} evaluations; `measure s` and `evaluate s` per candidate in the table above)."
    ]
    if over:
        lines.append(
            f"In {over} of {len(energy_s)} evaluations the energy measurement took longer than the rest of the "
            "evaluation: fewer `measurement_params.energy.trials` or a shorter `window_s` (as long as a window "
            "keeps `min_counter_updates` counter updates) brings it down."
        )
    return lines


def matched_speed_section(
    records: Sequence[Mapping[str, Any]],
    max_slowdown: float = 0.02,
    speed_source: str = "timing",
    phase2_ids: Sequence[str] = (),
    two_phase: bool = False,
    svg_dir: Path | None = None,
) -> str | None:
    """``### Energy at matched speed``: the speed winner, the window, the chosen point (the
    least-energy candidate in the window) and the front with every number's spread. With
    ``svg_dir``, the scatter is also written there as ``energy_front.svg`` and linked."""
    cands = matched.from_records(records, speed_source)
    if not any(c.energy_j is not None for c in cands):
        return None
    by_id = {str(r.get("id")): r for r in records}
    speed = matched.speed_winner(cands)
    assert speed is not None
    chosen = matched.energy_winner(cands, max_slowdown)
    limit = matched.window_ms(speed, max_slowdown)
    key = matched.energy_key(matched.within(cands, max_slowdown))
    time_name = "time per call in the energy loop" if speed_source == "energy_loop" else "evaluator timing"
    out = ["### Energy at matched speed", ""]
    if two_phase:
        n2 = len(phase2_ids)
        out.append(f"Two-phase search: {len(records) - n2} candidates in phase 1 (speed), {n2} in phase 2 "
                   f"(least energy within {max_slowdown * 100:g} % of the fastest).")
    out.append(
        f"Window: at most {max_slowdown * 100:g} % slower than the fastest correct candidate "
        f"({time_name}): <= {limit:.4g} ms. The chosen point is the candidate with the least energy in the window "
        + ("(joules per call over the reference's measured next to it in the same evaluation, as the "
           "`energy_at_matched_speed` reward ranks them)." if key == "ratio" else "(joules per call).")
        + " `±` is one standard deviation: of the timed calls for times, between energy windows for joules."
    )
    out.append("")
    out.append("| | id | time ms | energy mJ/call | vs ref |")
    out.append("|---|---|---|---|---|")
    rows = [("speed winner", speed)] + ([("chosen point", chosen)] if chosen is not None else [])
    for label, c in rows:
        ratio = c.energy_ratio
        out.append(f"| {label} | {c.id} | {_pm(c.runtime_ms, c.runtime_sd_ms, '.4g')} | "
                   f"{_pm(c.energy_j, c.energy_sd_j, '.4g', 1000.0)} | {f'{ratio:.4f}' if ratio else '-'} |")
    out.append("")
    if chosen is None:
        out.append("No candidate in the window has an energy number: nothing to choose on energy.")
    elif chosen.id == speed.id:
        out.append("The speed winner is also the least-energy candidate in the window.")
    else:
        assert chosen.energy_j is not None and speed.energy_j is not None
        de = matched.difference(chosen.energy_j, chosen.energy_sd_j, speed.energy_j, speed.energy_sd_j)
        dt = matched.difference(chosen.runtime_ms, chosen.runtime_sd_ms, speed.runtime_ms, speed.runtime_sd_ms)
        spread = f" ± {de.spread * 1000:.3g} mJ" if de.spread is not None else " (spread unknown)"
        verdict = {True: "larger than twice its spread", False: "within twice its spread: not resolved",
                   None: "its spread is unknown"}[de.resolved]
        out.append(f"Chosen point against the speed winner: energy {de.value * 1000:+.4g} mJ per call{spread} "
                   f"({_signed_pct(de)}; {verdict}), time {_signed_pct(dt)}.")
    best = [r for r in records if r.get("correct") and isinstance(r.get("reward"), (int, float))]
    if chosen is not None and best:
        top = max(best, key=lambda r: r["reward"])
        if str(top.get("id")) != chosen.id:
            out.append(f"The highest reward at evaluation time is {top.get('id')}, not the chosen point: best.py "
                       "is the reward's choice after the end-of-run rescoring (with `energy_at_matched_speed` "
                       "at the same slowdown it is the chosen point).")
    out.append("")
    points = [Point(id=c.id, runtime_ms=c.runtime_ms, energy_j=c.energy_j) for c in cands if c.energy_j is not None]
    front = {p.id for p in pareto_front(points)}
    inside = {c.id for c in matched.within(cands, max_slowdown)}
    phase2 = set(phase2_ids)
    out.append("Time-energy front and the window, fastest first:")
    out.append("")
    out.append("| id | time ms | energy mJ/call | vs ref | measure s | evaluate s | front | in window | phase | chosen |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for c in sorted(cands, key=lambda c: c.runtime_ms):
        if c.id not in front and c.id not in inside:
            continue
        evaluate = (by_id.get(c.id, {}).get("seconds") or {}).get("evaluate")
        ratio = c.energy_ratio
        out.append(
            f"| {c.id} | {_pm(c.runtime_ms, c.runtime_sd_ms, '.4g')} | {_pm(c.energy_j, c.energy_sd_j, '.4g', 1000.0)} | "
            f"{f'{ratio:.4f}' if ratio else '-'} | {_num(c.energy_seconds, '.2f')} | {_num(evaluate, '.2f')} | "
            f"{'*' if c.id in front else ''} | {'yes' if c.id in inside else 'no'} | "
            f"{(2 if c.id in phase2 else 1) if two_phase else '-'} | {'<-' if chosen is not None and c.id == chosen.id else ''} |"
        )
    if svg_dir is not None:
        try:
            (svg_dir / SVG_NAME).write_text(front_svg(cands, sorted(front), speed.id,
                                                      chosen.id if chosen else None, limit))
            out.append("")
            out.append(f"![time and energy per call: the window shaded, the front dashed]({SVG_NAME})")
        except OSError as exc:
            out.append("")
            out.append(f"(the plot {SVG_NAME} could not be written: {exc.strerror or exc})")
    cost = measurement_cost(records)
    if cost:
        out.append("")
        out.extend(cost)
    return "\n".join(out) + "\n"
