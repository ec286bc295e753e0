"""What the trust boundary costs: seconds per evaluation, before and after it.

    python3 benchmarks/boundary/run.py --out DIR [--old-src PATH] [--repeats 2] [--problems small,large]

For each problem (``small_gelu``: 4 MiB output; ``large_output``: a 6 GiB output) an honest
candidate is evaluated ``--repeats`` times on the GPU with the default evaluator settings,
by the evaluator of this checkout ("after": judge and two harness processes) and, with
``--old-src``, by the one whose ``kernelpro`` package sources are at PATH ("before": the
single worker process; e.g. ``git archive b5f6dbb kernelpro_core/src`` unpacked). Each
evaluation runs in its own Python process with that package first on ``sys.path``.

Written: ``DIR/boundary.jsonl`` (one line per evaluation: version, problem, wall seconds,
verdict, the three medians, the evaluator's stage seconds and cross-check numbers) and a
table on stdout (median wall seconds per version and problem).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

ONE = r"""
import json, sys, time
from pathlib import Path
import kernelpro
from kernelpro.config import EvaluatorConfig
from kernelpro.evaluate.runner import evaluate
problem, candidate, work, cache = sys.argv[1:5]
t0 = time.monotonic()
r = evaluate(Path(problem), Path(candidate), device="cuda", config=EvaluatorConfig(build_cache_dir=cache),
             workdir=Path(work), seed=0)
notes = (r.measurements or {}).get("evaluator", {})
print(json.dumps({"package": kernelpro.__file__, "wall_s": time.monotonic() - t0, "verdict": r.verdict.value,
                  "reason": r.reason[:300], "candidate_ms": r.runtime_ms, "reference_ms": r.baseline_ms,
                  "compiled_ms": r.baseline_compiled.median_ms if r.baseline_compiled else None,
                  "flags": list(r.flags), "notes": notes}))
"""

PROBLEMS = {"small": "small_gelu", "large": "large_output"}


def evaluate_once(version: str, src: Path | None, problem: str, out: Path, k: int) -> dict:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    work = out / f"{version}_{problem}_{k}"
    cache = out / f"cache_{version}"
    name = PROBLEMS[problem]
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", ONE, str(HERE / f"{name}.py"), str(HERE / f"{name}_candidate.py"),
                           str(work), str(cache)], capture_output=True, text=True, env=env, timeout=900)
    line = (proc.stdout.strip().splitlines() or ["{}"])[-1]
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        rec = {"verdict": "benchmark_error", "reason": (proc.stderr or proc.stdout)[-500:]}
    rec.update(version=version, problem=problem, repeat=k, process_s=time.monotonic() - t0)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--old-src", type=Path, help="sources of the evaluator to compare with (the 'before')")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--problems", default="small,large")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    versions: list[tuple[str, Path | None]] = [("after", None)]
    if args.old_src is not None:
        versions.insert(0, ("before", args.old_src.resolve()))
    records = []
    with open(args.out / "boundary.jsonl", "a") as log:
        for problem in args.problems.split(","):
            for k in range(args.repeats):
                for version, src in versions:  # alternated, so drift affects both alike
                    rec = evaluate_once(version, src, problem, args.out, k)
                    records.append(rec)
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                    print(f"{version:6s} {problem:5s} #{k}: {rec.get('wall_s', float('nan')):6.1f} s "
                          f"{rec['verdict']} cand {rec.get('candidate_ms')} ref {rec.get('reference_ms')} "
                          f"{rec.get('reason', '')[:120]}", flush=True)
    print("\nversion problem  median wall s  (evaluations)")
    for version, _ in versions:
        for problem in args.problems.split(","):
            xs = [r["wall_s"] for r in records if r["version"] == version and r["problem"] == problem
                  and "wall_s" in r]
            if xs:
                print(f"{version:7s} {problem:7s} {statistics.median(xs):10.1f}  ({len(xs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
