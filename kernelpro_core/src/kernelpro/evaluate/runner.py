"""Parent side of evaluation: compile stage, the judge's process, time limit, verdicts.

1. Compile stage (:mod:`kernelpro.evaluate.compile`): a candidate that builds native code
   is built in its own (confined) process into a content-addressed cache entry (a hit
   costs nothing); a compiler error or compile timeout is the verdict without going on.
2. The judge (:mod:`kernelpro.evaluate.judge`) runs under :mod:`kernelpro.evaluate.reaper`
   in a new session, with the result channel of :mod:`kernelpro.evaluate.channel` (a pipe
   and a token only the evaluator knows). It starts the reference's and the candidate's
   harness processes itself; the candidate's gets an empty directory of its own
   (``<workdir>/sandbox``) and may write nowhere else but its build-cache entry.
   Starting the three processes (each imports torch, two open a CUDA context) costs seconds;
   with ``prestart`` the next evaluation's judge is started ahead (on a GPU when this one
   begins, opening no CUDA context until it ends; on a CPU when it ends) and waits for its
   job (:class:`_JudgeProcess`): the loop's next evaluation on the same device takes it. The verdict is back once the candidate's harness has ended; the
   reference's ends behind it, and the next evaluation on that device waits for that.
3. How the judge ended decides the verdict when it sent no result (it always does unless
   it was killed): over ``timeout_s`` is ``timeout`` with the stage it was in.
4. Files the candidate must leave alone (the problem, its own source, the files beside
   them) are watched (:class:`kernelpro.evaluate.sandbox.FileWatch`) from before the
   compile stage to the end: any change is an ``integrity_violation``, whatever the judge
   decided. Where the kernel has Landlock such writes fail in the first place.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from kernelpro import progress
from kernelpro.config import EvaluatorConfig, unstructure
from kernelpro.evaluate import compile as build
from kernelpro.evaluate import sandbox, triton_stubs
from kernelpro.evaluate.channel import FD_ENV, ChannelError, ParentEnd
from kernelpro.evaluate.interpret import interpreter_env
from kernelpro.evaluate.reaper import end_reaped, kill_group, log_tail, signal_pid
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
    prestart: bool = False,
    next_is_baseline: bool = False,
    measure_max_ms: float | None = None,
    reference_history: dict[str, list[dict[str, float]]] | None = None,
    reference_history_file: str | None = None,
    worker: str | None = None,
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
    the evaluation to one GPU). ``prestart``: more evaluations on this device follow, so
    start the next one's processes now (``config.prestart`` must allow it);
    ``next_is_baseline``: the next is another problem's baseline job (a bench), whose
    reference harness then imports ``torch.compile``'s stack while it waits.
    ``measure_max_ms``: the ``measurements`` are taken only when the candidate's median time
    is at most this (flag ``measurement_skipped`` otherwise). ``reference_history``: per
    measurement name, this run's earlier measurements of the reference on the same worker
    (``reference_``-stripped values, with ``measured_at_unix_s``), handed to
    ``Measurement.measure_reference``; ``reference_history_file`` (the loop's
    ``reference_history.json``, per worker) and ``worker`` (this evaluation's): read again when
    the judge measures, for measurements recorded after this call began."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    files = [Path(problem_path)] + ([Path(candidate_path)] if candidate_path else [])
    # what the evaluator itself writes is not watched: the work and build directories, the build cache
    ours = [workdir, build.cache_root(config.build_cache_dir)] + ([Path(build_dir)] if build_dir else [])
    guard = FileWatch(files=files, dirs=[f.resolve().parent for f in files], ignore=ours)
    result = _evaluate(problem_path, candidate_path, device=device, config=config, workdir=workdir, seed=seed,
                       measurements=measurements, build_dir=build_dir, language=language, compiled=compiled,
                       reference_flops=reference_flops, ceilings=ceilings, extra_env=env or {},
                       prestart=prestart and config.prestart, next_is_baseline=next_is_baseline,
                       measure_max_ms=measure_max_ms, reference_history=reference_history,
                       reference_history_file=reference_history_file, worker=worker)
    changed = guard.changed() if candidate_path is not None else []
    if changed:
        result = EvalResult(verdict=Verdict.INTEGRITY, reason="the candidate changed files outside its directory: "
                            + "; ".join(changed[:5]), compile=result.compile, device=device)
    return attrs.evolve(result, wall_s=time.monotonic() - t0)


def seed_triton_stubs(candidate_path: Path, entry: Path, device: str, config: EvaluatorConfig) -> int:
    """Triton's C helper module (``cuda_utils``) into a Triton candidate's cache before its
    harness starts: built once per host by this process's own code
    (:mod:`kernelpro.evaluate.triton_stubs`), not again by each candidate at its first call on
    the device. How many module directories were copied. Only where candidates are confined
    (Landlock, ``evaluator.write_guard`` not ``detect``): an unconfined candidate could write
    the shared store, and every later candidate would load what it left there."""
    if device != "cuda" or not triton_stubs.uses_triton(Path(candidate_path).read_text(errors="replace")):
        return 0
    if config.write_guard == "detect" or sandbox.landlock_abi() <= 0:
        return 0
    return triton_stubs.seed(triton_stubs.ensure(build.cache_root(config.build_cache_dir)), Path(entry) / "triton")


def _evaluate(problem_path: Path, candidate_path: Path | None, *, device: str, config: EvaluatorConfig,
              workdir: Path, seed: int, measurements: Sequence[tuple[type[Measurement], Any]], build_dir: Path | None,
              language: str, compiled: build.CompileOutcome | None, reference_flops: float | None,
              ceilings: Any = None, extra_env: dict[str, str] | None = None, prestart: bool = False,
              next_is_baseline: bool = False, measure_max_ms: float | None = None,
              reference_history: dict[str, list[dict[str, float]]] | None = None,
              reference_history_file: str | None = None, worker: str | None = None) -> EvalResult:
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
        seed_triton_stubs(Path(candidate_path), entry, device, config)
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
        "measure_max_ms": measure_max_ms,
        "reference_history": reference_history or {},
        "reference_history_file": reference_history_file,
        "worker": worker,
        "ceilings": unstructure(ceilings) if ceilings is not None else None,
        # the variables of the candidate's build: the judge starts before its job is known,
        # so each harness is told them with its hello
        "build_env": {k: env[k] for k in BUILD_ENV_KEYS if k in env},
    }
    for stale in ("result.json", "status.txt", "judge_rc"):
        (workdir / stale).unlink(missing_ok=True)
    job_path = workdir / "job.json"
    job_path.write_text(json.dumps(job, indent=1))
    result = _run_judge(job_path, workdir, judge_env(extra_env, env), config, device, what, prestart=prestart,
                        next_is_baseline=next_is_baseline)
    return attrs.evolve(result, wall_s=time.monotonic() - t0)


def judge_env(extra_env: dict[str, str] | None = None, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a judge's process starts with: ``env`` (by default this process's),
    without the variables of a candidate's build (the job tells them), with ``extra_env``
    (an executor's ``CUDA_VISIBLE_DEVICES``)."""
    out = {k: v for k, v in (os.environ if env is None else env).items() if k not in BUILD_ENV_KEYS and k != FD_ENV}
    out.setdefault("PYTHONUNBUFFERED", "1")
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    out.update(extra_env or {})
    return out


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


