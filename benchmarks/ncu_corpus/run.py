#!/usr/bin/env python3
"""What KernelPro's classifier and kernel-level micro-profilers say about each kernel of the
corpus (``tests/ncu/corpus/<gpu>/``, captured by ``tools/capture/ncu_corpus/capture.py``),
beside Nsight Compute's own rule results on the same reports.

    python benchmarks/ncu_corpus/run.py [--corpus tests/ncu/corpus/h200] [--half all|tuning|held_out]
                                        [--json OUT.json] [--markdown OUT.md]

Per kernel: its workload (``<name>@<size>``), duration, the roofline fraction and bottleneck
our classifier gives, our findings (micro-profiler, estimated gain), and ncu's rules with an
estimated speedup of at least ``--min-speedup`` percent. Two measures:

* **coverage**: of the kernels below 60 % of their roofline, the share with at least one
  finding that carries an action and an estimated gain (``at_roofline`` does not count);
* **recall against ncu**: of ncu's rule results at or above the threshold, the share for
  which one of our findings names the same cause (``CAUSES`` below says which of our
  micro-profilers name which rule's cause).

``--half`` restricts both measures to one half of ``split.json`` (drawn by ``split.py``):
thresholds are tuned on ``tuning`` and ``held_out`` is measured once, after tuning. Without
it, the whole corpus and each half are summarized.

The groups are the corpus directory's ``<group>.raw.csv`` files (``eager``, ``compiled``,
``template`` in that order, then any other, such as the validation corpus v2's ``eager_v2``
and ``compiled_v2``). A corpus none of whose workloads is in ``split.json`` (the v2 corpus,
``validation_v2.md``) has no halves: every kernel is ``validation``, the summary says
``"half": "validation"``, and ``--half tuning`` or ``--half held_out`` is an error.

Runs on a CPU: the corpus holds ncu's raw-page CSV exports, which the ncu plugin reads.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import attrs

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
HALVES = ("tuning", "held_out")

#: ncu rule -> the KernelPro micro-profilers whose findings name the same cause
CAUSES: dict[str, tuple[str, ...]] = {
    "CPIStall": ("warp_stalls",),
    "IssueSlotUtilization": ("issue_slots", "warp_stalls"),
    "AchievedOccupancy": ("occupancy_gap", "tail_effect"),
    "TheoreticalOccupancy": ("occupancy_limiter",),
    "LaunchConfiguration": ("small_grid", "tail_effect", "launch_overhead"),
    "WorkloadImbalance": ("unit_imbalance", "tail_effect"),
    "UncoalescedGlobalAccess": ("uncoalesced_global",),
    "MemoryCacheAccessPattern": ("uncoalesced_global", "cache_hit_rate", "dram_excess"),
    "SharedMemoryConflicts": ("shared_bank_conflicts",),
    "UncoalescedSharedAccess": ("shared_bank_conflicts",),
    "ThreadDivergence": ("thread_divergence",),
    "FPInstructions": ("unfused_fp32",),
    # two forms (see pipe_form): one pipe is the busiest and near its limit -> move work to
    # another pipe or accept the limit; every pipe is under-used -> too little work or too few
    # warps issuing (a kernel at its memory roofline: the memory, not the pipes, is the limit)
    "HighPipeUtilization": ("tensor_cores_idle", "unfused_fp32", "pipe_bound", "at_roofline"),
    "HighPipeUtilization/under-utilized": ("small_grid", "issue_slots", "at_roofline"),
    "MemoryL2Compression": (),  # no KernelPro micro-profiler looks at L2 compression
}
#: ncu rules whose advice was applied on the H200 and did not pay on data like the corpus's
#: (random-valued tensors): recall is reported with and without them. Each names its evidence.
DISPUTED: dict[str, str] = {
    # the rule fires on every kernel that writes past L2, with an estimate that follows the
    # bytes written and not the data (docs/validation/ncu_corpus.md, "L2 compression")
    "MemoryL2Compression": "compressible buffers no faster on random data (within 0.6 %), 1.14-1.48x on "
                           "all-zero data (tests/ncu/calibration/h200/l2_compression.json)",
}


def disagreement(result: dict[str, Any], kernel: Any, tools: set[str], sm_count: float | None) -> str | None:
    """Why ours, by rule, does not name an ncu result, where the kernel's own numbers show
    the result's advice cannot pay: ``at roofline`` (the kernel gets at_roofline's finding
    only, the issue's own rule for kernels at their roofline), ``grid-bound`` (a
    TheoreticalOccupancy result where the grid gives no SM more blocks than the limiter
    allows, so lifting the limit adds no warp) or ``tail nearly full`` (a LaunchConfiguration
    result of the partial-wave form, whose estimate is the last wave's share of the waves,
    1 / (full waves + 1), while the last wave is nearly full: the SM time idle in it, the most
    a grid without a partial wave saves, is below tail_effect's default threshold) or ``nothing to
    fuse`` (an FPInstructions result, whose estimate counts every non-fused FP32 instruction,
    on a kernel with almost no multiply and add to pair: an FFMA needs one of each). None for
    the other misses."""
    import math

    from kernelpro_plugins_ncu import metrics as M
    from kernelpro_plugins_ncu.micro.occupancy import TailEffectSettings

    if result["matched"]:
        return None
    if "at_roofline" in tools:
        return "at roofline"
    if result["rule"] == "LaunchConfiguration" and result.get("message", "").startswith("A wave of thread blocks"):
        waves = M.get(kernel.metrics, M.WAVES_PER_SM, 0.0)
        if waves >= 1.0:
            ceiling = math.ceil(waves - 1e-9)
            if (ceiling - waves) / ceiling < TailEffectSettings().min_idle_share:
                return "tail nearly full"
    if result["rule"] == "FPInstructions":
        fadd, fmul, ffma = (M.get(kernel.metrics, name, 0.0) for name in (M.FADD, M.FMUL, M.FFMA))
        if fadd + fmul + ffma > 0 and min(fadd, fmul) / (fadd + fmul + ffma) < 0.02:
            return "nothing to fuse"
    if result["rule"] == "TheoreticalOccupancy":
        limits = [v for v in (M.get(kernel.metrics, name, 0.0) for name in
                              (M.LIMIT_REGISTERS, M.LIMIT_SMEM, M.LIMIT_WARPS, M.LIMIT_BLOCKS)) if v > 0]
        grid = M.get(kernel.metrics, M.GRID_SIZE, 0.0)
        sms = M.get(kernel.metrics, M.SM_COUNT, 0.0) or (sm_count or 0.0)
        if limits and grid > 0 and sms > 0 and -(-grid // sms) <= min(limits):
            return "grid-bound"
    return None


#: the order groups are read in; a corpus's other groups follow in name order
GROUPS = ("eager", "compiled", "template", "eager_v2", "compiled_v2", "eager_v3", "eager_v4", "eager_v5", "eager_v6",
          "eager_v7")
#: the ``half`` of every kernel of a corpus that is not in split.json
VALIDATION = "validation"


def groups(corpus: Path) -> list[str]:
    """The groups of a corpus directory: one per ``<group>.raw.csv`` file."""
    found = sorted(p.name[:-len(".raw.csv")] for p in corpus.glob("*.raw.csv"))
    return [g for g in GROUPS if g in found] + [g for g in found if g not in GROUPS]


def cause_key(result: dict[str, Any]) -> str:
    """The ``CAUSES`` key of one ncu rule result: its rule name, and for HighPipeUtilization
    which of its two forms ncu's message is."""
    if result["rule"] == "HighPipeUtilization" and "under-utilized" in result.get("message", ""):
        return "HighPipeUtilization/under-utilized"
    return result["rule"]


def _rows(path: Path) -> list[list[str]]:
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def workloads(ranges_csv: Path) -> dict[str, str]:
    """Kernel ID -> ``<workload>@<size>`` from the NVTX-renamed export."""
    rows = _rows(ranges_csv)
    head = rows[0]
    i_id, i_name = head.index("ID"), head.index("Kernel Name")
    out = {}
    for r in rows[1:]:
        if r[i_id].strip() and "/" in r[i_name]:
            out[r[i_id]] = r[i_name].split("/", 1)[0]
    return out


def rules(rules_csv: Path, min_speedup: float) -> dict[str, list[dict[str, Any]]]:
    """Kernel ID -> ncu's optimization rules (type OPT) at or above ``min_speedup`` percent,
    one per rule name (the largest estimate)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in csv.DictReader(io.StringIO(rules_csv.read_text())):
        try:
            speedup = float(r.get("Estimated Speedup") or 0.0)
        except ValueError:
            speedup = 0.0
        if r.get("Rule Type") != "OPT" or speedup < min_speedup:
            continue
        seen = out.setdefault(r["ID"], {})
        name = r["Rule Name"]
        if name not in seen or speedup > seen[name]["speedup"]:
            seen[name] = {"rule": name, "speedup": speedup, "message": r.get("Rule Description", "")[:240]}
    return {k: sorted(v.values(), key=lambda x: -x["speedup"]) for k, v in out.items()}


def _split() -> tuple[dict[str, Any], Any]:
    import importlib.util
    spec = importlib.util.spec_from_file_location("ncu_corpus_split", HERE / "split.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return (mod.load() if mod.SPLIT.exists() else {"families": {}}), mod.family


def analyze(corpus: Path, min_speedup: float, config: Path | None = None,
            io_by_workload: dict[str, dict[str, float]] | None = None) -> list[dict[str, Any]]:
    """One row per corpus kernel. ``config``: a KernelPro YAML whose ``profiling`` section
    (classifier, classifier_params, micro_profiler_params, block_micro_profilers) and
    ``heuristic_params`` set the pipeline up as ``kernelpro analyze`` would; without it the
    defaults. ``io_by_workload``: per workload, the forward's input / parameter / output bytes
    as the evaluator records them (the micro-profilers that compare DRAM traffic with the
    problem's size need them; the corpus has none)."""
    from kernelpro.api import ProfileContext
    from kernelpro.plugins import installed
    from kernelpro.profile.pipeline import Profiler as Pipeline
    from kernelpro.records import ProfileData
    from kernelpro_plugins_ncu.report import parse_raw_csv

    split, family = _split()
    plugins = installed()
    if config is None:
        pipe = Pipeline(plugins)
    else:
        from kernelpro.config import load_config, profiling_settings
        cfg = load_config(config)
        settings = profiling_settings(cfg, plugins)
        pipe = Pipeline(plugins, cfg.profiling.classifier, None, cfg.profiling.block_micro_profilers,
                        settings["heuristics"], settings["classifier"], settings["micro_profilers"])
    out: list[dict[str, Any]] = []
    for group in groups(corpus):
        raw = corpus / f"{group}.raw.csv"
        kernels, meta = parse_raw_csv(raw.read_text())
        ids = [r[0] for r in _rows(raw)[1:] if r and r[0].strip().isdigit()]
        names = workloads(corpus / f"{group}.ranges.csv")
        ncu_rules = rules(corpus / f"{group}.rules.csv", min_speedup)
        device = meta.get("device_name") or "NVIDIA H200"
        gpu = plugins.gpu_for(device)
        context = ProfileContext(gpu=gpu, device="cuda")
        for kid, k in zip(ids, kernels):
            io = (io_by_workload or {}).get(names.get(kid, "?"))
            profile = ProfileData(level="kernel", collector="ncu", kernels=(k,), device_name=device,
                                  payload={"io": io} if io else None)
            analysis = pipe.analyze_profile(profile, context)
            bottleneck, findings, notes = analysis.bottleneck, analysis.findings, list(analysis.notes)
            ours = [{"tool": f.tool, "title": f.title, "gain": f.estimated_gain, "action": bool(f.action)}
                    for f in findings]
            tools = {f["tool"] for f in ours}
            theirs = ncu_rules.get(kid, [])
            for r in theirs:
                r["matched"] = bool(set(CAUSES.get(cause_key(r), ())) & tools)
                r["disagreement"] = disagreement(r, k, tools, float(gpu.sm_count) if gpu is not None else None)
            out.append({
                "group": group, "id": kid, "workload": names.get(kid, "?"),
                "half": split["families"].get(family(names.get(kid, "?")), {}).get("half"), "kernel": k.name[:120],
                "duration_us": (k.duration_ns or 0.0) / 1e3,
                "bottleneck": bottleneck.kind if bottleneck else None,
                "roofline_fraction": bottleneck.roofline_fraction if bottleneck else None,
                "findings": ours, "ncu_rules": theirs, "notes": notes,
            })
    if out and all(r["half"] is None for r in out):  # a corpus split.json does not cover
        for r in out:
            r["half"] = VALIDATION
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    below = [r for r in rows if r["roofline_fraction"] is not None and r["roofline_fraction"] < 0.6]
    covered = [r for r in below if any(f["tool"] != "at_roofline" and f["action"] and f["gain"] is not None
                                       for f in r["findings"])]
    results = [x for r in rows for x in r["ncu_rules"]]
    matched = [x for x in results if x["matched"]]
    by_rule: dict[str, list[int]] = {}
    for x in results:
        by_rule.setdefault(x["rule"], [0, 0])
        by_rule[x["rule"]][0] += 1
        by_rule[x["rule"]][1] += int(x["matched"])
    at_roof = [r for r in rows if r["roofline_fraction"] is not None and r["roofline_fraction"] >= 0.6]
    # kernels our at_roofline finding calls at the roofline must get that finding only
    roofed = [r for r in rows if any(f["tool"] == "at_roofline" for f in r["findings"])]
    not_only = [r for r in roofed if {f["tool"] for f in r["findings"]} != {"at_roofline"}]
    return {
        "kernels": len(rows),
        "below_60pct": len(below),
        "covered": len(covered),
        "coverage": len(covered) / len(below) if below else None,
        "ncu_results": len(results),
        "matched": len(matched),
        "recall": len(matched) / len(results) if results else None,
        # the same without the rules in DISPUTED (measured not to pay on such data)
        "recall_undisputed": (sum(x["matched"] for x in results if x["rule"] not in DISPUTED)
                              / max(1, sum(x["rule"] not in DISPUTED for x in results))) if results else None,
        "disputed_results": sum(x["rule"] in DISPUTED for x in results),
        # misses where the kernel's own numbers show the advice cannot pay (``disagreement``),
        # by reason, and recall over the rest (reported beside recall, never instead of it)
        "disagreements": {reason: sum(x.get("disagreement") == reason for x in results)
                          for reason in sorted({x["disagreement"] for x in results if x.get("disagreement")})},
        "recall_without_disagreements": (len(matched) / max(1, sum(not x.get("disagreement") for x in results))
                                         if results else None),
        # and over the results that are neither: the recall, with every miss ours
        # argues listed beside it (DISPUTED's evidence, the disagreements' reasons)
        "recall_without_disputes_and_disagreements": (
            sum(x["matched"] for x in results if x["rule"] not in DISPUTED and not x.get("disagreement"))
            / max(1, sum(x["rule"] not in DISPUTED and not x.get("disagreement") for x in results))
            if results else None),
        # the misses no finding can name while a kernel at its roofline gets only at_roofline (the
        # issue's coverage rule) and the rules measured not to pay stay unnamed: recall's ceiling
        "recall_ceiling": (1 - sum(not x["matched"] and (x.get("disagreement") == "at roofline"
                                                          or x["rule"] in DISPUTED) for x in results) / len(results)
                           if results else None),
        # misses with neither a disagreement nor a disputed rule: ours to fix
        "plain_misses": sum(not x["matched"] and not x.get("disagreement") and x["rule"] not in DISPUTED
                            for x in results),
        "recall_by_rule": {k: {"results": v[0], "matched": v[1]} for k, v in sorted(by_rule.items())},
        "at_or_above_60pct": len(at_roof),
        "uncovered": [f"{r['workload']} {r['kernel'][:60]}" for r in below if r not in covered],
        "at_roofline": len(roofed),
        "at_roofline_with_other_findings": [f"{r['workload']} {r['kernel'][:40]}: "
                                            + ", ".join(sorted({f['tool'] for f in r['findings']} - {'at_roofline'}))
                                            for r in not_only],
    }


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = [f"Kernels: {summary['kernels']}; below 60 % of the roofline: {summary['below_60pct']}, "
             f"with a finding that has an action and a gain: {summary['covered']} "
             f"({summary['coverage']:.0%}). ncu rule results at or above the threshold: "
             f"{summary['ncu_results']}, named by one of our findings: {summary['matched']} "
             f"({summary['recall']:.0%}); without the {summary['disputed_results']} results of rules whose "
             f"advice was measured not to pay ({'; '.join(f'{k}: {v}' for k, v in sorted(DISPUTED.items()))}): "
             f"{summary['recall_undisputed']:.0%}. Misses where the kernel's own numbers show the advice "
             f"cannot pay: {', '.join(f'{k} {v}' for k, v in summary['disagreements'].items()) or 'none'}; "
             f"recall without them: {summary['recall_without_disagreements']:.0%}; without them and the "
             f"disputed rules' results: {summary['recall_without_disputes_and_disagreements']:.0%}.", "",
             "| rule | results | named by ours |", "|---|---|---|"]
    for rule, v in summary["recall_by_rule"].items():
        lines.append(f"| {rule} | {v['results']} | {v['matched']} |")
    lines += ["", "| half | workload | kernel | us | roofline | bottleneck | ours | ncu (est. %) |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        frac = f"{r['roofline_fraction']:.0%}" if r["roofline_fraction"] is not None else "-"
        ours = ", ".join(sorted({f["tool"] for f in r["findings"]})) or "-"
        theirs = ", ".join(f"{x['rule']} {x['speedup']:.0f}"
                           + ("" if x["matched"] else f" (missed{': ' + x['disagreement'] if x.get('disagreement') else ''})")
                           for x in r["ncu_rules"]) or "-"
        half = {"tuning": "T", "held_out": "H", VALIDATION: "V"}.get(r.get("half") or "", "-")
        lines.append(f"| {half} | {r['workload']} | `{r['kernel'][:40]}` | {r['duration_us']:.1f} | {frac} | "
                     f"{r['bottleneck'] or '-'} | {ours} | {theirs} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, action="append",
                    help="a corpus folder (default tests/ncu/corpus/h200); given several times, scored together")
    ap.add_argument("--all", action="store_true", help="every corpus under tests/ncu/corpus, scored together")
    ap.add_argument("--min-speedup", type=float, default=10.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--half", choices=("all",) + HALVES, default="all")
    ap.add_argument("--config", type=Path, help="a KernelPro YAML: its profiling settings set the pipeline up")
    args = ap.parse_args()
    if args.all and args.corpus:
        print("error: --all scores every corpus; give it without --corpus", file=sys.stderr)
        return 2
    corpora = (sorted(d for d in (REPO / "tests" / "ncu" / "corpus").iterdir() if d.is_dir() and groups(d))
               if args.all else args.corpus or [REPO / "tests" / "ncu" / "corpus" / "h200"])
    for corpus in corpora:
        if not groups(corpus):
            print(f"error: no corpus at {corpus} (expected <group>.raw.csv files)", file=sys.stderr)
            return 2
    try:
        rows = [row for corpus in corpora for row in analyze(corpus, args.min_speedup, args.config)]
    except Exception as exc:  # a bad config or an unknown plugin name: one line
        from kernelpro.config import ConfigError
        from kernelpro.plugins import UnknownName
        if isinstance(exc, (ConfigError, UnknownName)):
            text = str(exc)
            print(f"error: {text}" if text.startswith(str(args.config)) else f"error: {args.config}: {text}",
                  file=sys.stderr)
            return 2
        raise
    unsplit = bool(rows) and all(r["half"] == VALIDATION for r in rows)
    if unsplit and args.half != "all":
        print(f"error: --half {args.half}: {', '.join(map(str, corpora))} is not in split.json, it has no halves "
              f"(every kernel is {VALIDATION}); run without --half", file=sys.stderr)
        return 2
    if args.half != "all":
        rows = [r for r in rows if r["half"] == args.half]
    summary = summarize(rows)
    if unsplit:
        summary = {"half": VALIDATION, **summary}
    elif args.half == "all":
        summary["halves"] = {h: summarize([r for r in rows if r["half"] == h]) for h in HALVES}
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "kernels": rows}, indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(rows, summary))
    def brief(s: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s.items() if k not in ("uncovered", "recall_by_rule", "halves",
                                                         "at_roofline_with_other_findings")}
    print(json.dumps({**brief(summary), **{f"{h}_half": brief(v) for h, v in summary.get("halves", {}).items()}},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
