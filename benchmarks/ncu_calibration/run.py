#!/usr/bin/env python3
"""Estimated gains against realized ones: the micro-profilers' findings on each calibration
pair's "before" kernel beside the time its rewrite saved on the GPU.

    python benchmarks/ncu_calibration/run.py [--capture tests/ncu/calibration/h200]
                                             [--config FILE.yaml] [--json OUT.json] [--markdown OUT.md]
    python benchmarks/ncu_calibration/run.py --set corpus [--capture DIR]  # the rewrites of corpus kernels
    python benchmarks/ncu_calibration/run.py --set corpus2 [--capture DIR] # their second round
    python benchmarks/ncu_calibration/run.py --set corpus3 [--capture DIR] # their third round
    python benchmarks/ncu_calibration/run.py --set corpus4 [--capture DIR] # their fourth round

The capture (``tools/capture/ncu_calibration/capture.py``, on a GPU) holds both sides of
every pair of ``tools/capture/ncu_calibration/pairs.py`` under Nsight Compute and their times
outside it. Per pair:

* **realized**: the fraction of the before kernel's time the rewrite saved,
  ``1 - after / before`` (medians of 30 alternating timed calls);
* **estimated**: the largest ``estimated_gain`` among the findings, on the before kernel,
  of the micro-profilers whose action the rewrite carries out (``acts_on``), 0 when none of
  them speaks; **any finding**: the largest gain of any finding but ``at_roofline``;
* **ncu**: the largest estimated speedup of Nsight Compute's rules whose cause those
  micro-profilers name (the corpus benchmark's ``CAUSES``), as a fraction.

Summary: Spearman's rank correlation of each estimate with the realized gains (ties share
their mean rank), and the mean absolute error of ours. Runs on a CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "ncu" / "calibration" / "h200"
#: the rewrites of corpus kernels (``pairs.py --set corpus``, ``--set corpus2``, ``--set corpus3``,
#: ``--set corpus4``), captured apart
CAPTURE_CORPUS = {"corpus": REPO / "tests" / "ncu" / "calibration" / "h100_corpus",
                  "corpus2": REPO / "tests" / "ncu" / "calibration" / "h100_corpus2",
                  "corpus3": REPO / "tests" / "ncu" / "calibration" / "h100_corpus3",
                  "corpus4": REPO / "tests" / "ncu" / "calibration" / "h200_corpus4"}
SMS = 132  # the H200's SMs: the capture's GPU sizes tail_wave's inputs by them


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def corpus_module():
    return _load("kp_ncu_corpus_run", REPO / "benchmarks" / "ncu_corpus" / "run.py")


def pairs_module():
    return _load("kpc_pairs", REPO / "tools" / "capture" / "ncu_calibration" / "pairs.py")


def ranks(xs: list[float]) -> list[float]:
    """1-based ranks, ties given the mean of the ranks they span (the search benchmark's)."""
    return list(_load("kp_search_sim_stats", REPO / "benchmarks" / "search_sim" / "stats.py").ranks(xs))


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Pearson correlation of the ranks; None when either side is constant or too short."""
    if len(xs) < 3 or len(xs) != len(ys):
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def analyze(capture: Path, config: Path | None = None, pair_set: str = "calibration") -> list[dict[str, Any]]:
    corpus = corpus_module()
    pmod = pairs_module()
    pairs = pmod.SETS[pair_set]()
    timings = json.loads((capture / "timings.json").read_text())["pairs"]
    # each side's forward sizes, as the evaluator passes them to the micro-profilers
    io = {f"{name}:{side}": pmod.io_bytes(pair, SMS) for name, pair in pairs.items() for side in ("before", "after")}
    kernels = corpus.analyze(capture, 0.0, config, io)
    by_range: dict[str, list[dict[str, Any]]] = {}
    for k in kernels:
        by_range.setdefault(k["workload"], []).append(k)
    rows = []
    for name, pair in pairs.items():
        t = timings.get(name, {})
        side = {s: max(by_range.get(f"{name}:{s}", []), key=lambda k: k["duration_us"], default=None)
                for s in ("before", "after")}
        row: dict[str, Any] = {"pair": name, "acts_on": list(pair.acts_on), "action": pair.action}
        if "error" in t or "before_ms" not in t:
            row["error"] = t.get("error", "not timed")
        elif not t.get("agree"):
            row["error"] = f"before and after disagree (max abs error {t.get('max_abs_err')})"
        elif side["before"] is None:
            row["error"] = "before kernel not profiled"
        if "error" in row:
            rows.append(row)
            continue
        before = side["before"]
        # the kernels' own times under ncu (every kernel of each side's range), a second view
        # of the realized gain without any launch time in it
        ncu_us = {s: sum(k["duration_us"] for k in by_range.get(f"{name}:{s}", [])) for s in ("before", "after")}
        gains = {f["tool"]: f["gain"] or 0.0 for f in before["findings"]}
        acting = [g for tool, g in gains.items() if tool in pair.acts_on]
        causes = {rule for rule, tools in corpus.CAUSES.items() if set(tools) & set(pair.acts_on)}
        ncu = [r["speedup"] / 100 for r in before["ncu_rules"] if corpus.cause_key(r) in causes]
        row.update({
            "before_ms": t["before_ms"], "after_ms": t["after_ms"], "realized": t["realized_gain"],
            "ncu_before_us": ncu_us["before"], "ncu_after_us": ncu_us["after"],
            "realized_ncu": 1 - ncu_us["after"] / ncu_us["before"] if ncu_us["before"] > 0 and ncu_us["after"] > 0
            else None,
            "kernel": before["kernel"], "bottleneck": before["bottleneck"],
            "roofline_fraction": before["roofline_fraction"],
            "findings": {tool: round(g, 3) for tool, g in sorted(gains.items())},
            "estimated": max(acting, default=0.0),
            "fired": bool(acting),
            "any_finding": max((g for tool, g in gains.items() if tool != "at_roofline"), default=0.0),
            "ncu": max(ncu, default=0.0),
            "after_findings": sorted({f["tool"] for f in side["after"]["findings"]}) if side["after"] else None,
            "after_roofline_fraction": side["after"]["roofline_fraction"] if side["after"] else None,
        })
        rows.append(row)
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if "error" not in r]
    real = [r["realized"] for r in ok]
    by_ncu = [r for r in ok if r.get("realized_ncu") is not None]

    def rho(key: str, against: str = "realized") -> float | None:
        rs = ok if against == "realized" else by_ncu
        return spearman([r[key] for r in rs], [r[against] for r in rs])
    return {
        "pairs": len(rows), "measured": len(ok), "fired": sum(r["fired"] for r in ok),
        "spearman_estimated": rho("estimated"), "spearman_any_finding": rho("any_finding"),
        "spearman_ncu": rho("ncu"),
        "spearman_estimated_vs_ncu_times": rho("estimated", "realized_ncu"),
        "spearman_ncu_vs_ncu_times": rho("ncu", "realized_ncu"),
        "mean_abs_error": sum(abs(r["estimated"] - r["realized"]) for r in ok) / len(ok) if ok else None,
        "errors": {r["pair"]: r["error"] for r in rows if "error" in r},
    }


def markdown(rows: list[dict[str, Any]], s: dict[str, Any]) -> str:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"
    lines = [f"Pairs measured: {s['measured']} of {s['pairs']}; the finding the rewrite acts on fired on "
             f"{s['fired']}. Spearman with the realized gain: ours {f(s['spearman_estimated'])}, any finding "
             f"{f(s['spearman_any_finding'])}, ncu's rules {f(s['spearman_ncu'])}; mean absolute error of ours "
             f"{f(s['mean_abs_error'])}. Against the kernels' times under ncu: ours "
             f"{f(s['spearman_estimated_vs_ncu_times'])}, ncu's rules {f(s['spearman_ncu_vs_ncu_times'])}.", "",
             "| pair | before ms | after ms | realized | realized, ncu times | ours (acts on) | any finding | ncu | before: bottleneck, "
             "roofline | findings on before | after: roofline, findings |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['pair']} | {r['error']} | | | | | | | | | |")
            continue
        finds = ", ".join(f"{k} {v:.0%}" for k, v in r["findings"].items()) or "-"
        after = (f"{r['after_roofline_fraction']:.0%}, " if r["after_roofline_fraction"] is not None else "") + (
            ", ".join(r["after_findings"] or []) or "-")
        rn = "-" if r.get("realized_ncu") is None else f"{r['realized_ncu']:.0%}"
        lines.append(f"| {r['pair']} | {r['before_ms']:.3f} | {r['after_ms']:.3f} | {r['realized']:.0%} | {rn} | "
                     f"{r['estimated']:.0%} ({', '.join(r['acts_on'])}) | {r['any_finding']:.0%} | {r['ncu']:.0%} | "
                     f"{r['bottleneck']}, {r['roofline_fraction']:.0%} | {finds} | {after} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", type=Path, help=f"the capture (default {CAPTURE.relative_to(REPO)}; with --set "
                    + ", ".join(f"{k}: {v.relative_to(REPO)}" for k, v in CAPTURE_CORPUS.items()) + ")")
    ap.add_argument("--set", dest="pair_set", choices=("calibration", *CAPTURE_CORPUS), default="calibration",
                    help="the calibration pairs, or the rewrites of corpus kernels (corpus2, corpus3, corpus4: "
                         "their second, third and fourth rounds)")
    ap.add_argument("--config", type=Path, help="a KernelPro YAML: its profiling settings set the pipeline up")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    if args.capture is None:
        args.capture = CAPTURE if args.pair_set == "calibration" else CAPTURE_CORPUS[args.pair_set]
    # one group per ncu run of the capture (``pairs``, or ``pairs_<n>`` for each chunk of pairs)
    found = corpus_module().groups(args.capture) if args.capture.is_dir() else []
    missing = [n for n in ["timings.json"] + ([f"{g}.{part}.csv" for g in found for part in ("ranges", "rules")]
                                             if found else ["pairs.raw.csv"])
               if not (args.capture / n).exists()]
    if missing:
        print(f"error: {args.capture} is not a calibration capture (missing {', '.join(missing)})", file=sys.stderr)
        return 2
    try:
        rows = analyze(args.capture, args.config, args.pair_set)
    except Exception as exc:  # a bad config or an unknown plugin name: one line
        from kernelpro.config import ConfigError
        from kernelpro.plugins import UnknownName
        if isinstance(exc, (ConfigError, UnknownName)):
            print(f"error: {args.config}: {exc}", file=sys.stderr)
            return 2
        raise
    summary = summarize(rows)
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "pairs": rows}, indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(rows, summary))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
