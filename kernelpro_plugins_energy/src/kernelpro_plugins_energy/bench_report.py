"""The ``## Energy at matched speed`` section of a bench's report.md.

Per problem, from its run's ``candidates.jsonl`` (with ``retimes.jsonl`` applied): the speed
winner (the fastest correct candidate) and the energy winner (the least energy within
``max_slowdown`` of it, :mod:`kernelpro_plugins_energy.matched`), each with its time and
joules per call, and the energy winner's difference from the speed winner with the spread
of that difference (the two measurements' standard deviations between energy windows,
combined as a root sum of squares). A difference larger than twice its spread is marked
resolved.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from kernelpro_plugins_energy import matched


def read_run_records(run_dir: Path) -> list[dict[str, Any]]:
    """The run's records, each re-timed candidate with its last evaluation's numbers."""
    path = run_dir / "candidates.jsonl"
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_id = {r.get("id"): r for r in records}
    retimes = run_dir / "retimes.jsonl"
    if retimes.exists():
        for line in retimes.read_text().splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            rec, result = by_id.get(entry.get("id")), entry.get("result") or {}
            if rec is None:
                continue
            timing = result.get("timing") or {}
            rec.update(correct=result.get("verdict") == "correct", runtime_ms=timing.get("median_ms"),
                       result=result, measurements=result.get("measurements") or rec.get("measurements"))
    return records


def problem_numbers(records: Sequence[Mapping[str, Any]], max_slowdown: float,
                    speed_source: str) -> dict[str, Any] | None:
    """The speed winner, the energy winner and their differences; None without energy."""
    cands = matched.from_records(records, speed_source)
    speed = matched.speed_winner(cands)
    chosen = matched.energy_winner(cands, max_slowdown)
    if speed is None or chosen is None or speed.energy_j is None:
        return None
    assert chosen.energy_j is not None
    de = matched.difference(chosen.energy_j, chosen.energy_sd_j, speed.energy_j, speed.energy_sd_j)
    dt = matched.difference(chosen.runtime_ms, chosen.runtime_sd_ms, speed.runtime_ms, speed.runtime_sd_ms)
    seconds = [c.energy_seconds for c in cands if c.energy_seconds is not None]
    evaluate = [float(r["seconds"]["evaluate"]) for r in records
                if isinstance((r.get("seconds") or {}).get("evaluate"), (int, float))]
    return {
        "speed_id": speed.id, "speed_ms": speed.runtime_ms, "speed_ms_sd": speed.runtime_sd_ms,
        "speed_j": speed.energy_j, "speed_j_sd": speed.energy_sd_j,
        "energy_id": chosen.id, "energy_ms": chosen.runtime_ms, "energy_ms_sd": chosen.runtime_sd_ms,
        "energy_j": chosen.energy_j, "energy_j_sd": chosen.energy_sd_j,
        "diff_j": de.value, "diff_j_spread": de.spread, "diff_rel": de.relative, "resolved": de.resolved,
        "diff_ms_rel": dt.relative, "candidates": len(cands),
        # timed but not measured: slower than evaluator.measure_within allows
        "skipped": sum(1 for r in records if any(str(f).startswith("measurement_skipped: energy")
                                                 for f in r.get("flags") or ())),
        "energy_seconds": sum(seconds) if seconds else None, "evaluate_seconds": sum(evaluate) if evaluate else None,
    }


def _pm(value: float | None, sd: float | None, fmt: str, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    return format(value * scale, fmt) + (f" ± {format(sd * scale, fmt)}" if sd is not None else "")


def bench_section(problems: Sequence[Mapping[str, Any]], max_slowdown: float = 0.02,
                  speed_source: str = "timing") -> str | None:
    """The markdown section, or None when no problem's run measured energy."""
    rows = []
    for p in problems:
        run_dir = p.get("run_dir")
        records = read_run_records(Path(run_dir)) if run_dir else []
        rows.append((p, problem_numbers(records, max_slowdown, speed_source) if records else None))
    if not any(n is not None for _, n in rows):
        return None
    out = ["## Energy at matched speed", ""]
    out.append(
        f"Per problem: the speed winner (fastest correct candidate) and the energy winner (least energy among "
        f"candidates at most {max_slowdown * 100:g} % slower than it), each timed and measured in its own "
        "evaluation. `ΔE` is the energy winner's joules per call minus the speed winner's, `±` its spread "
        "(one standard deviation of each, between energy windows, combined); resolved: |ΔE| > 2 x spread. "
        "Times carry the standard deviation of the timed calls."
    )
    out.append("")
    out.append("| problem | speed winner | ms | mJ/call | energy winner | ms | mJ/call | ΔE mJ | ΔE % | Δt % | resolved |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    done = []
    for p, n in rows:
        if n is None:
            out.append(f"| {p.get('name')} | - | - | - | - | - | - | - | - | - | no energy numbers |")
            continue
        done.append(n)
        spread = f" ± {n['diff_j_spread'] * 1000:.3g}" if n["diff_j_spread"] is not None else ""
        resolved = {True: "yes", False: "no", None: "spread unknown"}[n["resolved"]]
        if n["energy_id"] == n["speed_id"]:
            resolved = "same candidate"
        out.append(
            f"| {p.get('name')} | {n['speed_id']} | {_pm(n['speed_ms'], n['speed_ms_sd'], '.4g')} | "
            f"{_pm(n['speed_j'], n['speed_j_sd'], '.4g', 1000.0)} | {n['energy_id']} | "
            f"{_pm(n['energy_ms'], n['energy_ms_sd'], '.4g')} | {_pm(n['energy_j'], n['energy_j_sd'], '.4g', 1000.0)} | "
            f"{n['diff_j'] * 1000:+.4g}{spread} | {n['diff_rel'] * 100:+.2f} | {n['diff_ms_rel'] * 100:+.2f} | {resolved} |"
        )
    out.append("")
    differ = [n for n in done if n["energy_id"] != n["speed_id"]]
    resolved_n = sum(1 for n in differ if n["resolved"])
    line = (f"{len(done)} of {len(rows)} problems with energy numbers; the energy winner differs from the speed "
            f"winner in {len(differ)}, by more than twice the spread in {resolved_n}")
    if differ:
        line += f"; median ΔE {statistics.median(n['diff_rel'] for n in differ) * 100:+.2f} % where they differ"
    out.append(line + ".")
    e_s = [n["energy_seconds"] for n in done if n["energy_seconds"] is not None]
    v_s = [n["evaluate_seconds"] for n in done if n["evaluate_seconds"] is not None]
    if e_s and v_s:
        total_e, total_v = sum(e_s), sum(v_s)
        skipped = sum(n.get("skipped", 0) for n in done)
        skip_txt = (f"; {skipped} candidates slower than `evaluator.measure_within` allows were timed but not "
                    f"measured" if skipped else "")
        out.append(f"Energy measurement: {total_e:.1f} s of {total_v:.1f} s of evaluation "
                   f"({total_e / total_v * 100:.0f} %; the rest of the evaluations took {total_v - total_e:.1f} s"
                   f"{skip_txt}).")
    return "\n".join(out) + "\n"
