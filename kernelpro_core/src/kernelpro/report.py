"""report.md: what happened, the baseline, what won and by which rule, every candidate.

Every speedup printed here is the reference's median time over the candidate's median
time, both printed beside it with their spread (IQR, CV), so that a reader can check it by
hand. The reference is the one timed in the candidate's own evaluation (interleaved with
it), not the baseline job's: the two differ when the machine's speed changes during a run.
A timing whose CV is above ``evaluator.noisy_cv`` is marked noisy wherever it is printed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from kernelpro.rundir import RunDir, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from kernelpro.loop import Optimizer
    from kernelpro.records import EvalResult, TimingStats

NOISY_MARK = "⚠ noisy"
BEST_MARK = "★"


# --- numbers ---------------------------------------------------------------------------------


def fmt_ms(x: float | None) -> str:
    """A time in ms with at least four significant digits, never in exponent notation."""
    if not isinstance(x, (int, float)) or math.isnan(x):
        return "-"
    if x == 0:
        return "0"
    decimals = max(0, 3 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def fmt_x(x: float | None) -> str:
    """A speedup: two decimals (three significant digits below 0.1x)."""
    if not isinstance(x, (int, float)):
        return "-"
    if 0 < abs(x) < 0.1:
        return f"{x:.{2 - math.floor(math.log10(abs(x)))}f}x"
    return f"{x:.2f}x"


def fmt_timing(stats: "TimingStats | Mapping[str, Any] | None", noisy_cv: float | None) -> str:
    """``median ms (IQR i, CV c)``, with the noisy mark when the CV is above ``noisy_cv``."""
    if stats is None:
        return "-"
    get = stats.get if isinstance(stats, Mapping) else (lambda k: getattr(stats, k, None))
    median, iqr, cv = get("median_ms"), get("iqr_ms"), get("cv")
    if not isinstance(median, (int, float)):
        return "-"
    spread = []
    if isinstance(iqr, (int, float)):
        spread.append(f"IQR {fmt_ms(iqr)}")
    if isinstance(cv, (int, float)):
        spread.append(f"CV {cv:.2f}" + (f" {NOISY_MARK}" if is_noisy(cv, noisy_cv) else ""))
    return f"{fmt_ms(median)} ms" + (f" ({', '.join(spread)})" if spread else "")


def is_noisy(cv: Any, noisy_cv: float | None) -> bool:
    return isinstance(cv, (int, float)) and noisy_cv is not None and cv > noisy_cv


KEEP_REFERENCE = "no candidate was faster than the reference: keep the reference"


def faster_than_reference(speedup: float | None) -> bool | None:
    """Whether a best candidate's speedup over the eager reference (same evaluation) makes it
    worth using: False means keep the reference; None when there is no timed best."""
    return None if speedup is None else speedup > 1.0


def speedup_line(speedup: float | None, candidate: Any, reference: Any, noisy_cv: float | None) -> str:
    """``2.91x = reference 131.9 ms (...) / candidate 45.30 ms (...)``: the one form every
    speedup of a candidate takes in the report (and in ``kernelpro optimize``'s output)."""
    return (f"{fmt_x(speedup)} = reference {fmt_timing(reference, noisy_cv)} / "
            f"candidate {fmt_timing(candidate, noisy_cv)}")


def speedup_short(rec: Mapping[str, Any], noisy_cv: float | None) -> str:
    """A record's outcome in one short phrase for progress lines: ``2.91x = reference
    131.9 ms / candidate 45.30 ms`` (with the CVs when noisy), or its verdict."""
    if not rec.get("correct") or rec.get("speedup") is None:
        return str(rec.get("verdict"))
    cand, ref = record_timings(rec)
    text = (f"{fmt_x(rec['speedup'])} = reference {fmt_ms(rec.get('baseline_ms'))} ms / "
            f"candidate {fmt_ms(rec.get('runtime_ms'))} ms")
    loud = [f"{who} CV {s['cv']:.2f}" for who, s in (("reference", ref), ("candidate", cand))
            if s and is_noisy(s.get("cv"), noisy_cv)]
    return text + (f" ({NOISY_MARK}: {', '.join(loud)})" if loud else "")


# --- run-directory records -------------------------------------------------------------------


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """candidates.jsonl with each candidate's latest re-timing (retimes.jsonl) applied: the
    numbers the run's best was chosen on."""
    from kernelpro.records import EvalResult, from_json

    run = RunDir(run_dir)  # a line a kill cut short is skipped (that candidate is evaluated again)
    records = run.records()
    by_id = {rec["id"]: rec for rec in records}
    for line in run.read_jsonl("retimes.jsonl"):
        rec = by_id.get(line.get("id"))
        if rec is None:
            continue
        result = from_json(line["result"], EvalResult)
        rec.update(verdict=result.verdict.value, correct=result.correct, reason=result.reason,
                   runtime_ms=result.runtime_ms, baseline_ms=result.baseline_ms, speedup=result.speedup,
                   flags=list(result.flags), retimed=True, result=line["result"])
        if result.baseline_compiled is not None:
            rec["compiled_baseline_ms"] = result.baseline_compiled.median_ms
    return records


def record_timings(rec: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The candidate's and the reference's timing statistics from a record's ``result``."""
    result = rec.get("result") or {}
    return result.get("timing"), result.get("baseline")


def best_summary(rec: Mapping[str, Any] | None, noisy_cv: float | None = None) -> dict[str, Any] | None:
    """The best candidate's numbers for a machine-readable summary (``optimize --json``)."""
    if rec is None:
        return None
    cand, ref = record_timings(rec)

    def stats(s: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if not s:
            return None
        return {"median_ms": s.get("median_ms"), "iqr_ms": s.get("iqr_ms"), "cv": s.get("cv"), "n": s.get("n"),
                "noisy": is_noisy(s.get("cv"), noisy_cv)}

    return {"id": rec["id"], "description": rec.get("description"), "speedup": rec.get("speedup"),
            "runtime_ms": rec.get("runtime_ms"), "reference_ms": rec.get("baseline_ms"),
            "candidate_timing": stats(cand), "reference_timing": stats(ref),
            "compiled_reference_ms": rec.get("compiled_baseline_ms"), "retimed": bool(rec.get("retimed")),
            "flags": list(rec.get("flags") or [])}


# --- report.md -------------------------------------------------------------------------------


def write_report(opt: "Optimizer", summary: dict[str, Any], best: dict[str, Any] | None,
                 sections: list[str]) -> None:
    noisy_cv = float(opt.config.evaluator.noisy_cv)
    best_id = best["id"] if best else None
    lines = [f"# KernelPro run: {opt.problem.name}", ""]
    lines += _run_lines(opt, summary)
    lines += _what_happened(opt, summary, best, noisy_cv)
    lines += _baseline_section(opt, noisy_cv)
    lines += _best_section(opt, best, noisy_cv)
    lines += _candidates_section(opt.records, opt.results, best_id, noisy_cv)
    lines += _failures_section(opt.records)
    lines += generator_failures_section(opt.run.read_jsonl("errors.jsonl"))
    lines += _usage_section(opt.records)
    lines += _tree_section(opt, best_id, noisy_cv)
    for section in sections:
        lines += [section.rstrip(), ""]
    write_atomic(opt.run.path / "report.md", "\n".join(lines))


def _run_lines(opt: "Optimizer", summary: dict[str, Any]) -> list[str]:
    base = opt.baseline
    return [
        f"- device: {opt.device}" + (f" ({base.gpu_name})" if base and base.gpu_name else ""),
        f"- generator: {opt.config.generator.name}; search: {opt.config.search.name}; "
        f"reward: {opt.config.reward.name}",
        f"- evaluated: {summary['evaluated']} candidates, {summary['correct']} correct; "
        f"stopped: {summary['stopped_because']}",
        "",
    ]


def _what_happened(opt: "Optimizer", summary: dict[str, Any], best: dict[str, Any] | None,
                   noisy_cv: float) -> list[str]:
    out = ["## What happened", ""]
    failed = [r for r in opt.records if not r["correct"]]
    verdicts: dict[str, int] = {}
    for r in failed:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    out.append(f"- {summary['evaluated']} candidates evaluated: {summary['correct']} correct"
               + (f", {len(failed)} failed ({', '.join(f'{v} {k}' for k, v in sorted(verdicts.items()))})"
                  if failed else "") + f"; stopped: {summary['stopped_because']}.")
    if best is None:
        out += ["- No candidate was correct: the reference stays as it is.", ""]
        return out
    result = opt.results[best["id"]]
    out.append(f"- Best: `{best['id']}` ({_one_line(best['description'], 80)}): "
               f"**{speedup_line(best['speedup'], result.timing, result.baseline, noisy_cv)}**, "
               f"both timed in the same evaluation. Saved as `best.py`.")
    if summary.get("faster_than_reference") is False:
        out.append(f"- **{KEEP_REFERENCE[0].upper()}{KEEP_REFERENCE[1:]}.** `best.py` is the best candidate by "
                   "the run's reward, to study, not to use in its place.")
    after = opt.analyses.get(best["id"])
    before_id = _profiled_ancestor(opt, best["id"])
    if after is not None and after.bottleneck is not None:
        text = f"- Bottleneck of the best: {_bottleneck_text(after.bottleneck)}"
        if before_id is not None:
            bb = opt.analyses[before_id].bottleneck
            text += f"; before it, its ancestor `{before_id}`: {_bottleneck_text(bb)}" if bb else ""
        else:
            text += " (no ancestor of it was profiled, and the reference itself is not profiled)"
        out.append(text + ".")
    elif opt.config.profiling.enabled:
        out.append("- The best was not profiled successfully: no bottleneck to report.")
    else:
        out.append("- Profiling was off (profiling.enabled: false): no bottleneck to report.")
    if after is not None and after.findings:
        out.append("- Top findings on the best: " + "; ".join(
            f"[{f.severity}] {f.title} ({f.tool})" for f in after.findings[:3]) + ".")
    out += ["- The search tree: [tree.svg](tree.svg) (drawn below as text too).", ""]
    return out


def _profiled_ancestor(opt: "Optimizer", cid: str) -> str | None:
    """The profiled candidate nearest the root on the path to ``cid`` (``cid`` excluded)."""
    try:
        path = [n.id for n in opt.tree.path_to_root(cid)]
    except (KeyError, AttributeError):
        return None
    for node_id in reversed(path):  # root first
        if node_id != cid and node_id in opt.analyses and opt.analyses[node_id].bottleneck is not None:
            return node_id
    return None


def _bottleneck_text(bn: Any) -> str:
    frac = f", {bn.roofline_fraction:.0%} of the roofline" if bn.roofline_fraction is not None else ""
    return f"{bn.kind}{' (' + bn.pipe + ')' if bn.pipe else ''}{frac}"


def _baseline_section(opt: "Optimizer", noisy_cv: float) -> list[str]:
    base = opt.baseline
    out = ["## Baseline", ""]
    if not (base and base.baseline):
        return out + ["The reference was not timed.", ""]
    b = base.baseline
    out += [f"The baseline job timed the eager reference alone: {fmt_timing(b, noisy_cv)}, n={b.n}, "
            f"method {b.method}."
            + (f" torch.compile of the reference: {fmt_timing(base.baseline_compiled, noisy_cv)}."
               if base.baseline_compiled else ""), ""]
    out.append("Both run under PyTorch's default flags, as users run their models (on a GPU, cuDNN "
               "convolutions may use TF32); correctness is judged against the reference computed in strict fp32.")
    if base.baseline_strict:
        out.append(f"In strict fp32 (no TF32) the same baseline job timed the eager reference at "
                   f"{fmt_timing(base.baseline_strict, noisy_cv)}"
                   + (f" and torch.compile at {fmt_timing(base.baseline_compiled_strict, noisy_cv)}"
                      if base.baseline_compiled_strict else "") + ".")
    out.append("")
    refs = [r.baseline.median_ms for r in opt.results.values() if r.baseline is not None]
    out.append("Speedups are not divided by this time: each candidate's evaluation times the reference again, "
               "interleaved with the candidate, and the speedup is that reference time over the candidate's "
               "(both are in the table of candidates).")
    if refs:
        lo, hi = min(refs), max(refs)
        out.append(f"Over this run's {len(refs)} evaluations the reference's median ranged from {fmt_ms(lo)} "
                   f"to {fmt_ms(hi)} ms.")
        if hi > 1.2 * lo or hi > 1.2 * b.median_ms or lo < b.median_ms / 1.2:
            out.append("These differ by more than 20 %: the machine's speed changed during the run, so compare "
                       "candidates by their speedups, not by their times.")
    out.append("")
    if base.flags:
        out += ["Flags on the problem: " + "; ".join(base.flags), ""]
    return out


def _best_section(opt: "Optimizer", best: dict[str, Any] | None, noisy_cv: float) -> list[str]:
    out = ["## Best result", ""]
    reward = opt.config.reward.name
    rule = (f"The best is the correct candidate with the highest reward (`{reward}`: "
            f"{getattr(opt.reward, 'description', '') or 'see the reward plugin'}). "
            "Candidates are ranked on the speedup against the reference timed in their own evaluation, not on "
            "their raw times, which are comparable only while the machine's speed stays the same. "
            f"A candidate whose timing has a CV above evaluator.noisy_cv ({noisy_cv:g}; marked `{NOISY_MARK}`) "
            "is timed again before it can be the best (`retimes.jsonl`; the table shows the new timing, which "
            "counts even if it is noisy too); one that was not timed again (at most "
            f"{_max_retimes()} are, per run) is passed over.")
    if best is None:
        return out + ["No candidate was correct.", "", rule, ""]
    res = opt.results[best["id"]]
    out += [
        f"`{best['id']}` ({_one_line(best['description'], 200)}): "
        f"**{speedup_line(best['speedup'], res.timing, res.baseline, noisy_cv)}**"
        + (f", n={res.timing.n}" if res.timing else "")
        + (f"; torch.compile of the reference: {fmt_ms(best['compiled_baseline_ms'])} ms"
           f" ({best.get('compiled_baseline_from') or 'measured'})" if best.get("compiled_baseline_ms") else "")
        + ". Saved as `best.py`.",
        "",
        rule + (" This one was timed again: its numbers are the second timing's." if best.get("retimed") else ""),
        "",
    ]
    analysis = opt.analyses.get(best["id"])
    if analysis is not None:
        if analysis.bottleneck is not None:
            bn = analysis.bottleneck
            frac = f" ({bn.roofline_fraction:.0%} of the roofline)" if bn.roofline_fraction is not None else ""
            out += [f"Bottleneck: **{bn.kind}**{frac}: {bn.summary}", ""]
        for f in analysis.findings[:8]:
            out.append(f"- [{f.severity}] {f.title} ({f.tool}): {f.message} Action: {f.action}")
        if analysis.findings:
            out.append("")
    return out


def _max_retimes() -> int:
    from kernelpro.loop import MAX_RETIMES

    return MAX_RETIMES


CANDIDATE_COLUMNS = ("id", "parent", "generator", "change", "verdict", "candidate ms", "reference ms",
                     "speedup", "reward", "notes")


def _candidates_section(records: list[dict[str, Any]], results: Mapping[str, "EvalResult"], best_id: str | None,
                        noisy_cv: float) -> list[str]:
    out = ["## Candidates", "",
           "`speedup` = `reference ms` / `candidate ms`: medians timed in the same evaluation, interleaved "
           f"(IQR and CV beside each; `{NOISY_MARK}`: CV above evaluator.noisy_cv {noisy_cv:g}). "
           f"`{BEST_MARK}` marks the best.", "",
           "| " + " | ".join(CANDIDATE_COLUMNS) + " |", "|" + "---|" * len(CANDIDATE_COLUMNS)]
    for rec in records:
        res = results.get(rec["id"])
        cand, ref = (res.timing, res.baseline) if res is not None else record_timings(rec)
        desc = _one_line(rec["description"], 70).replace("|", "\\|")
        reward = f"{rec['reward']:.3f}" if isinstance(rec.get("reward"), (int, float)) else "-"
        notes = []
        if rec["id"] == best_id:
            notes.append(f"{BEST_MARK} best")
        if rec.get("retimed"):
            notes.append("timed again")
        shown_speedup = rec["speedup"] if rec.get("correct") else None
        lines_ref = fmt_timing(ref, noisy_cv) if rec.get("correct") else "-"
        lines_cand = fmt_timing(cand, noisy_cv) if rec.get("correct") else "-"
        out.append(f"| {rec['id']} | {rec['parent']} | {rec['generator']} | {desc} | {rec['verdict']} | "
                   f"{lines_cand} | {lines_ref} | {fmt_x(shown_speedup)} | {reward} | {', '.join(notes)} |")
    out.append("")
    return out


def _failures_section(records: list[dict[str, Any]]) -> list[str]:
    failed = [r for r in records if not r["correct"]]
    if not failed:
        return []
    out = ["## Failures", ""]
    for rec in failed:
        out.append(f"- `{rec['id']}` {rec['verdict']}: {(rec.get('reason') or '')[:300]}")
    return out + [""]


def _usage_section(records: list[dict[str, Any]]) -> list[str]:
    usage = _usage_totals(records)
    if not usage:
        return []
    return ["## Generator usage", "",
            ", ".join(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}" for k, v in usage.items()), ""]


def _tree_section(opt: "Optimizer", best_id: str | None, noisy_cv: float) -> list[str]:
    out = ["## Search tree", ""]
    try:
        from kernelpro.tree_svg import write_tree_svg

        write_tree_svg(opt.tree, opt.run.path / "tree.svg", best_id, _svg_timings(opt, noisy_cv))
        out += ["![search tree](tree.svg)", ""]
    except Exception as exc:  # the picture is an extra: the report is written without it
        out += [f"(tree.svg not written: {type(exc).__name__}: {exc})", ""]
    try:
        from kernelpro.search.render import render_tree_markdown
    except ImportError:
        return out
    out += ["Each node's speedup is the one in the table of candidates (same id).", "",
            render_tree_markdown(opt.tree, best_id), ""]
    return out


def _svg_timings(opt: "Optimizer", noisy_cv: float) -> dict[str, str]:
    """Per candidate, the line the picture shows under its speedup: both times."""
    out = {}
    for cid, res in opt.results.items():
        if res.correct and res.timing is not None and res.baseline is not None:
            noisy = is_noisy(res.timing.cv, noisy_cv) or is_noisy(res.baseline.cv, noisy_cv)
            out[cid] = (f"{fmt_ms(res.baseline.median_ms)} / {fmt_ms(res.timing.median_ms)} ms"
                        + (" noisy" if noisy else ""))
    return out


def _one_line(text: str | None, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _usage_totals(records: Iterable[dict[str, Any]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for rec in records:
        for k, v in (rec.get("usage") or {}).items():
            if isinstance(v, (int, float)):
                total[k] = total.get(k, 0) + v
    return total


def generator_failures_section(errors: list[dict[str, Any]]) -> list[str]:
    """The report lines listing generator failures (``errors.jsonl``); none without any."""
    if not errors:
        return []
    lines = ["## Generator failures", "",
             f"{len(errors)} generator call(s) failed; the node being expanded stayed open.", ""]
    for e in errors[-20:]:
        lines.append(f"- {e.get('time', '?')} expanding `{e.get('parent', '?')}` "
                     f"({e.get('in_a_row', '?')} in a row): {str(e.get('error', ''))[:300]}")
    if len(errors) > 20:
        lines.append(f"- ... {len(errors) - 20} earlier ones in errors.jsonl")
    lines.append("")
    return lines
