"""Parent side of evaluation: compile stage, the judge's process, time limit, verdicts.

1. Compile stage (:mod:`kernelpro.evaluate.compile`): a candidate that builds native code
   is built in its own (confined) process into a content-addressed cache entry (a hit
   costs nothing); a compiler error or compile timeout is the verdict without going on.
2. The judge (:mod:`kernelpro.evaluate.judge`) runs under :mod:`kernelpro.evaluate.reaper`
   in a new session, with the result channel of :mod:`kernelpro.evaluate.channel` (a pipe
   and a token only the evaluator knows). It starts the reference's and the candidate's
   harness processes itself; the candidate's gets an empty directory of its own
   (``<workdir>/sandbox``) and may write nowhere else but its build-cache entry.
3. How the judge ended decides the verdict when it sent no result (it always does unless
   it was killed): over ``timeout_s`` is ``timeout`` with the stage it was in.
4. Files the candidate must leave alone (the problem, its own source, the files beside
   them) are watched (:class:`kernelpro.evaluate.sandbox.FileWatch`) from before the
   compile stage to the end: any change is an ``integrity_violation``, whatever the judge
   decided. Where the kernel has Landlock such writes fail in the first place.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from kernelpro import progress
from kernelpro.config import EvaluatorConfig, unstructure
from kernelpro.evaluate import compile as build
from kernelpro.evaluate.channel import FD_ENV, ChannelError, ParentEnd
from kernelpro.evaluate.interpret import interpreter_env
from kernelpro.evaluate.reaper import kill_group, log_tail, signal_pid
from kernelpro.evaluate.sandbox import FileWatch
from kernelpro.records import CompileResult, EvalResult, Verdict, from_json

if TYPE_CHECKING:  # pragma: no cover
    from kernelpro.api import Measurement

SIGNAL_NAMES = {s.value: s.name for s in signal.Signals}  # canonical names (SIGABRT, not SIGIOT)


# The variables a process needs to load a candidate's cached build exactly as its harness did
# (a profiler given only the first two rebuilds load_inline code with torch's default flags).
BUILD_ENV_KEYS = ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "KERNELPRO_BUILD_DIR", "KERNELPRO_INCLUDE_PATHS",
                  "KERNELPRO_CUDA_FLAGS", "KERNELPRO_CUDA_ARCH", "TORCH_CUDA_ARCH_LIST")


def build_env(build_dir: Path) -> dict[str, str]:
    """Environment of a candidate's harness and of its profilers.

    ``build_dir`` may be a symlink to a build-cache entry (what :func:`evaluate` makes of
    the directory it is given): it is resolved, and the entry's architecture, include
    paths and flags (its meta.json) are restored, so a profiler loads the same binary."""
    entry = Path(build_dir).resolve()
    meta: dict[str, Any] = {}
    try:
        meta = json.loads((entry / "meta.json").read_text())
    except (OSError, json.JSONDecodeError):
        pass
    return build.build_env(entry, arch=meta.get("arch"), include_paths=meta.get("include_paths", []),
                           cuda_flags=meta.get("cuda_flags", []))


def profile_env(build_dir: Path, device: str, candidate: Path | None) -> dict[str, str]:
    """What a profiler's process of ``candidate`` adds to its environment: the build's
    variables (:func:`build_env`), and Triton's interpreter for a Triton candidate on a CPU
    (:mod:`kernelpro.evaluate.interpret`), as its harness had them."""
    env = build_env(build_dir)
    out = {k: env[k] for k in BUILD_ENV_KEYS if k in env}
    out.update(interpreter_env(device, candidate))
    return out


def _link_build_dir(build_dir: Path, entry: Path) -> None:
    """Make the caller's build directory point at the cache entry (when it is free)."""
    try:
        if build_dir.is_symlink():
            if build_dir.resolve() == entry.resolve():
                return
            build_dir.unlink()
        elif build_dir.exists():
            if any(build_dir.iterdir()):
                return
            build_dir.rmdir()
        build_dir.parent.mkdir(parents=True, exist_ok=True)
        build_dir.symlink_to(entry.resolve(), target_is_directory=True)
    except OSError:
        pass


