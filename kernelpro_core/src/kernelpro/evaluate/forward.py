"""Run a problem's reference or a candidate's forward for a profiler.

    python -m kernelpro.evaluate.forward --problem P.py [--candidate C.py]
        [--device cuda] [--warmup 3] [--iters 1] [--seed 0] [--io-json OUT.json]
    python -m kernelpro.evaluate.forward --job-on-stdin

``--job-on-stdin``: started ahead of its job (a profiler's process, started while the
previous candidate is generated or evaluated): import torch and what loading a candidate
needs, then read one JSON line ``{"argv": [...], "env": {...}, "cwd": "...", "ack": "..."}``
(the options above, variables to add, the directory to work in, a file to create once the
line has arrived) and go on as if started with them; an
empty line or the end of stdin ends it with status 0. It opens no CUDA context before its
job comes.

Warm-up calls (compilation, autotuning, caches) run first; then the ``--iters`` profiled
calls run between ``cudaProfilerStart`` and ``cudaProfilerStop`` and inside the NVTX
range ``kernelpro:profiled``, so a profiler started with ``--profile-from-start off``
(Nsight Compute, Nsight Systems) sees only the candidate's own kernels: not the warm-up,
not the reference. ``--io-json`` writes the bytes the forward must at least move (its
inputs, parameters and buffers, and its output) for micro-profilers that compare measured
DRAM traffic with that minimum, and when each phase ended (``phases``: wall-clock seconds
since the epoch at ``main``, ``torch`` imported, model and inputs ``prepared``, ``warmup``
done, ``profiled`` calls done) so a collector can tell where its seconds went. Exit status
0 on success; on failure one line on stderr and status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
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
    io_json: Path | None = None,
) -> list[str]:
    """The argv that runs this module; collectors prefix it with their profiler."""
    argv = [python, "-m", "kernelpro.evaluate.forward", "--problem", str(problem)]
    if candidate is not None:
        argv += ["--candidate", str(candidate)]
    argv += ["--device", device, "--warmup", str(warmup), "--iters", str(iters), "--seed", str(seed)]
    if io_json is not None:
        argv += ["--io-json", str(io_json)]
    return argv


def tensor_bytes(value) -> int:
    """Bytes of every tensor in a (nested) value."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    return 0


def prepare(problem_path: Path, candidate_path: Path | None, device: str, seed: int):
    """Build the model (candidate's ModelNew, or the reference Model) and its inputs.

    The numeric settings are the timed calls': PyTorch's defaults (cuDNN convolutions may use
    TF32) unless the candidate itself changes them when it loads, so a profile sees the kernels
    that were timed."""
    from kernelpro.evaluate import guard
    from kernelpro.evaluate.compile import install_build_hooks
    from kernelpro.evaluate.interpret import prepare_interpreter
    from kernelpro.evaluate.loader import build_model, load_module, make_inputs

    guard.set_default_precision()
    problem = load_module(problem_path, "kernelpro_problem")
    if candidate_path is not None:
        install_build_hooks()  # the evaluator's include paths and flags: the cached build is reused
        prepare_interpreter()  # Triton's interpreter, when the evaluator chose it (a CPU device)
        cand = load_module(candidate_path, "kernelpro_candidate")
        cls = cand.ModelNew
    else:
        cls = problem.Model
    model = build_model(cls, problem, seed, device)
    inputs = make_inputs(problem, seed + 1, device)
    return model, inputs


def wait_for_job() -> list[str] | None:
    """``--job-on-stdin``: what can be loaded before the job is (torch, the modules that load
    a candidate, Triton where installed: CPU work only), then the job's line; its variables
    and directory are applied as if the process had started with them. None: no job came."""
    from kernelpro.evaluate.harness import apply_env, enter_dir  # torch and the loaders with it

    try:
        import triton  # noqa: F401
    except Exception:  # not installed, or broken: the candidate's own import says so
        pass
    from kernelpro.evaluate.triton_stubs import warm_cache_key

    warm_cache_key()  # Triton's cache key, computed at the first kernel otherwise (on a GPU host only)
    line = sys.stdin.readline()
    if not line.strip():
        return None
    job = json.loads(line)
    if job.get("ack"):  # the sender learns that its job arrived (whatever happens next)
        Path(job["ack"]).write_text("")
    apply_env({str(k): str(v) for k, v in (job.get("env") or {}).items()})
    if job.get("cwd"):
        enter_dir(str(job["cwd"]))
    return [str(a) for a in job["argv"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelpro.evaluate.forward")
    ap.add_argument("--problem", type=Path)
    ap.add_argument("--candidate", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--io-json", type=Path, help="write input/parameter/output bytes here")
    ap.add_argument("--job-on-stdin", action="store_true", help="started ahead: read the job from stdin")
    args = ap.parse_args(argv)
    if args.job_on_stdin:
        try:
            job_argv = wait_for_job()
        except (ValueError, KeyError, TypeError, OSError) as exc:
            print(f"forward failed: bad job line: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        if job_argv is None:
            return 0
        args = ap.parse_args(job_argv)
    if args.problem is None:
        ap.error("--problem is required")
    phases = {"main": time.time()}

    import torch

    phases["torch"] = time.time()
    from kernelpro import gpulock

    # on a GPU shared with other jobs: the GPU alone from the model's preparation on (a
    # profiler's counters must see this process only, and its kernels the free memory a
    # run of its own would leave them; kernelpro.gpulock). It is let go when the process
    # exits, after its memory is freed.
    lock = gpulock.from_env()
    try:
        lock.hold(gpulock.EXCLUSIVE)
        if lock.active:
            phases["locked"] = time.time()
        model, inputs = prepare(args.problem, args.candidate, args.device, args.seed)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        phases["prepared"] = time.time()
        io: dict[str, object] = {}
        if args.io_json is not None:
            io["input_bytes"] = tensor_bytes(inputs)
            io["param_bytes"] = 0
            if isinstance(model, torch.nn.Module):
                io["param_bytes"] = sum(tensor_bytes(t) for t in (*model.parameters(), *model.buffers()))
        with torch.no_grad():
            for i in range(args.warmup):
                out = model(*inputs)
                if i == 0 and args.io_json is not None:
                    io["output_bytes"] = tensor_bytes(out)
                del out
            cuda = args.device.startswith("cuda")
            if cuda:
                torch.cuda.synchronize()
            phases["warmup"] = time.time()
            if cuda:
                torch.cuda.cudart().cudaProfilerStart()
                torch.cuda.nvtx.range_push(PROFILED_RANGE)
            for _ in range(args.iters):
                out = model(*inputs)
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
                torch.cuda.cudart().cudaProfilerStop()
            phases["profiled"] = time.time()
            if args.io_json is not None and "output_bytes" not in io:
                io["output_bytes"] = tensor_bytes(out)
        if args.io_json is not None:
            io["phases"] = phases
            args.io_json.write_text(json.dumps(io))
    except Exception as exc:  # one line for the collector, never a traceback
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"forward failed: {type(exc).__name__}: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
