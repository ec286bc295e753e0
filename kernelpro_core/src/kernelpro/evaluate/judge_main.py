"""The judge's process: start the two harnesses, then judge.

    python -m kernelpro.evaluate.judge_main JOB.json      (started by runner.evaluate)

The harnesses are started before anything heavy is imported here, so the three processes
import torch at the same time rather than one after the other. The verdict goes to the
parent over the signed result channel (:mod:`kernelpro.evaluate.channel`); the process
leaves with ``os._exit`` so nothing of the models runs at exit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from kernelpro.evaluate.channel import WorkerEnd
from kernelpro.evaluate.remote import Remote
from kernelpro.evaluate.sandbox import set_undumpable

#: the environment of both harnesses on a CPU: OpenMP threads sleep as soon as a parallel
#: region ends (spinning ones would look like work between calls), and glibc keeps freed heap
#: memory (raised mmap and trim thresholds) instead of returning it to the kernel, so a call
#: does not pay page faults on some calls and not on others (identical calls alternated
#: between 1.5 and 7 ms: docs/validation/evaluator_boundary.md)
CPU_TIMING_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                  "MALLOC_TRIM_THRESHOLD_": str(64 << 30)}

#: builds of the candidate's entry that the reference's harness must not load or write
CANDIDATE_BUILD_KEYS = ("TORCH_EXTENSIONS_DIR", "KERNELPRO_BUILD_DIR")


def start_harnesses(job: dict[str, Any]) -> tuple[Remote, Remote | None]:
    """The reference's harness, and the candidate's (None for the baseline job)."""
    workdir = Path(job["workdir"])
    cuda = job["device"].startswith("cuda")
    env = dict(os.environ)
    env.pop("KERNELPRO_RESULT_FD", None)
    if not cuda:
        env.update(CPU_TIMING_ENV)
    ref_dir = workdir / "reference"
    ref_dir.mkdir(exist_ok=True)
    renv = {k: v for k, v in env.items() if k not in CANDIDATE_BUILD_KEYS}
    renv.update(job.get("reference_env", {}))  # its compiled kernels where no candidate may write
    ref = Remote("reference", workdir=workdir, cwd=ref_dir, env=renv,
                 hello={"role": "reference", "device": job["device"]})
    if job.get("candidate") is None:
        return ref, None
    box = Path(job["sandbox"]["dir"])
    (box / "tmp").mkdir(parents=True, exist_ok=True)
    cenv = dict(env)
    cenv.update(job["sandbox"].get("env", {}))
    # inductor's compile workers would be processes left running after every call
    cenv.update(TMPDIR=str(box / "tmp"), TORCHINDUCTOR_COMPILE_THREADS="1")
    cand = Remote("candidate", workdir=workdir, cwd=box, env=cenv,
                  hello={"role": "candidate", "device": job["device"], "cwd": str(box),
                         "confine": bool(job["sandbox"].get("confine", True)),
                         "memory_limit_mb": job["evaluator"].get("memory_limit_mb"),
                         "writable": job["sandbox"]["writable"]})
    return ref, cand


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    set_undumpable()
    channel = WorkerEnd()  # reads the token and closes stdin
    job = json.loads(Path(argv[0]).read_text())
    ref, cand = start_harnesses(job)
    from kernelpro.evaluate.harness import one_line  # torch: while the harnesses start
    from kernelpro.evaluate.judge import Fail, Judge
    from kernelpro.records import CompileResult, EvalResult, Verdict, to_json

    judge = Judge(job, ref, cand)
    try:
        result = judge.run()
    except Fail as f:
        result = EvalResult(
            verdict=f.verdict, reason=f.reason,
            compile=f.extra.get("compile") or (CompileResult(ok=False, log=f.extra.get("log", ""))
                                               if f.verdict is Verdict.COMPILE_ERROR else None),
            correctness=f.extra.get("correctness"), flags=tuple(judge.flags), device=job["device"],
            gpu_name=judge.gpu_name)
    except BaseException as exc:  # a fault of the judge itself: said as such, never blamed on the candidate
        import traceback

        traceback.print_exc()  # into the evaluation directory's judge.log
        result = EvalResult(verdict=Verdict.CRASH, reason=f"the evaluator failed: {one_line(exc)}",
                            flags=tuple(judge.flags), device=job["device"])
    channel.send(json.dumps(to_json(result)))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