def _wait_showing_stages(proc: subprocess.Popen[bytes], channel: ParentEnd, timeout_s: float, status: Path,
                         what: str) -> None:
    """Wait until the judge closed its result channel (it has sent its verdict, or ended)
    or its process ended, within ``timeout_s``; tell the progress display each stage the
    judge enters."""
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
        if channel.closed.wait(timeout=min(0.1, left)) or proc.poll() is not None:
            return


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


# --- the judge's process, started ahead of its job -------------------------------------------


@attrs.define(eq=False)
class _JudgeProcess:
    """A judge's process under its reaper, started with its channel's token on stdin; it
    imports torch, starts both harnesses and waits for its job's line (:meth:`give`).
    Its logs and exit records are in ``procdir`` until the evaluation moves them."""

    key: tuple[Any, ...]
    proc: subprocess.Popen[bytes]
    channel: ParentEnd
    job_fd: int | None
    procdir: Path
    started: float
    workdir: Path | None = None  # the evaluation's directory, once it has a job
    warmed: bool = False
    preloaded: bool = False  # told its job will be a baseline job

    @classmethod
    def start(cls, key: tuple[Any, ...], device: str, env: dict[str, str]) -> _JudgeProcess:
        procdir = Path(tempfile.mkdtemp(prefix="kernelpro-judge-"))
        channel = ParentEnd()
        env = dict(env)
        env[FD_ENV] = str(channel.write_fd)
        stdin_r, stdin_w = os.pipe()
        os.write(stdin_w, channel.token)
        argv = [sys.executable, "-m", "kernelpro.evaluate.reaper", str(procdir / "judge_rc"), "--",
                sys.executable, "-m", "kernelpro.evaluate.judge_main", device]
        try:
            with open(procdir / "judge.log", "wb") as log:
                proc = subprocess.Popen(argv, stdin=stdin_r, stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True, cwd=str(procdir), pass_fds=(channel.write_fd,))
        except BaseException:
            os.close(stdin_w)
            os.close(channel.write_fd)
            os.close(channel.read_fd)
            shutil.rmtree(procdir, ignore_errors=True)
            raise
        finally:
            os.close(stdin_r)
        channel.start_reading()
        return cls(key=key, proc=proc, channel=channel, job_fd=stdin_w, procdir=procdir, started=time.monotonic())

    def warm(self) -> None:
        """Let it open its CUDA contexts now (nothing is being timed on its device)."""
        if self.job_fd is not None and not self.warmed:
            self.warmed = True
            self._say(b"warm\n")

    def preload(self) -> None:
        """Its job will be a baseline job: have the reference's harness import
        torch.compile's stack now (CPU work only, so also while something is timed: on the
        H200 host it takes longer than an evaluation)."""
        if self.job_fd is not None and not self.preloaded:
            self.preloaded = True
            self._say(b"preload\n")

    def _say(self, line: bytes) -> None:
        assert self.job_fd is not None
        try:
            os.write(self.job_fd, line)
        except OSError:
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.channel.closed.is_set()

    def give(self, job_path: Path, workdir: Path) -> None:
        """Send the job's line; a judge that died meanwhile is told by how it ended. Its
        logs show in ``workdir`` from now on (links until it has ended, then the files)."""
        self.workdir = workdir
        for name in PROCESS_LOGS:
            link = workdir / name
            try:
                if link.is_symlink() or link.exists():
                    link.unlink()
                link.symlink_to(self.procdir / name)
            except OSError:
                pass
        fd, self.job_fd = self.job_fd, None
        if fd is None:
            return
        try:
            os.write(fd, (str(job_path) + "\n").encode())
        except OSError:
            pass
        finally:
            os.close(fd)

    def discard(self) -> None:
        """End it without a job (its harnesses end with it)."""
        if self.job_fd is not None:
            os.close(self.job_fd)
            self.job_fd = None
        signal_pid(self.proc.pid, signal.SIGTERM)
        _end_behind(self)

    def finish_ending(self, grace_s: float = 30.0) -> None:
        """Wait for the process (ending its reference harness) and everything in its group,
        then remove its directory."""
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        end_reaped(self.proc)
        self.channel.finish(timeout_s=0.1)
        if self.workdir is not None:  # its logs and exit records go to the evaluation's directory
            for name in PROCESS_LOGS + PROCESS_RECORDS:
                src, dst = self.procdir / name, self.workdir / name
                if not src.exists():
                    continue
                try:
                    if dst.is_symlink() or dst.exists():
                        dst.unlink()
                    shutil.move(str(src), str(dst))
                except OSError:
                    pass
        shutil.rmtree(self.procdir, ignore_errors=True)


