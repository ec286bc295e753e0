#!/usr/bin/env python3
"""Where a candidate's profile and a problem's baseline job spend their seconds (GPU).

    python benchmarks/profile_phases.py profile RUN_DIR CANDIDATE_ID [-c CONFIG.yaml]
        [--variants default,rules_off,...] [--repeat 2] [--json OUT.json]
    python benchmarks/profile_phases.py baseline PROBLEM.py [--json OUT.json]

``profile``: profiles one evaluated candidate of a run directory (``problem.py``,
``candidates/<id>.py``) with the config's profiling pipeline, once per variant of the ncu
collector's settings, and prints each pass's seconds split by the forward's phases (ncu
and interpreter start, torch import, problem/model/inputs and CUDA context, warm-up,
replay, report and exit). It also times, without ncu, the same forward and a bare
``import torch``, and ``ncu`` around that bare import, so the fixed costs are separated
from the replay passes. Variants: ``default`` (the config's settings), ``no_source``
(``source_lines: false``), ``warmup1`` (``warmup: 1``), ``lean`` (both).

``baseline``: in fresh processes on the GPU, the first FLOP count (``FlopCounterMode``) and
the first ``torch.compile`` call of the problem's reference, cold and after importing
torch's compiler stack first (what a judge started ahead could do while it waits), each
part timed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no_source": {"source_lines": False},
    "warmup1": {"warmup": 1},
    "lean": {"source_lines": False, "warmup": 1},
}


def _timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


def profile_study(args: argparse.Namespace) -> dict[str, Any]:
    from kernelpro import config as cfg
    from kernelpro.api import ProfileContext, ProfileTarget
    from kernelpro.evaluate.forward import command as forward_command
    from kernelpro.executors.calls import make_profiler
    from kernelpro.loop import gpu_spec
    from kernelpro.plugins import Plugins

    run = Path(args.run_dir).resolve()
    problem, candidate = run / "problem.py", run / "candidates" / f"{args.candidate}.py"
    for p in (problem, candidate):
        if not p.exists():
            raise SystemExit(f"profile_phases: {p} does not exist")
    plugins = Plugins()
    out: dict[str, Any] = {"run_dir": str(run), "candidate": args.candidate, "variants": {}}
    work = Path(tempfile.mkdtemp(prefix="kp-phases-"))
    for name in args.variants.split(","):
        overrides = VARIANTS[name]
        config = cfg.load_config(args.config, overrides={"profiling.collector_params": {"ncu": overrides}}
                                 if overrides else None)
        resolved = cfg.validate(config, plugins)
        gpu = gpu_spec(plugins, args.device, config.gpu)
        for i in range(args.repeat):
            profiler = make_profiler(config, plugins, resolved)
            target = ProfileTarget(problem_path=problem, candidate_path=candidate, device=args.device,
                                   workdir=work / f"{name}_{i}", build_dir=work / "build", python=sys.executable,
                                   env={})
            t0 = time.perf_counter()
            analysis, _ = profiler.profile(target, ProfileContext(gpu=gpu, device=args.device, result=None))
            wall = time.perf_counter() - t0
            row = {"wall_s": round(wall, 3), **{k: round(v, 3) for k, v in profiler.last_seconds.items()},
                   "bottleneck": analysis.bottleneck.kind if analysis.bottleneck else None,
                   "findings": sorted(f.tool for f in analysis.findings)}
            out["variants"].setdefault(name, []).append(row)
            print(name, i, json.dumps(row), flush=True)
    # the fixed costs without ncu, and ncu around a bare interpreter
    io_json = work / "plain_io.json"
    fwd = forward_command(problem, candidate, device=args.device, warmup=3, iters=1, io_json=io_json)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "kernelpro_core" / "src"),
                                                    env.get("PYTHONPATH", "")) if p)
    launched = time.time()
    plain = _timed(fwd, env)
    ended = time.time()
    phases = json.loads(io_json.read_text()).get("phases", {})
    from kernelpro_plugins_ncu.collector import find_ncu, phase_seconds

    out["forward_without_ncu"] = {"wall_s": round(plain, 3),
                                  **{k: round(v, 3) for k, v in phase_seconds(phases, launched, ended).items()}}
    out["python_import_torch_s"] = round(_timed([sys.executable, "-c", "import torch"]), 3)
    ncu = find_ncu()
    if ncu and args.device.startswith("cuda"):
        out["ncu_python_import_torch_s"] = round(_timed(
            [ncu, "--profile-from-start", "off", "--target-processes", "all", sys.executable, "-c", "import torch"]), 3)
        out["ncu_python_cuda_context_s"] = round(_timed(
            [ncu, "--profile-from-start", "off", "--target-processes", "all", sys.executable, "-c",
             "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"]), 3)
    if args.device.startswith("cuda"):
        out["python_cuda_context_s"] = round(_timed(
            [sys.executable, "-c", "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"]), 3)
    print(json.dumps({k: v for k, v in out.items() if k != "variants"}), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return out


_BASELINE_CHILD = r"""
import json, sys, time
t = {"start": time.time()}
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t["torch_context"] = time.time()
if sys.argv[2] == "preloaded":
    import torch._dynamo, torch._inductor.compile_fx, torch.utils.flop_counter
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False), torch.no_grad():
        torch.ones(2, 2) @ torch.ones(2, 2)
    t["preload"] = time.time()
