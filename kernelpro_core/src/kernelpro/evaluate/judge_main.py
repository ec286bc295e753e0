"""The judge's process: start the two harnesses, wait for the job, then judge.

    python -m kernelpro.evaluate.judge_main DEVICE      (started by kernelpro.evaluate.runner)

Stdin carries the result channel's token, then the path of the job (one line). The
runner may start this process ahead of its job: the harnesses are started and torch
imported before the job's line arrives, and a ``warm`` line before it (sent when nothing is
being timed on the device) opens the CUDA contexts of this process and of the reference's
harness; a ``preload`` line (the job will be a problem's baseline job) has the reference's
harness import what counting FLOPs and ``torch.compile`` need (a baseline job's judge not told
so ahead tells it with the job, so that those imports come before the hello the judge awaits
before it takes a shared GPU); what depends on the job (the
directories, the candidate's build variables, the sandbox) is told to each harness with
its hello, before it confines itself or loads anything of the candidate. Stdin ending
first (the runner discarded this judge) ends the process and its harnesses.

The verdict goes to the parent over the signed result channel
(:mod:`kernelpro.evaluate.channel`) once the candidate's harness has ended; the reference's
is ended after, while the parent goes on. The process leaves with ``os._exit`` so nothing
of the models runs at exit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from kernelpro import gpulock
from kernelpro.evaluate.channel import WorkerEnd
from kernelpro.evaluate.remote import HarnessEnded, Remote
from kernelpro.evaluate.sandbox import set_undumpable

#: the environment of both harnesses on every device: PyTorch's OpenMP threads sleep as soon
#: as a parallel region ends. Left spinning (libgomp's default) each worker burns about 9 ms
#: of CPU after any CPU op large enough to run in parallel (measured on the CPU machine), which
#: the judge reads as work between calls: on a 16-core GPU host 15 workers spinning after one
#: small CPU op of an honest candidate's call is the 40 % of a core that had it rejected in 2 of
#: 6 evaluations on an H100 (docs/validation/evaluator_boundary.md, session 26)
HARNESS_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}

#: and on a CPU: glibc keeps freed heap memory (raised mmap and trim thresholds) instead of
#: returning it to the kernel, so a call does not pay page faults on some calls and not on
#: others (identical calls alternated between 1.5 and 7 ms: docs/validation/evaluator_boundary.md)
CPU_TIMING_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 30)}

#: builds of the candidate's entry that the reference's harness must not load or write
CANDIDATE_BUILD_KEYS = ("TORCH_EXTENSIONS_DIR", "KERNELPRO_BUILD_DIR")


def start_harnesses(device: str, procdir: Path) -> tuple[Remote, Remote]:
    """The reference's harness and the candidate's, started before their job is known
    (their logs and exit records in ``procdir``)."""
    env = dict(os.environ)
    env.pop("KERNELPRO_RESULT_FD", None)
    env.pop(gpulock.ENV, None)  # the GPU's lock is the judge's to hold, never a candidate's
    env.update(HARNESS_ENV)
    if not device.startswith("cuda"):
        env.update(CPU_TIMING_ENV)
    ref = Remote("reference", workdir=procdir, cwd=procdir, env=env, hello=None)
    # inductor's compile workers would be processes left running after every call
    cenv = dict(env, TORCHINDUCTOR_COMPILE_THREADS="1")
    cand = Remote("candidate", workdir=procdir, cwd=procdir, env=cenv, hello=None)
    return ref, cand


def hellos(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """What each harness is told of the job: its directory and the variables of its
    environment that depend on the job (the candidate's build entry, the sandbox)."""
    workdir = Path(job["workdir"])
    build = dict(job.get("build_env") or {})
    ref_dir = workdir / "reference"
    ref_dir.mkdir(exist_ok=True)
    renv = {k: v for k, v in build.items() if k not in CANDIDATE_BUILD_KEYS}
    renv.update(job.get("reference_env", {}))  # its compiled kernels where no candidate may write
    ref = {"role": "reference", "device": job["device"], "cwd": str(ref_dir), "env": renv}
    if job.get("candidate") is None:
        return ref, None
    box = Path(job["sandbox"]["dir"])
    (box / "tmp").mkdir(parents=True, exist_ok=True)
    cenv = dict(build)
    cenv.update(job["sandbox"].get("env", {}))
    cenv["TMPDIR"] = str(box / "tmp")
    cand = {"role": "candidate", "device": job["device"], "cwd": str(box), "env": cenv,
            "confine": bool(job["sandbox"].get("confine", True)),
            "memory_limit_mb": job["evaluator"].get("memory_limit_mb"),
            "writable": job["sandbox"]["writable"]}
    return ref, cand


def _open_context(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.zeros(1, device=device)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    set_undumpable()
    device = argv[0]
    channel = WorkerEnd(job_follows=True)  # reads the token
    ref, cand = start_harnesses(device, Path.cwd())
    from kernelpro.evaluate.harness import one_line  # torch: while the harnesses start
    from kernelpro.evaluate.judge import Fail, Judge
    from kernelpro.records import CompileResult, EvalResult, Verdict, to_json

    job_path = channel.line()
    preloaded = False
    while job_path in ("warm", "preload"):
        if job_path == "warm":  # nothing is being timed on the device now: open the CUDA contexts
            # (on a GPU shared with other jobs, not while one of them measures: kernelpro.gpulock)
            lock = gpulock.from_env()
            try:
                with lock.held(gpulock.SHARED):
                    _open_context(device)
                    ref.warm(device)
            except Exception:  # a GPU fault shows again, as a verdict, when the job runs
                pass
            finally:
                lock.close()
        else:  # its job will be a baseline job: the reference's harness imports torch.compile's stack
            preloaded = _preload(ref, device) or preloaded
        job_path = channel.line()
    channel.close_stdin()
    if not job_path:  # discarded before its job came: the harnesses end with this process
        os._exit(0)
    job = json.loads(Path(job_path).read_text())
    ref_hello, cand_hello = hellos(job)
    cand_remote: Remote | None = cand if cand_hello is not None else None
    if cand_hello is None:
        cand.kill()
        if not preloaded:  # a baseline job no one told this judge of: the imports before its
            # hello, which the judge awaits before it takes a shared GPU (Judge.reference)
            _preload(ref, device)
    for remote, hello in ((ref, ref_hello), (cand_remote, cand_hello)):
        if remote is not None and hello is not None:
            try:
                remote.tell(hello)
            except HarnessEnded:  # it died while waiting: the judge's first request says how
                pass
    judge = Judge(job, ref, cand_remote)
    try:
        result = judge.run()
    except Fail as f:
        result = EvalResult(
            verdict=f.verdict, reason=f.reason,
            compile=f.extra.get("compile") or (CompileResult(ok=False, log=f.extra.get("log", ""))
                                               if f.verdict is Verdict.COMPILE_ERROR else None),
            correctness=f.extra.get("correctness"), flags=tuple(judge.flags), device=job["device"],
            gpu_name=judge.gpu_name,
            # the numbers taken up to the verdict: what an integrity violation or a failed
            # check rests on (the envelope's looks, the re-checks' errors), for the record
            measurements={"evaluator": dict(judge.notes)} if judge.notes else {})
    except BaseException as exc:
        import traceback

        traceback.print_exc()  # into the evaluation's judge.log: where it ran out, or failed
        if _out_of_memory(exc):  # the evaluation's inputs, outputs and buffers do not fit on this device
            stage = judge.stages[-1][0] if judge.stages else "start"
            try:
                held = f"; {judge.held()}" if judge.cuda else ""
            except Exception as why:  # the verdict stands without the breakdown
                held = f"; what the judge holds is unknown ({one_line(why)[:80]})"
            result = EvalResult(verdict=Verdict.OOM, reason="the evaluator ran out of memory for the "
                                f"evaluation's own buffers (stage {stage}{held}): {one_line(exc)}",
                                flags=tuple(judge.flags), device=job["device"],
                                # what it had shed, retried and noted up to there
                                measurements={"evaluator": dict(judge.notes)})
        else:  # a fault of the judge itself: said as such, never blamed on the candidate
            result = EvalResult(verdict=Verdict.CRASH, reason=f"the evaluator failed: {one_line(exc)}",
                                flags=tuple(judge.flags), device=job["device"])
    judge.stop_candidate()  # the candidate's processes are gone before the verdict is out
    channel.send(json.dumps(to_json(result)))
    sys.stdout.flush()
    judge.stop_harnesses()
    os._exit(0)


def _preload(ref: Remote, device: str) -> bool:
    """Tell the reference's harness to import what a baseline job's FLOP count and
    ``torch.compile`` need (on a GPU device; elsewhere it does nothing), before its hello."""
    try:
        ref.preload(device)
    except Exception:  # it died while waiting: the judge's first request says how
        return False
    return True


def _out_of_memory(exc: BaseException) -> bool:
    """Whether the judge's own allocation failed for want of memory (torch's allocator, or
    the driver's for a buffer lent to a harness)."""
    import torch

    from kernelpro.evaluate.transport import TransportError

    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(exc, TransportError) and "OUT_OF_MEMORY" in str(exc))


if __name__ == "__main__":
    main()
