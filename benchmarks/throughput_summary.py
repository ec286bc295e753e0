"""Where a bench's seconds went, from its output directory (``kernelpro bench -o DIR``):

    python benchmarks/throughput_summary.py DIR [--json OUT.json] [--skip NAME ...]

Per problem: its wall seconds (this call's part when it was resumed), the baseline job's,
the candidates' evaluations' and the profiles' sums, and what is left (the generator,
process starts between jobs). Then candidates per minute over the problems' wall time
summed and, where the problems ran at once (``executor.params.jobs_per_gpu``) or to say
what a user waits, over the bench's span (first problem's start to last one's end, from
each run's ``bench.json``),
the judge's stages summed and as medians over the candidates (``stage_<name>_s`` of each
record) and so the timing stage's parts (``timing_<part>_s``: inputs filled and L2 flushed,
the candidate paused, the calls' round trips, the checks after them, set-up, statistics),
the seconds the evaluations held a shared GPU alone (``gpu_lock_held_s``), the candidates'
first correctness trials (``first_trial_s``: their first call, JIT compiles included), and every profile's seconds per collector pass (``profiles.jsonl``). ``--skip``
leaves out problems whose records span several calls (a resumed problem's wall time is
the last call's part only, its candidates are all of them)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def note(rec: dict, key: str) -> float:
    """An evaluator note of a record (a candidate's line, the baseline job's result); 0 if absent."""
    return float(((rec.get("measurements") or {}).get("evaluator") or {}).get(key) or 0.0)


def summarize(out_dir: Path, skip: set[str]) -> dict:
    results = json.loads((out_dir / "results.json").read_text())
    problems, stages, passes, evals, first_trials, timing_parts = [], {}, {}, [], [], {}
    for p in results["problems"]:
        if not p.get("evaluated") or p["name"] in skip:
            continue
        run = Path(p["run_dir"]) if Path(p["run_dir"]).is_dir() else out_dir / "runs" / Path(p["run_dir"]).name
        baseline = json.loads((run / "baseline.json").read_text()) if (run / "baseline.json").exists() else {}
        cands = _jsonl(run / "candidates.jsonl")
        profiles = _jsonl(run / "profiles.jsonl")
        ev = sum((c.get("seconds") or {}).get("evaluate") or 0.0 for c in cands)
        pr = sum(x.get("seconds") or 0.0 for x in profiles)
        for c in cands:
            evals.append((c.get("seconds") or {}).get("evaluate") or 0.0)
            for k, v in ((c.get("measurements") or {}).get("evaluator") or {}).items():
                if k.startswith("stage_"):
                    stages.setdefault(k[len("stage_"):-2], []).append(float(v))
                elif k.startswith("timing_") and k.endswith("_s"):
                    timing_parts.setdefault(k[len("timing_"):-2], []).append(float(v))
        for x in profiles:
            for k, v in (x.get("collect_s") or {}).items():
                passes.setdefault(k, []).append(float(v))
        base = float(baseline.get("wall_s") or 0.0)
        try:
            meta = json.loads((run / "bench.json").read_text())
        except (OSError, ValueError):
            meta = {}
        lock_wait = sum(note(c, "gpu_lock_wait_s") for c in cands)
        held = sum(note(c, "gpu_lock_held_s") for c in cands) + note(baseline, "gpu_lock_held_s")
        first_trials.extend(note(c, "first_trial_s") for c in cands if note(c, "first_trial_s"))
        problems.append({"name": p["name"], "wall_s": p["wall_s"], "candidates": len(cands), "baseline_s": base,
                         "evaluate_s": ev, "profiles": len(profiles), "profile_s": pr,
                         "rest_s": p["wall_s"] - base - ev - pr, "gpu_lock_wait_s": lock_wait,
                         "gpu_lock_held_s": held,
                         "started_unix_s": meta.get("started_unix_s"), "ended_unix_s": meta.get("ended_unix_s"),
                         "worker": meta.get("worker")})
    wall = sum(p["wall_s"] for p in problems)
    n = sum(p["candidates"] for p in problems)
    span = None
    if problems and all(p.get("started_unix_s") and p.get("ended_unix_s") for p in problems):
        span = max(p["ended_unix_s"] for p in problems) - min(p["started_unix_s"] for p in problems)
    return {
        "problems": problems, "wall_s": wall, "candidates": n,
        "candidates_per_min": n / (wall / 60) if wall else None,
        "span_s": span, "candidates_per_min_span": n / (span / 60) if span else None,
        "workers": sorted({p["worker"] for p in problems if p.get("worker")}),
        "evaluate_s_median": statistics.median(evals) if evals else None,
        "first_trial_s": {"sum": sum(first_trials), "median": statistics.median(first_trials),
                          "n": len(first_trials)} if first_trials else None,
        "stages": {k: {"sum": sum(v), "median": statistics.median(v), "n": len(v)} for k, v in stages.items()},
        "timing_parts": {k: {"sum": sum(v), "median": statistics.median(v), "n": len(v)}
                         for k, v in timing_parts.items()},
        "profile_passes": {k: {"n": len(v), "median": statistics.median(v), "min": min(v), "max": max(v)}
                           for k, v in passes.items()},
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--skip", nargs="*", default=[])
    args = ap.parse_args(argv)
    if not (args.out_dir / "results.json").exists():
        print(f"throughput_summary.py: {args.out_dir}: no results.json (not a bench output directory)", file=sys.stderr)
        return 2
    s = summarize(args.out_dir, set(args.skip))
    print("| problem | wall s | candidates | baseline job s | evaluations s | profiles (n) s | rest s |")
    print("|---|---|---|---|---|---|---|")
    for p in s["problems"]:
        print(f"| {p['name'][:40]} | {p['wall_s']:.1f} | {p['candidates']} | {p['baseline_s']:.1f} | "
              f"{p['evaluate_s']:.1f} | ({p['profiles']}) {p['profile_s']:.1f} | {p['rest_s']:.1f} |")
    rate = s["candidates_per_min"]
    print(f"\n{len(s['problems'])} problems, {s['candidates']} candidates in {s['wall_s']:.1f} s: "
          f"{rate:.2f} candidates per minute" if rate else "\nno problem")
    if s["span_s"]:
        print(f"over the bench's span ({s['span_s']:.1f} s, first start to last end, workers "
              f"{', '.join(s['workers'])}): {s['candidates_per_min_span']:.2f} candidates per minute; "
              f"the evaluations waited {sum(p['gpu_lock_wait_s'] for p in s['problems']):.1f} s in all for the GPU's lock")
        held = sum(p["gpu_lock_held_s"] for p in s["problems"])
        if held:
            print(f"the evaluations and baseline jobs held the GPU alone {held:.1f} s in all "
                  f"({held / s['span_s']:.0%} of the span; profiles not counted)")
    print(f"evaluation seconds per candidate, median: {s['evaluate_s_median']}")
    if s["first_trial_s"]:
        f = s["first_trial_s"]
        print(f"first correctness trial (the candidate's first call, its compiles included): "
              f"{f['sum']:.1f} s in all, median {f['median']:.2f} s over {f['n']}")
    print("judge stages over the candidates (sum s, median s): " + ", ".join(
        f"{k} {v['sum']:.1f} / {v['median']:.2f}" for k, v in sorted(s["stages"].items(), key=lambda kv: -kv[1]["sum"])))
    if s["timing_parts"]:
        print("the timing stage's parts over the candidates (sum s, median s): " + ", ".join(
            f"{k} {v['sum']:.1f} / {v['median']:.2f}"
            for k, v in sorted(s["timing_parts"].items(), key=lambda kv: -kv[1]["sum"])))
    print("profile passes (n, median s, min-max): " + ", ".join(
        f"{k} {v['n']}, {v['median']:.1f}, {v['min']:.1f}-{v['max']:.1f}" for k, v in s["profile_passes"].items()))
    if args.json:
        args.json.write_text(json.dumps(s, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