from kernelpro.evaluate.loader import build_model, load_module, make_inputs
problem = load_module(sys.argv[1], "kernelpro_problem")
model = build_model(problem.Model, problem, 0, "cuda")
inputs = make_inputs(problem, 1, "cuda")
with torch.no_grad():
    model(*inputs)
torch.cuda.synchronize()
t["model_first_call"] = time.time()
from torch.utils.flop_counter import FlopCounterMode
counter = FlopCounterMode(display=False)
with counter, torch.no_grad():
    model(*inputs)
torch.cuda.synchronize()
t["flop_count"] = time.time()
compiled = torch.compile(model)
with torch.no_grad():
    compiled(*inputs)
torch.cuda.synchronize()
t["compile_first_call"] = time.time()
print(json.dumps(t))
"""


def baseline_study(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"problem": args.problem, "runs": {}}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "kernelpro_core" / "src"),
                                                    env.get("PYTHONPATH", "")) if p)
    for mode in ("cold", "preloaded", "cold", "preloaded"):
        with tempfile.TemporaryDirectory(prefix="kp-baseline-") as tmp:
            env_run = dict(env, TMPDIR=tmp, TORCHINDUCTOR_CACHE_DIR=str(Path(tmp) / "inductor"),
                           TRITON_CACHE_DIR=str(Path(tmp) / "triton"))
            proc = subprocess.run([sys.executable, "-c", _BASELINE_CHILD, str(Path(args.problem).resolve()), mode],
                                  capture_output=True, text=True, env=env_run)
        if proc.returncode != 0:
            raise SystemExit(f"profile_phases baseline: the child failed: {proc.stderr.strip().splitlines()[-1:]}")
        t = json.loads(proc.stdout.strip().splitlines()[-1])
        keys = list(t)
        parts = {k: round(t[k] - t[p], 3) for p, k in zip(keys, keys[1:])}
        out["runs"].setdefault(mode, []).append(parts)
        print(mode, json.dumps(parts), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="profile_phases.py")
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("profile")
    p.add_argument("run_dir")
    p.add_argument("candidate")
    p.add_argument("-c", "--config", default=str(REPO / "benchmarks" / "expert_h200.yaml"))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--device", default="cuda")
    p.add_argument("--json")
    b = sub.add_parser("baseline")
    b.add_argument("problem")
    b.add_argument("--json")
    args = ap.parse_args(argv)
    if args.what == "profile":
        unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
        if unknown:
            ap.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
        result = profile_study(args)
    else:
        result = baseline_study(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
