"""Run a problem's reference or a candidate's forward for a profiler.

    python -m kernelpro.evaluate.forward --problem P.py [--candidate C.py]
        [--device cuda] [--warmup 3] [--iters 1] [--seed 0]

Warm-up calls (compilation, autotuning, caches) run first; then the ``--iters`` profiled
calls run between ``cudaProfilerStart`` and ``cudaProfilerStop`` and inside the NVTX
range ``kernelpro:profiled``, so a profiler started with ``--profile-from-start off``
(Nsight Compute, Nsight Systems) sees only the candidate's own kernels: not the warm-up,
not the reference. Exit status 0 on success; on failure one line on stderr and status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROFILED_RANGE = "kernelpro:profiled"


def command(
    problem: Path,
    candidate: Path | None,
    device: str = "cuda",
    warmup: int = 3,
    iters: int = 1,
    seed: int = 0,
    python: str = sys.executable,
) -> list[str]:
    """The argv that runs this module; collectors prefix it with their profiler."""
    argv = [python, "-m", "kernelpro.evaluate.forward", "--problem", str(problem)]
    if candidate is not None:
        argv += ["--candidate", str(candidate)]
    argv += ["--device", device, "--warmup", str(warmup), "--iters", str(iters), "--seed", str(seed)]
    return argv


def prepare(problem_path: Path, candidate_path: Path | None, device: str, seed: int):
    """Build the model (candidate's ModelNew, or the reference Model) and its inputs."""
    from kernelpro.evaluate.compile import install_build_hooks
    from kernelpro.evaluate.loader import build_model, load_module, make_inputs

    problem = load_module(problem_path, "kernelpro_problem")
    if candidate_path is not None:
        install_build_hooks()  # the evaluator's include paths and flags: the cached build is reused
        cand = load_module(candidate_path, "kernelpro_candidate")
        cls = cand.ModelNew
    else:
        cls = problem.Model
    model = build_model(cls, problem, seed, device)
    inputs = make_inputs(problem, seed + 1, device)
    return model, inputs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelpro.evaluate.forward")
    ap.add_argument("--problem", required=True, type=Path)
    ap.add_argument("--candidate", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    try:
        model, inputs = prepare(args.problem, args.candidate, args.device, args.seed)
        with torch.no_grad():
            for _ in range(args.warmup):
                model(*inputs)
            cuda = args.device.startswith("cuda")
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStart()
                torch.cuda.nvtx.range_push(PROFILED_RANGE)
            for _ in range(args.iters):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
                torch.cuda.cudart().cudaProfilerStop()
    except Exception as exc:  # one line for the collector, never a traceback
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"forward failed: {type(exc).__name__}: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
