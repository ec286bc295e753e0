"""H200 benchmark of the offline ``expert`` generator through ``kernelpro bench``.

Two steps:

1. On the development machine (needs ../shared/kernelbench), draw the sample BEFORE any
   result exists, with a fixed seed, and write it into an ignored folder that the device
   tool carries::

       python benchmarks/expert_h200.py prepare          # -> build/kernelbench_sample/sample.jsonl

2. On the H200 machine, from the repo root (with build/kernelbench_sample copied there)::

       python benchmarks/expert_h200.py run --config benchmarks/expert_h200.yaml --deadline-s 420

   Each problem is optimized with the expert generator (greedy search, a fixed budget per
   problem, ncu + SASS profiling) into ``build/expert_bench/runs/<problem>`` by
   ``kernelpro.bench.run_bench``: the config's executor runs one problem per visible GPU at a
   time (``local``; ``ray`` for the GPUs of a Ray cluster); no problem is started after
   ``--deadline-s``. It writes results.json and report.md from every run directory and packs
   ``$OUT/expert.tar.gz``; ``--report-only`` does that without running anything. Problems already run are read
   back (their run directories, carried back to the machine, continue a bench in a later
   call); the table counts problems not yet run as failures, so only a pass that ran every
   problem gives the numbers to record. The speedup over torch.compile comes from the
   compiled reference timed once per problem, in its baseline job (the config's
   ``evaluator.compiled_reference_per_candidate: false``).

The expert generator (distribution kernelpro_plugins_expert) and the bench module are
found through their entry points.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "build" / "kernelbench_sample" / "sample.jsonl"
SEED = 20261130  # fixed before any result: the sample cannot be chosen after the fact
PER_LEVEL = 10
LEVELS = (1, 2)


def prepare(args: argparse.Namespace) -> int:
    """The tuning sample of ``benchmarks/kernelbench/split.json`` (drawn with ``SEED``,
    ``PER_LEVEL`` per level of ``LEVELS``), with its code from the shared data."""
    sys.path.insert(0, str(REPO / "benchmarks" / "kernelbench"))
    from split import with_code, write_suite

    split = json.loads((REPO / "benchmarks" / "kernelbench" / "split.json").read_text())["tuning"]
    if split["seed"] != SEED:
        print(f"error: split.json's tuning sample was drawn with seed {split['seed']}, not {SEED}", file=sys.stderr)
        return 2
    write_suite(with_code([p for p in split["problems"] if p["level"] in LEVELS]), SAMPLE)
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
    overrides = {"device": args.device, "budget": args.budget,
                 "generator": {"name": args.generator, "params": {}}}
    config = cfg.load_config(args.config, overrides)
    cfg.validate(config, plugins)
    device = resolve_device(config.device)
    # the bench directory lives in the ignored build/ folder of the repo, which the device
    # machine keeps between calls while it stays warm: a second call continues the bench
    out_dir = Path(args.out) if args.out else REPO / "build" / f"{args.generator}_bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    problems = bench.select(bench.read_suite(SAMPLE), levels=list(LEVELS))
    if args.limit:
        problems = problems[:args.limit]
    if args.first:
        problems = order_first(problems, args.first)
    if args.report_only:
        rows = [bench.problem_row(p, out_dir / "runs" / p.key, error=None if (out_dir / "runs" / p.key
                                                                               / "summary.json").exists()
                                  else "not run") for p in problems]
    else:
        # every GPU of the host (or of the Ray cluster, with the config's executor: ray) takes
        # the next problem as it becomes free; none starts after the deadline
        t0 = time.monotonic()
        rows = bench.run_bench(problems, config, plugins, out_dir, device, deadline=time.time() + args.deadline_s,
                               say=lambda s: print(f"[{time.monotonic() - t0:6.0f} s] {s}", flush=True))
    summary = bench.summarise(rows)
    from kernelpro.loop import gpu_spec

    spec = gpu_spec(plugins, device)
    # the roofline fractions are relative to these ceilings: run `kernelpro calibrate` first
    # so that they are the GPU's measured bandwidth and throughput, not the datasheet's
    meta = {"suite": str(SAMPLE.relative_to(REPO)), "generator": args.generator, "search": config.search.name,
            "budget": config.budget, "device": device, "seed": SEED, "sample": PER_LEVEL,
            "config": args.config, "code": bench.code_digest(),
            "ceilings": None if spec is None else {"gpu": spec.name, "source": spec.source,
                                                   "dram_gbs": spec.dram_bandwidth_gbs}}
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "levels": summary, "problems": rows}, indent=1))
    bench.write_report(out_dir, rows, summary, meta)
    tar_path = Path(os.environ.get("OUT", str(out_dir.parent))) / f"{args.generator}.tar.gz"
    _pack(tar_path, out_dir, args.generator, [p.key for p in problems], with_tables=True)
    print(bench.summary_table(summary))
    print(f"packed {tar_path} ({tar_path.stat().st_size} bytes)")
    return 0


def order_first(problems: list, first: str) -> list:
    """``problems`` with those named in ``first`` (comma-separated keys or key prefixes such
    as ``L1_98``) first, in that order, and the rest in their own order: only the order
    changes (which problems a short call reaches first), not the set."""
    firsts = [f.strip() for f in first.split(",") if f.strip()]

    def rank(p: object) -> int:
        key = p.key  # type: ignore[attr-defined]
        return next((i for i, f in enumerate(firsts) if key == f or key.startswith(f + "_")), len(firsts))

    return sorted(problems, key=rank)


def _pack(tar_path: Path, out_dir: Path, generator: str, keys: list[str], with_tables: bool) -> None:
    """Pack the tables (optionally) and, per problem, what the report needs (no build outputs)."""
    tar_path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_path, "w:gz") as tar:
        if with_tables:
            for name in ("results.json", "report.md", "roofline.png"):
                if (out_dir / name).exists():
                    tar.add(out_dir / name, arcname=f"{generator}_bench/{name}")
        for key in keys:
            run_dir = out_dir / "runs" / key
            for name in ("summary.json", "candidates.jsonl", "profiles.jsonl", "best.py", "report.md", "baseline.json",
                         "bench.json"):
                if (run_dir / name).exists():
                    tar.add(run_dir / name, arcname=f"{generator}_bench/runs/{key}/{name}")
            for analysis in sorted((run_dir / "analyses").glob("*.json")):
                tar.add(analysis, arcname=f"{generator}_bench/runs/{key}/analyses/{analysis.name}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    sub.add_parser("prepare", help="draw the sample (needs ../shared/kernelbench)")
    r = sub.add_parser("run", help="optimize the sample and write results (on the H200)")
    r.add_argument("--generator", default="expert")
    r.add_argument("--budget", type=int, default=4, help="candidates per problem (fixed for the whole sample)")
    r.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    r.add_argument("--config", default=None, help="YAML config (default: kernelpro's defaults)")
    r.add_argument("--out", default=None, help="bench directory (default: build/<generator>_bench)")
    r.add_argument("--limit", type=int, default=None)
    r.add_argument("--first", default=None, metavar="KEYS",
                   help="comma-separated problem keys or key prefixes (e.g. L1_98) to run first; the rest "
                        "keep the sample's order")
    r.add_argument("--deadline-s", type=float, default=540.0, help="start no problem after this many seconds")
    r.add_argument("--report-only", action="store_true",
                   help="run nothing: read every problem's run directory and write the tables")
    args = ap.parse_args(argv)
    return prepare(args) if args.step == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
