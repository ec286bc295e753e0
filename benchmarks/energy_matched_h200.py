"""H200 benchmark of energy at matched speed: the two-phase search on 8 problems of the
KernelBench validation sample, reported per problem as the speed winner's and the energy
winner's time and joules with the difference and its spread.

Two steps:

1. On the development machine (needs ../shared/kernelbench), draw the 8 problems from
   ``benchmarks/kernelbench/split.json``'s validation sample (4 of level 1, 4 of level 2,
   seed ``SEED``, fixed before any result) and write them with their code into an ignored
   folder the device tool carries::

       python benchmarks/energy_matched_h200.py prepare      # -> build/energy_sample/sample.jsonl

2. On the H200, from the repository root (with build/energy_sample carried)::

       python benchmarks/energy_matched_h200.py run --config benchmarks/energy_matched_h200.yaml --deadline-s 480

   Each problem is optimized with the ``expert`` generator, the ``energy_two_phase``
   search and the ``energy_at_matched_speed`` reward into
   ``build/energy_bench/runs/<problem>``; no problem is started after ``--deadline-s``, and
   a later call continues (problems already run are read back). Every call writes
   results.json and report.md (the bench tables and the ``## Energy at matched speed``
   section) and packs them with every run's records into ``$OUT/energy_matched.tar.gz``;
   problems not yet run are listed as such, so only a call that ran all 8 gives the
   numbers to record (docs/validation/energy.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPLIT = REPO / "benchmarks" / "kernelbench" / "split.json"
SAMPLE = REPO / "build" / "energy_sample" / "sample.jsonl"
SEED = 20261204  # fixed before any result: the 8 problems cannot be chosen after the fact
PER_LEVEL = {1: 4, 2: 4}
NAME = "energy_matched"


def draw(validation: list[dict], seed: int = SEED, per_level: dict[int, int] = PER_LEVEL) -> list[dict]:
    """``per_level`` problems of each level from the validation sample, in split order."""
    rng = random.Random(seed)
    out = []
    for level, n in sorted(per_level.items()):
        rows = [p for p in validation if p["level"] == level]
        out += [rows[i] for i in sorted(rng.sample(range(len(rows)), min(n, len(rows))))]
    return out


def prepare(args: argparse.Namespace) -> int:
    validation = json.loads(SPLIT.read_text())["validation"]["problems"]
    picked = draw(validation)
    sys.path.insert(0, str(REPO / "benchmarks" / "kernelbench"))
    from split import with_code, write_suite  # the problems' code from the shared data

    write_suite(with_code(picked), SAMPLE)
    return 0


def run(args: argparse.Namespace) -> int:
    import kernelpro.bench as bench
    from kernelpro import config as cfg
    from kernelpro.loop import resolve_device
    from kernelpro.plugins import Plugins

    if not SAMPLE.exists():
        print(f"error: {SAMPLE} is absent: run `prepare` on the development machine and carry it", file=sys.stderr)
        return 2
    plugins = Plugins()
    try:
        config = cfg.load_config(args.config, {"device": args.device, "generator": {"name": args.generator,
                                                                                     "params": {}}})
        cfg.validate(config, plugins)
    except cfg.ConfigError as exc:
        print(f"error: {'; '.join(exc.problems)}", file=sys.stderr)
        return 2
    device = resolve_device(config.device)
    out_dir = Path(args.out) if args.out else REPO / "build" / "energy_bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    problems = bench.read_suite(SAMPLE)
    t0 = time.monotonic()
    rows = []
    for p in problems:
        run_dir = out_dir / "runs" / p.key
        done = (run_dir / "summary.json").exists()
        if args.report_only or (not done and time.monotonic() - t0 > args.deadline_s):
            if not done:
                print(f"not run: {p.key}", flush=True)
            rows.append(bench.problem_row(p, run_dir, error=None if done else "not run"))
            continue
        rows += bench.run_bench([p], config, plugins, out_dir, device,
                                say=lambda s: print(f"[{time.monotonic() - t0:6.0f} s] {s}", flush=True))
    summary = bench.summarise(rows)
    meta = {"suite": str(SAMPLE.relative_to(REPO)), "generator": args.generator, "search": config.search.name,
            "reward": config.reward.name, "budget": config.budget, "device": device, "seed": SEED,
            "sample": sum(PER_LEVEL.values()), "config": args.config, "code": bench.code_digest(),
            "noisy_cv": config.evaluator.noisy_cv}
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "levels": summary, "problems": rows}, indent=1))
    sections = bench.plugin_sections(plugins, config, rows, warn=lambda s: print(f"warning: {s}", file=sys.stderr))
    bench.write_report(out_dir, rows, summary, meta, sections)
    tar_path = Path(os.environ.get("OUT", str(out_dir.parent))) / f"{NAME}.tar.gz"
    tar_path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_path, "w:gz") as tar:
        for name in ("results.json", "report.md"):
            tar.add(out_dir / name, arcname=f"{NAME}/{name}")
        for p in problems:
            run_dir = out_dir / "runs" / p.key
            for name in ("summary.json", "candidates.jsonl", "tree.json", "report.md", "baseline.json", "best.py"):
                if (run_dir / name).exists():
                    tar.add(run_dir / name, arcname=f"{NAME}/runs/{p.key}/{name}")
            for analysis in sorted((run_dir / "analyses").glob("*.json")):
                tar.add(analysis, arcname=f"{NAME}/runs/{p.key}/analyses/{analysis.name}")
    for section in sections:
        print(section)
    print(f"{sum(r['error'] is None for r in rows)} of {len(rows)} problems run; packed {tar_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    sub.add_parser("prepare", help="draw the 8 problems and write them with their code")
    r = sub.add_parser("run", help="optimize them on the GPU and write the report")
    r.add_argument("--config", default=str(REPO / "benchmarks" / "energy_matched_h200.yaml"))
    r.add_argument("--generator", default="expert")
    r.add_argument("--device", default="cuda")
    r.add_argument("--out", help="bench directory (default build/energy_bench)")
    r.add_argument("--deadline-s", type=float, default=480.0, help="start no problem after this many seconds")
    r.add_argument("--report-only", action="store_true", help="only write the tables from the runs on disk")
    args = ap.parse_args(argv)
    return prepare(args) if args.step == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