#: what a judge's processes write into its directory
PROCESS_LOGS = ("judge.log", "reference.log", "candidate.log")
PROCESS_RECORDS = ("judge_rc", "reference_rc", "candidate_rc")


#: judges started ahead, by key (device and environment): at most one each, MAX_SPARES in all;
#: one told its job will be a baseline job waits under :func:`_baseline_slot` of its key
_SPARES: dict[tuple[Any, ...], _JudgeProcess] = {}
#: judges whose verdict is back and whose reference harness is still ending, by key
_ENDING: dict[tuple[Any, ...], list[threading.Thread]] = {}
_SPARES_GUARD = threading.Lock()
MAX_SPARES = 8


def _spare_key(device: str, env: dict[str, str]) -> tuple[Any, ...]:
    return (device, sys.executable, tuple(sorted(env.items())))


def _baseline_slot(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """Where a judge started ahead for a baseline job waits: only a baseline job takes it.
    Kept with the others, two problems sharing a GPU (``jobs_per_gpu``) could lose it to the
    other problem's next candidate (seen in session 35's call G1: that candidate's evaluation
    imported torch.compile's stack for nothing, and the baseline job did so again on its own
    path; docs/validation/throughput.md, session 36)."""
    return (*key, "baseline")


def _end_behind(judge: _JudgeProcess) -> None:
    t = threading.Thread(target=judge.finish_ending, daemon=True, name="kernelpro-judge-end")
    with _SPARES_GUARD:
        _ENDING.setdefault(judge.key, []).append(t)
    t.start()


def _wait_ended(key: tuple[Any, ...], timeout_s: float = 60.0) -> None:
    """Wait until the processes of the last evaluations under ``key`` (the same device) are
    gone, so that none of them is still ending while this one measures."""
    with _SPARES_GUARD:
        threads = _ENDING.pop(key, [])
    end = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))