def evaluate(
    problem_path: Path,
    candidate_path: Path | None,
    *,
    device: str,
    config: EvaluatorConfig,
    workdir: Path,
    seed: int = 0,
    measurements: Sequence[tuple[type[Measurement], Any]] = (),
    build_dir: Path | None = None,
    language: str = "pytorch",
    compiled: build.CompileOutcome | None = None,
    reference_flops: float | None = None,
    ceilings: Any = None,
    env: dict[str, str] | None = None,
) -> EvalResult:
    """Evaluate ``candidate_path`` against ``problem_path`` (see the module docstring).

    With ``candidate_path=None`` only the reference is timed (the baseline). ``compiled``:
    the outcome of :func:`kernelpro.evaluate.compile.compile_candidate` when the caller
    compiled ahead (``compile_many``); otherwise the compile stage runs here (a cache hit
    when the same source was built before). ``reference_flops``: the reference's FLOP
    count from the baseline job (its ``measurements["evaluator"]["flops"]``), so that the
    judge need not count them again (a counted forward takes seconds on a GPU). ``ceilings``:
    the run's GPU spec (calibrated where ``kernelpro calibrate`` measured the GPU): the
    problem's minimum-traffic bound against it is reported as
    ``measurements["evaluator"]["min_traffic_bound_ms"]``. ``env``: added to the environment
    of the judge and everything it starts (an executor's ``CUDA_VISIBLE_DEVICES``, pinning
    the evaluation to one GPU)."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    files = [Path(problem_path)] + ([Path(candidate_path)] if candidate_path else [])
    # what the evaluator itself writes is not watched: the work and build directories, the build cache
    ours = [workdir, build.cache_root(config.build_cache_dir)] + ([Path(build_dir)] if build_dir else [])
    guard = FileWatch(files=files, dirs=[f.resolve().parent for f in files], ignore=ours)
    result = _evaluate(problem_path, candidate_path, device=device, config=config, workdir=workdir, seed=seed,
                       measurements=measurements, build_dir=build_dir, language=language, compiled=compiled,
                       reference_flops=reference_flops, ceilings=ceilings, extra_env=env or {})
    changed = guard.changed() if candidate_path is not None else []
    if changed:
        result = EvalResult(verdict=Verdict.INTEGRITY, reason="the candidate changed files outside its directory: "
                            + "; ".join(changed[:5]), compile=result.compile, device=device)
    return attrs.evolve(result, wall_s=time.monotonic() - t0)


def _evaluate(problem_path: Path, candidate_path: Path | None, *, device: str, config: EvaluatorConfig,
              workdir: Path, seed: int, measurements: Sequence[tuple[type[Measurement], Any]], build_dir: Path | None,
              language: str, compiled: build.CompileOutcome | None, reference_flops: float | None,
              ceilings: Any = None, extra_env: dict[str, str] | None = None) -> EvalResult:
    t0 = time.monotonic()
    stage_info: dict[str, Any] = {}
    what = Path(candidate_path).stem if candidate_path is not None else "reference"
    if candidate_path is not None and config.compile_stage:
        if compiled is None:
            progress.stage(f"{what}: compile")
        outcome = compiled or build.compile_candidate(Path(candidate_path), config=config)
        stage_info = {"status": outcome.status, "compile_seconds": outcome.compile_seconds,
                      "cached": outcome.cached, "key": outcome.key}
        if outcome.status == "compile_error":
            return EvalResult(verdict=Verdict.COMPILE_ERROR, reason=outcome.reason or "compilation failed",
                              compile=outcome.result(language), device=device, wall_s=time.monotonic() - t0)
        if outcome.status == "compile_timeout":
            return EvalResult(verdict=Verdict.COMPILE_TIMEOUT, reason=outcome.reason,
                              compile=CompileResult(ok=False, seconds=outcome.seconds, language=language),
                              device=device, wall_s=time.monotonic() - t0)
        _write_entry_settings(outcome, config)
        if build_dir is not None:
            _link_build_dir(Path(build_dir), outcome.build_dir)
        entry = outcome.build_dir
        env = build.build_env(entry, arch=outcome.arch, include_paths=_includes(config),
                              cuda_flags=list(config.cuda_flags))
    else:
        entry = Path(build_dir) if build_dir is not None else workdir / "build"
        entry.mkdir(parents=True, exist_ok=True)
        env = build_env(entry)
    box = workdir / "sandbox"
    if box.exists():
        import shutil

        shutil.rmtree(box, ignore_errors=True)
    box.mkdir()
    entry_dir = Path(entry).resolve()
    job = {
        "problem": str(Path(problem_path).resolve()),
        "candidate": str(Path(candidate_path).resolve()) if candidate_path else None,
        "device": device,
        "seed": seed,
        "workdir": str(workdir),
        # the candidate's harness: its own empty directory, and its build entry (Triton and
        # torch.compile write there at the first call), are all it may write
        "sandbox": {"dir": str(box), "writable": [str(box), str(entry_dir)],
                    "confine": config.write_guard != "detect",
                    "env": {"TORCHINDUCTOR_CACHE_DIR": str(entry_dir / "inductor"),
                            "CUDA_CACHE_PATH": str(entry_dir / "cuda_cache"), "PYTHONDONTWRITEBYTECODE": "1",
                            # Triton kernels on a CPU run under Triton's interpreter
                            **interpreter_env(device, candidate_path, language)}},
        # the reference's compiled kernels are cached where no candidate may write
        "reference_env": {"TRITON_CACHE_DIR": str(build.cache_root(config.build_cache_dir) / "reference" / "triton"),
                          "TORCHINDUCTOR_CACHE_DIR": str(build.cache_root(config.build_cache_dir) / "reference"
                                                         / "inductor")},
        "language": language,
        "compile": stage_info,
        "evaluator": unstructure(config),
        "measurements": [
            {"name": cls.name, "import": f"{cls.__module__}:{cls.__qualname__}",
             "settings": unstructure(settings) if settings is not None else {}}
            for cls, settings in measurements
        ],
        "status": str(workdir / "status.txt"),
        "reference_flops": reference_flops,
        "ceilings": unstructure(ceilings) if ceilings is not None else None,
    }
    for stale in ("result.json", "status.txt", "judge_rc"):
        (workdir / stale).unlink(missing_ok=True)
    job_path = workdir / "job.json"
    job_path.write_text(json.dumps(job, indent=1))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra_env or {})
    result = _run_judge(job_path, workdir, env, config, device, what)
    return attrs.evolve(result, wall_s=time.monotonic() - t0)


def _includes(config: EvaluatorConfig) -> list[str]:
    from kernelpro.evaluate import toolchain

    return toolchain.include_paths(config.include_paths)


def _write_entry_settings(outcome: build.CompileOutcome, config: EvaluatorConfig) -> None:
    """Record in the entry what a profiler's environment needs to load the same build."""
    meta_path = outcome.build_dir / "meta.json"
    try:
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"status": outcome.status}
    except (OSError, json.JSONDecodeError):
        return
    want = {"arch": outcome.arch, "include_paths": _includes(config), "cuda_flags": list(config.cuda_flags)}
    if all(meta.get(k) == v for k, v in want.items()):
        return
    meta.update(want)
    tmp = meta_path.with_name(f"meta.json.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, meta_path)
    except OSError:
        pass


def _wait_showing_stages(proc: subprocess.Popen[bytes], timeout_s: float, status: Path, what: str) -> None:
    """``proc.wait(timeout_s)``, telling the progress display each stage the judge enters."""
    deadline = time.monotonic() + timeout_s
    seen = ""
    while True:
        try:
            now = status.read_text().strip()
        except OSError:
            now = ""
        if now and now != seen:
            seen = now
            progress.stage(f"{what}: {now.replace('_', ' ')}")
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        try:
            proc.wait(timeout=min(0.2, left))
            return
        except subprocess.TimeoutExpired:
            continue


class EvaluationStopped(BaseException):
    """The evaluation was ended because its caller stopped (:func:`stop_judges`): it has no
    verdict, and nothing is to be recorded of it. Not an ``Exception``, so that no handler
    for a failing candidate or plugin takes it for one."""


#: the judges running now, by the thread that waits for each (an executor's worker)
_RUNNING: dict[int, set[int]] = {}
#: threads whose caller stopped: a judge they start later is ended at once
_STOPPED: set[int] = set()
_RUNNING_GUARD = threading.Lock()


def stop_judges(threads: Iterable[int]) -> None:
    """End the evaluations the given threads are waiting for, with every process they
    started (the reaper of each kills its descendants): an executor whose caller stopped
    (Ctrl-C, an error) must not leave them running. Each of those evaluations raises
    :class:`EvaluationStopped`, and so does every later one in those threads."""
    with _RUNNING_GUARD:
        threads = list(threads)
        _STOPPED.update(threads)
        pids = [pid for t in threads for pid in _RUNNING.get(t, ())]
    for pid in pids:
        signal_pid(pid, signal.SIGTERM)


def forget_thread() -> None:
    """The calling thread (an executor's worker) ends: a later thread with its ident is new."""
    with _RUNNING_GUARD:
        _STOPPED.discard(threading.get_ident())
        _RUNNING.pop(threading.get_ident(), None)


def _run_judge(job_path: Path, workdir: Path, env: dict[str, str], config: EvaluatorConfig,
               device: str, what: str = "candidate") -> EvalResult:
    channel = ParentEnd()
    env = dict(env)
    env[FD_ENV] = str(channel.write_fd)
    token_r, token_w = os.pipe()
    os.write(token_w, channel.token)
    os.close(token_w)
    rc_path = workdir / "judge_rc"
    log_path = workdir / "judge.log"
    argv = [sys.executable, "-m", "kernelpro.evaluate.reaper", str(rc_path), "--",
            sys.executable, "-m", "kernelpro.evaluate.judge_main", str(job_path)]
    timed_out = False
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(argv, stdin=token_r, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True, cwd=str(workdir), pass_fds=(channel.write_fd,))
        finally:
            os.close(token_r)
        channel.start_reading()
        me = threading.get_ident()
        with _RUNNING_GUARD:
            _RUNNING.setdefault(me, set()).add(proc.pid)
            stopped = me in _STOPPED
        if stopped:
            signal_pid(proc.pid, signal.SIGTERM)
        try:
            _wait_showing_stages(proc, config.timeout_s, workdir / "status.txt", what)
        except subprocess.TimeoutExpired:
            timed_out = True
            signal_pid(proc.pid, signal.SIGTERM)  # the reaper kills the judge and every descendant
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                proc.wait()
        finally:
            with _RUNNING_GUARD:
                _RUNNING.get(me, set()).discard(proc.pid)
            kill_group(proc.pid)  # anything left in the session's group
    data = channel.finish()
    with _RUNNING_GUARD:
        stopped = me in _STOPPED
    if stopped:
        raise EvaluationStopped()
    stage = (workdir / "status.txt").read_text().strip() if (workdir / "status.txt").exists() else "start"
    if timed_out:
        verdict = Verdict.COMPILE_TIMEOUT if stage == "compile" else Verdict.TIMEOUT
        return EvalResult(verdict=verdict, reason=f"no result after {config.timeout_s:g} s (stage: {stage})",
                          device=device)
    try:
        payload = channel.verify(data)
    except ChannelError as exc:
        return EvalResult(verdict=Verdict.INTEGRITY, reason=f"{exc} (stage: {stage})", device=device)
    if payload is not None:
        try:
            return from_json(json.loads(payload), EvalResult)
        except Exception as exc:
            return EvalResult(verdict=Verdict.CRASH, reason=f"unreadable evaluator result: {exc}", device=device)
    try:
        rc = int(rc_path.read_text().strip())
    except (OSError, ValueError):
        rc = proc.returncode if proc.returncode is not None else -1
    if rc < 0:
        sig = SIGNAL_NAMES.get(-rc, str(-rc))
        if -rc == signal.SIGKILL:
            return EvalResult(verdict=Verdict.OOM, reason=f"evaluator killed by SIGKILL (stage: {stage}); "
                              "usually the out-of-memory killer", device=device)
        return EvalResult(verdict=Verdict.CRASH, reason=f"evaluator died from {sig} (stage: {stage})", device=device)
    tail = log_tail(log_path)
    return EvalResult(verdict=Verdict.EXITED, reason=f"evaluator exited with status {rc} without a result "
                      f"(stage: {stage}){': ' + tail if tail else ''}", device=device)


