"""report.md: the baseline, what was tried, what won, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelpro.rundir import write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from kernelpro.loop import Optimizer


def _ms(x: float | None) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) else "-"


def _x(x: float | None) -> str:
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


def write_report(opt: "Optimizer", summary: dict[str, Any], best: dict[str, Any] | None,
                 sections: list[str]) -> None:
    base = opt.baseline
    lines = [f"# KernelPro run: {opt.problem.name}", ""]
    lines += [
        f"- device: {opt.device}" + (f" ({base.gpu_name})" if base and base.gpu_name else ""),
        f"- generator: {opt.config.generator.name}; search: {opt.config.search.name}; "
        f"reward: {opt.config.reward.name}",
        f"- evaluated: {summary['evaluated']} candidates, {summary['correct']} correct; "
        f"stopped: {summary['stopped_because']}",
        "",
        "## Baseline",
        "",
    ]
    if base and base.baseline:
        b = base.baseline
        lines += [
            f"Eager reference: median {_ms(b.median_ms)} ms (IQR {_ms(b.iqr_ms)} ms, CV {b.cv:.3f}, "
            f"n={b.n}, method {b.method}).",
            "",
        ]
        if base.flags:
            lines += ["Flags on the problem: " + "; ".join(base.flags), ""]
    lines += ["## Best result", ""]
    if best is None:
        lines += ["No candidate was correct.", ""]
    else:
        res = opt.results[best["id"]]
        lines += [
            f"`{best['id']}` ({best['description']}): {_ms(best['runtime_ms'])} ms against the eager "
            f"reference's {_ms(best['baseline_ms'])} ms measured in the same evaluation (interleaved): "
            f"**{_x(best['speedup'])}**"
            + (f"; torch.compile of the reference: {_ms(best['compiled_baseline_ms'])} ms"
               if best.get("compiled_baseline_ms") else "")
            + ". Saved as `best.py`.",
            "",
            "The best is the correct candidate with the highest reward whose timing is not flagged "
            "`noisy_timing`; a noisy one is timed again first (`retimes.jsonl`)"
            + (" and this one was: its numbers are the second timing's." if best.get("retimed") else "."),
            "",
        ]
        if res.timing:
            lines += [f"Timing: median {_ms(res.timing.median_ms)} ms, IQR {_ms(res.timing.iqr_ms)} ms, "
                      f"CV {res.timing.cv:.3f}, n={res.timing.n}.", ""]
        analysis = opt.analyses.get(best["id"])
        if analysis is not None:
            if analysis.bottleneck is not None:
                bn = analysis.bottleneck
                frac = f" ({bn.roofline_fraction:.0%} of the roofline)" if bn.roofline_fraction is not None else ""
                lines += [f"Bottleneck: **{bn.kind}**{frac}: {bn.summary}", ""]
            for f in analysis.findings[:8]:
                lines.append(f"- [{f.severity}] {f.title} ({f.tool}): {f.message} Action: {f.action}")
            if analysis.findings:
                lines.append("")
    lines += ["## Candidates", "",
              "| id | parent | generator | change | verdict | runtime ms | speedup | reward |",
              "|---|---|---|---|---|---|---|---|"]
    for rec in opt.records:
        desc = (rec["description"] or "").replace("|", "\\|")[:70]
        reward = f"{rec['reward']:.3f}" if isinstance(rec.get("reward"), (int, float)) else "-"
        lines.append(f"| {rec['id']} | {rec['parent']} | {rec['generator']} | {desc} | {rec['verdict']} | "
                     f"{_ms(rec['runtime_ms'])} | {_x(rec['speedup'])} | {reward} |")
    lines.append("")
    failed = [r for r in opt.records if not r["correct"]]
    if failed:
        lines += ["## Failures", ""]
        for rec in failed:
            lines.append(f"- `{rec['id']}` {rec['verdict']}: {(rec.get('reason') or '')[:300]}")
        lines.append("")
    lines += generator_failures_section(opt.run.read_jsonl("errors.jsonl"))
    usage = _usage_totals(opt.records)
    if usage:
        lines += ["## Generator usage", "",
                  ", ".join(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}" for k, v in usage.items()),
                  ""]
    try:
        from kernelpro.search.render import render_tree_markdown

        lines += ["## Search tree", "", render_tree_markdown(opt.tree, best["id"] if best else None), ""]
    except ImportError:
        pass
    for section in sections:
        lines += [section.rstrip(), ""]
    write_atomic(opt.run.path / "report.md", "\n".join(lines))


def _usage_totals(records: list[dict[str, Any]]) -> dict[str, float]:
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