def _take_spare(key: tuple[Any, ...], baseline: bool = False) -> _JudgeProcess | None:
    """A judge started ahead under ``key``; for a baseline job (``baseline``) the one started
    for it first."""
    for slot in ([_baseline_slot(key)] if baseline else []) + [key]:
        with _SPARES_GUARD:
            judge = _SPARES.pop(slot, None)
        if judge is not None and judge.alive():
            return judge
        if judge is not None:
            judge.discard()
    return None


def prestart_judge(device: str, env: dict[str, str], warm: bool = True, baseline: bool = False) -> None:
    """Start a judge for the next evaluation under ``device`` and ``env`` (a
    :func:`judge_env`), unless one waits already; ``warm``: nothing is being timed on the
    device, so it may open its CUDA contexts now (a judge waiting already is told so);
    ``baseline``: its job will be a problem's baseline job, so its reference's harness
    imports what the FLOP count and ``torch.compile`` need, now (CPU work only). A run's
    evaluations call it themselves (``prestart``: on a GPU when they begin, unwarmed, and
    when they end); a bench calls it when a problem ends, for the next one's baseline, and
    has the run's last evaluation do so with ``baseline``."""
    key = _spare_key(device, env)
    slot = _baseline_slot(key) if baseline else key
    with _SPARES_GUARD:
        waiting = _SPARES.get(slot)
    if waiting is not None:
        if warm:
            waiting.warm()
        return
    judge = _JudgeProcess.start(key, device, env)
    if baseline:
        judge.preload()
    if warm:
        judge.warm()
    old: list[_JudgeProcess] = []
    with _SPARES_GUARD:
        if slot in _SPARES:  # another thread was quicker
            old.append(judge)
        else:
            _SPARES[slot] = judge
        while len(_SPARES) > MAX_SPARES:
            oldest = min(_SPARES, key=lambda k: _SPARES[k].started)
            old.append(_SPARES.pop(oldest))
    for j in old:
        j.discard()


