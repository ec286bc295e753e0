"""Parent side of evaluation: start a worker process, bound it in time, judge how it ended.

A worker that dies never takes the run with it: a signal becomes ``crash`` (or ``oom``
when the kernel's OOM killer sent SIGKILL), a hang becomes ``timeout`` (or
``compile_timeout`` when it hung while compiling), an exit without a result becomes
``exited``. The worker runs in its own process group, which is killed when it ends, so
nothing it started is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kernelpro.config import EvaluatorConfig, unstructure
from kernelpro.records import EvalResult, Verdict, from_json

SIGNAL_NAMES = {s.value: s.name for s in signal.Signals}


def build_env(build_dir: Path) -> dict[str, str]:
    """Environment of a candidate's worker and of its profilers: per-candidate build dirs."""
    env = dict(os.environ)
    env["TORCH_EXTENSIONS_DIR"] = str(build_dir / "torch_extensions")
    env["TRITON_CACHE_DIR"] = str(build_dir / "triton")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def evaluate(
    problem_path: Path,
    candidate_path: Path | None,
    *,
    device: str,
    config: EvaluatorConfig,
    workdir: Path,
    seed: int = 0,
    measurements: list[tuple[type, Any]] = (),
    build_dir: Path | None = None,
    language: str = "pytorch",
) -> EvalResult:
    """Evaluate ``candidate_path`` against ``problem_path`` in a fresh worker process.

    With ``candidate_path=None`` only the reference is timed (the baseline)."""
    workdir.mkdir(parents=True, exist_ok=True)
    build_dir = build_dir or workdir / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    job = {
        "problem": str(Path(problem_path).resolve()),
        "candidate": str(Path(candidate_path).resolve()) if candidate_path else None,
        "device": device,
        "seed": seed,
        "language": language,
        "evaluator": unstructure(config),
        "measurements": [
            {"name": cls.name, "import": f"{cls.__module__}:{cls.__qualname__}",
             "settings": unstructure(settings) if settings is not None else {}}
            for cls, settings in measurements
        ],
        "result": str(workdir / "result.json"),
        "status": str(workdir / "status.txt"),
    }
    for stale in ("result.json", "status.txt"):
        (workdir / stale).unlink(missing_ok=True)
    job_path = workdir / "job.json"
    job_path.write_text(json.dumps(job, indent=1))
    log_path = workdir / "worker.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kernelpro.evaluate.worker", str(job_path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=build_env(build_dir), start_new_session=True, cwd=str(workdir),
        )
        timed_out = False
        try:
            rc = proc.wait(timeout=config.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            rc = proc.wait()
        finally:
            _kill_group(proc.pid)  # anything the candidate left running
    wall = time.monotonic() - t0
    stage = (workdir / "status.txt").read_text().strip() if (workdir / "status.txt").exists() else "start"
    result_path = workdir / "result.json"
    if timed_out:
        verdict = Verdict.COMPILE_TIMEOUT if stage == "compile" else Verdict.TIMEOUT
        return EvalResult(verdict=verdict, reason=f"no result after {config.timeout_s:g} s (stage: {stage})",
                          device=device, wall_s=wall)
    if result_path.exists():
        try:
            data = json.loads(result_path.read_text())
            result = from_json(data, EvalResult)
        except Exception as exc:
            return EvalResult(verdict=Verdict.CRASH, reason=f"unreadable worker result: {exc}", device=device,
                              wall_s=wall)
        return _with_wall(result, wall)
    if rc < 0:
        sig = SIGNAL_NAMES.get(-rc, str(-rc))
        if -rc == signal.SIGKILL:
            return EvalResult(verdict=Verdict.OOM, reason=f"worker killed by SIGKILL (stage: {stage}); "
                              "usually the out-of-memory killer", device=device, wall_s=wall)
        return EvalResult(verdict=Verdict.CRASH, reason=f"worker died from {sig} (stage: {stage})",
                          device=device, wall_s=wall)
    tail = _tail(log_path)
    return EvalResult(verdict=Verdict.EXITED, reason=f"worker exited with status {rc} without a result "
                      f"(stage: {stage}){': ' + tail if tail else ''}", device=device, wall_s=wall)


def _with_wall(result: EvalResult, wall: float) -> EvalResult:
    import attrs

    return attrs.evolve(result, wall_s=wall)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, n: int = 1) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[:300]
