"""Triton kernels compiled in the compile stage, off the GPU, before the candidate's first call.

    python -m kernelpro.evaluate.triton_warm ENTRY CANDIDATE.py PROBLEM.py ARCH   (run by warm)

Why. A Triton kernel compiles at its first call. In the judge that call is the first
correctness trial, on the device: with several jobs sharing a GPU
(``executor.params.jobs_per_gpu``) each evaluation holds the device alone from its first
work there, and compiling was a quarter of what the candidates held (1.2-4.2 s of 4-9 s a
candidate, docs/validation/throughput.md, session 33).

Method. A process of its own, with the GPU hidden and confined like the compile stage's
child, imports the problem and the candidate, builds ``ModelNew`` and calls it once on
*meta* tensors of the problem's input shapes (no memory, no data, no device). Every
``@triton.jit`` launch in that call is turned into a compile for the GPU's target
(``JITFunction.run(..., warmup=True)``: compile, do not launch; an ``@triton.autotune``
kernel compiles each of its configs), written to the cache entry's ``triton`` directory,
the one the candidate's harness and the profilers use. Nothing runs: the rest of the call
computes on meta tensors.

What it cannot do is an outcome, never a failure of the candidate: a forward that needs the
device (``torch.cuda`` calls, ``.item()``, CUDA graphs), data-dependent shapes, a kernel whose
arguments depend on the device (an SM count read off a CUDA device: off it the code may
choose another grid or constants) compile at the first call as before, on a cache miss.
A meta tensor's address is 0 plus its offset, so pointer alignment specializes as it does
for the device's allocations (aligned to 512 bytes); integers specialize on the same
values. ``triton_warm.json`` in the entry records the kernels compiled, the seconds and
why it stopped early.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kernelpro.evaluate.reaper import end_reaped

#: a source that defines Triton kernels
USES_TRITON = re.compile(r"@\s*triton\.(jit|autotune|heuristics)\b|\btriton\.jit\(")
RESULT = "triton_warm.json"
TIMEOUT_S = 120.0  # at most, within evaluator.compile_timeout_s


def uses_triton(source: str) -> bool:
    return bool(USES_TRITON.search(source))


def target_capability(arch: str) -> int | None:
    """Triton's target capability of a TORCH_CUDA_ARCH_LIST value: "9.0a" -> 90."""
    m = re.fullmatch(r"(\d+)\.(\d+)[a-z]?", arch.strip())
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None


def done_for(entry: Path, problem_sha: str) -> dict[str, Any] | None:
    """The entry's earlier warm-up for this problem, if any."""
    try:
        res = json.loads((Path(entry) / RESULT).read_text())
    except (OSError, ValueError):
        return None
    return res if res.get("problem_sha256") == problem_sha else None


def warm(entry: Path, candidate: Path, problem: Path, arch: str, env: dict[str, str], timeout_s: float,
         problem_sha: str) -> dict[str, Any]:
    """Run the warm-up child for ``candidate`` in ``entry`` (its lock held by the caller);
    its outcome (also left in ``entry/triton_warm.json``). Never raises for the candidate's
    faults."""
    out = Path(entry) / RESULT
    out.unlink(missing_ok=True)
    rc_path = Path(entry) / "triton_warm_rc"
    rc_path.unlink(missing_ok=True)
    t0 = time.monotonic()
    with open(Path(entry) / "triton_warm.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kernelpro.evaluate.reaper", str(rc_path), "--",
                                 sys.executable, "-m", "kernelpro.evaluate.triton_warm", str(entry),
                                 str(Path(candidate).resolve()), str(Path(problem).resolve()), arch],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd=str(entry))
        try:
            proc.wait(timeout=timeout_s)
            why = None
        except subprocess.TimeoutExpired:
            why = f"did not finish within {timeout_s:g} s"
        finally:
            end_reaped(proc, grace_s=5.0)
    try:
        res = json.loads(out.read_text())
    except (OSError, ValueError):
        res = {"kernels": [], "stopped": why or f"the warm-up process ended without an outcome (status "
               f"{proc.returncode})"}
    res["problem_sha256"] = problem_sha
    res["wall_s"] = time.monotonic() - t0
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(res))
    os.replace(tmp, out)
    return res


# --- child side ----------------------------------------------------------------------------------


class _CompileOnly:
    """Triton's active driver while nothing may run: the target to compile for, device 0,
    stream 0; anything else is a question only a GPU answers."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no GPU while compiling ahead (triton driver.{name})")


def _compile_only(capability: int, compiled: list[str]) -> None:
    """Make every Triton launch of this process a compile for ``capability``."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import autotuner
    from triton.runtime.driver import driver
    from triton.runtime.jit import JITFunction

    driver.set_active(_CompileOnly(GPUTarget("cuda", capability, 32)))
    run = JITFunction.run

    def compile_instead(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        compiled.append(getattr(self, "__name__", None) or str(self))
        return kernel

    def every_config(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        return self.warmup(*args, grid=grid, **kwargs)  # each config compiled; none timed

    JITFunction.run = compile_instead
    autotuner.Autotuner.run = every_config


def _child(entry: Path, candidate: Path, problem: Path, arch: str) -> int:
    out = entry / RESULT
    if os.environ.pop("KERNELPRO_CONFINE", "1") == "1":
        from kernelpro.evaluate.sandbox import confine

        confine([entry])
    t0 = time.monotonic()
    compiled: list[str] = []
    stopped = None
    try:
        capability = target_capability(arch)
        if capability is None:
            raise RuntimeError(f"no Triton target for arch {arch!r}")
        import torch

        from kernelpro.evaluate.loader import load_module

        _compile_only(capability, compiled)
        prob = load_module(problem, "kernelpro_problem")
        cand = load_module(candidate, "kernelpro_candidate")
        with torch.device("meta"), torch.no_grad():
            torch.manual_seed(0)
            model = cand.ModelNew(*prob.get_init_inputs())
            model(*prob.get_inputs())
    except BaseException as exc:  # the candidate's code off the device: every stop is an outcome
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        stopped = text[0][:300] if text else type(exc).__name__
    res = {"kernels": compiled, "seconds": time.monotonic() - t0, "stopped": stopped}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(res))
    os.replace(tmp, out)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]))