def discard_spares() -> None:
    """End every judge started ahead that no evaluation took (:func:`settle`, at exit)."""
    with _SPARES_GUARD:
        judges = list(_SPARES.values())
        _SPARES.clear()
    for j in judges:
        j.discard()


def settle(timeout_s: float = 60.0) -> None:
    """Discard the judges started ahead and wait (up to ``timeout_s``) until every judge
    whose verdict is back has ended: no evaluator process of this one is left running."""
    discard_spares()
    with _SPARES_GUARD:
        threads = [t for ts in _ENDING.values() for t in ts]
        _ENDING.clear()
    end = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))


atexit.register(settle, 30.0)


def _run_judge(job_path: Path, workdir: Path, env: dict[str, str], config: EvaluatorConfig,
               device: str, what: str = "candidate", prestart: bool = False,
               next_is_baseline: bool = False) -> EvalResult:
    me = threading.get_ident()
    with _RUNNING_GUARD:
        if me in _STOPPED:
            raise EvaluationStopped()
    key = _spare_key(device, env)
    _wait_ended(key)
    judge = _take_spare(key, baseline=what == "reference") or _JudgeProcess.start(key, device, env)
    proc, channel = judge.proc, judge.channel
    progress.stage(f"{what}: start")
    with _RUNNING_GUARD:
        _RUNNING.setdefault(me, set()).add(proc.pid)
    timed_out = False
    try:
        judge.give(job_path, workdir)
        if prestart and device.startswith("cuda"):
            # the next evaluation's judge imports torch meanwhile (CPU only: it opens no CUDA
            # context until this one has ended); on a CPU device that would compete with
            # what is measured, so there it starts when this one ends
            try:
                prestart_judge(device, env, warm=False, baseline=next_is_baseline)
            except OSError:
                pass
        try:
            _wait_showing_stages(proc, channel, config.timeout_s, workdir / "status.txt", what)
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
            stopped = me in _STOPPED
        if stopped or timed_out:
            signal_pid(proc.pid, signal.SIGTERM)
    data = channel.finish(timeout_s=0.5 if proc.poll() is None else 5.0)
    if not data and proc.poll() is None:  # it closed the channel without a verdict: how did it end?
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            signal_pid(proc.pid, signal.SIGTERM)
            proc.wait()
    try:
        rc_text: str | None = (judge.procdir / "judge_rc").read_text().strip()
    except OSError:
        rc_text = None
    if stopped or timed_out or not data:
        judge.finish_ending(grace_s=10.0)  # nothing of it goes on behind a caller that stopped
    else:
        _end_behind(judge)  # the reference's harness ends behind the verdict
    if prestart and not stopped:
        try:
            prestart_judge(device, env, baseline=next_is_baseline)
        except OSError:  # no spare: the next evaluation starts its own
            pass
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
        rc = int(rc_text) if rc_text is not None else int((workdir / "judge_rc").read_text().strip())
    except (OSError, ValueError):
        rc = proc.returncode if proc.returncode is not None else -1
    if rc < 0:
        sig = SIGNAL_NAMES.get(-rc, str(-rc))
        if -rc == signal.SIGKILL:
            return EvalResult(verdict=Verdict.OOM, reason=f"evaluator killed by SIGKILL (stage: {stage}); "
                              "usually the out-of-memory killer", device=device)
        return EvalResult(verdict=Verdict.CRASH, reason=f"evaluator died from {sig} (stage: {stage})", device=device)
    tail = log_tail(workdir / "judge.log")
    if stage == "reference":  # the judge imports and runs the problem there, and no candidate code yet
        return EvalResult(verdict=Verdict.PROBLEM_ERROR, reason=f"the problem file ended the evaluator's process "
                          f"(status {rc}, no result) while it was loaded or run (os._exit at import?)"
                          f"{': ' + tail if tail else ''}", device=device)
    return EvalResult(verdict=Verdict.EXITED, reason=f"evaluator exited with status {rc} without a result "
                      f"(stage: {stage}){': ' + tail if tail else ''}", device=device)
