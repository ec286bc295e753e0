"""Judges started ahead of their job (``evaluator.prestart``): the next evaluation takes the
one waiting, its harnesses are told the job's directories and variables with their hello,
every integrity check still holds through it, and no process outlives its use."""

from __future__ import annotations

import os
import time
from pathlib import Path

import attrs
import pytest

from evaluate_paths import REPO, cheater, honest, small_copy
from kernelpro.evaluate import procwatch, runner
from kernelpro.records import Verdict

pytestmark = pytest.mark.slow  # evaluations on a 2-core CPU (tests/README.md)


def _ours() -> list[int]:
    """Live processes below this one that belong to an evaluation (reapers included)."""
    return [p for p in procwatch.descendants(os.getpid())
            if "kernelpro.evaluate." in procwatch.command(p)]


def _wait_none_left(timeout_s: float = 30.0) -> list[int]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        left = _ours()
        if not left:
            return []
        time.sleep(0.2)
    return _ours()


@pytest.fixture
def warm(session_dir, fast_config):
    """evaluate(candidate, problem, **overrides) with ``prestart``; no judge is left waiting
    before or after the test."""
    runner.discard_spares()
    counter = [0]

    def run(candidate: Path, problem: Path, ahead: bool = True, **overrides):
        counter[0] += 1
        cfg = attrs.evolve(fast_config, **overrides)
        workdir = session_dir / f"prestart{counter[0]:03d}_{Path(candidate).stem}"
        return runner.evaluate(Path(problem), Path(candidate), device="cpu", config=cfg, workdir=workdir,
                               seed=0, prestart=ahead)

    yield run
    runner.settle()


def _waiting() -> list[runner._JudgeProcess]:
    with runner._SPARES_GUARD:
        return list(runner._SPARES.values())


def test_the_next_evaluation_takes_the_judge_started_ahead(warm, gelu_problem, fast_config):
    first = warm(honest("same_ops"), gelu_problem)
    assert first.verdict is Verdict.CORRECT, first.reason
    waiting = _waiting()
    assert len(waiting) == 1 and waiting[0].alive()
    spare_pid = waiting[0].proc.pid
    # its harnesses started (torch imported) while nothing was asked of them
    end = time.monotonic() + 60
    while len(procwatch.descendants(spare_pid)) < 5 and time.monotonic() < end:  # judge, 2 reapers, 2 harnesses
        time.sleep(0.2)
    assert len(procwatch.descendants(spare_pid)) >= 5
    # the candidate checks at import that its process was set up as its job says
    second = warm(honest("checks_its_environment"), gelu_problem)
    assert second.verdict is Verdict.CORRECT, second.reason
    assert all(j.proc.pid != spare_pid for j in _waiting())  # taken, and another started for the next
    assert len(_waiting()) == 1
    # the logs are in the evaluation's directory, as with a judge started for it
    workdir = next(iter(sorted(Path(fast_config.build_cache_dir).parent.glob("prestart*_checks_its_environment"))))
    assert {"judge.log", "candidate.log", "reference.log", "job.json"} <= {p.name for p in workdir.iterdir()}
    # without prestart nothing is left waiting: the last evaluation of a run does not start one
    runner.discard_spares()
    assert not _wait_none_left()
    third = warm(honest("checks_its_environment"), gelu_problem, ahead=False)
    assert third.verdict is Verdict.CORRECT, third.reason
    assert not _waiting()
    assert not _wait_none_left()
    # and a config that forbids it wins over the caller
    fourth = warm(honest("same_ops"), gelu_problem, ahead=True, prestart=False)
    assert fourth.verdict is Verdict.CORRECT and not _waiting()
    # a judge started during an evaluation on a GPU is not told ``warm`` (no CUDA context
    # while something is timed): it takes its job all the same
    runner.prestart_judge("cpu", runner.judge_env(), warm=False)
    (unwarmed,) = _waiting()
    assert not unwarmed.warmed
    fifth = warm(honest("checks_its_environment"), gelu_problem, ahead=False)
    assert fifth.verdict is Verdict.CORRECT, fifth.reason
    assert unwarmed.workdir is not None and not _waiting()  # it was the one taken


@pytest.mark.parametrize("name, verdict, reason", [
    ("forges_result_pipe", Verdict.INTEGRITY, "broke the evaluation protocol"),
    ("lingering_process", Verdict.INTEGRITY, "left processes running"),
    ("thread_work", Verdict.INTEGRITY, "threads"),
    ("forges_result_file", Verdict.EXITED, ""),
])
def test_cheaters_are_caught_through_a_judge_started_ahead(warm, gelu_problem, name, verdict, reason):
    warm(honest("same_ops"), gelu_problem)  # leaves a judge waiting
    assert _waiting()
    result = warm(cheater(name), gelu_problem)
    assert result.verdict is verdict, (result.verdict, result.reason)
    assert reason in result.reason


def test_files_changed_through_a_judge_started_ahead(warm, session_dir):
    where = session_dir / "prestart_files"
    where.mkdir()
    prob = small_copy(REPO / "examples" / "fused_bias_gelu.py", where / "problem.py", {"ROWS": 16, "COLS": 32})
    (where / "victim.txt").write_text("keep me\n")
    warm(honest("same_ops"), prob, write_guard="detect")
    assert _waiting()
    result = warm(cheater("writes_files"), prob, write_guard="detect")
    assert result.verdict is Verdict.INTEGRITY, result.reason
    assert "victim.txt (deleted)" in result.reason


def test_a_judge_nobody_takes_ends_with_its_harnesses(warm, gelu_problem):
    """Discarded (a run's end, this process's exit) or orphaned (its parent gone: its stdin
    ends), a judge started ahead ends, and its harnesses with it."""
    env = runner.judge_env()
    for how in ("discard", "orphan"):
        runner.prestart_judge("cpu", env)
        (judge,) = _waiting()
        end = time.monotonic() + 60
        while len(procwatch.descendants(judge.proc.pid)) < 5 and time.monotonic() < end:
            time.sleep(0.2)
        if how == "discard":
            runner.discard_spares()
        else:  # what the judge sees when the process that started it dies: its stdin ends
            with runner._SPARES_GUARD:
                runner._SPARES.clear()
            assert judge.job_fd is not None
            os.close(judge.job_fd)
            judge.job_fd = None
            judge.proc.wait(timeout=60)
            judge.finish_ending()
        assert not _wait_none_left(), how


def test_a_judge_started_ahead_of_a_baseline_job(warm, gelu_problem, session_dir, fast_config):
    """A bench's next problem starts with its baseline job: the judge started ahead for it
    is told ``preload`` and then ``warm`` before its job (on a CPU device the reference's
    harness imports nothing then: it would compete with what is timed). It waits for that
    job alone: a candidate's evaluation meanwhile (another problem sharing the GPU) takes an
    ordinary judge; the job and the evaluations after it go as with any judge."""
    runner.prestart_judge("cpu", runner.judge_env(), warm=False, baseline=True)
    (judge,) = _waiting()
    assert judge.preloaded and not judge.warmed  # told at once: CPU work only
    runner.prestart_judge("cpu", runner.judge_env(), baseline=True)  # the evaluation before it ended
    assert judge.warmed and judge.preloaded and _waiting() == [judge]
    runner.prestart_judge("cpu", runner.judge_env())  # the other problem's next candidate's
    (other,) = [j for j in _waiting() if j is not judge]
    assert not other.preloaded
    between = warm(honest("same_ops"), gelu_problem, ahead=False)
    assert between.verdict is Verdict.CORRECT, between.reason
    assert other.workdir is not None and judge.workdir is None  # the ordinary one was taken
    base = runner.evaluate(gelu_problem, None, device="cpu", config=fast_config,
                           workdir=session_dir / "prestart_baseline", seed=0, prestart=True)
    assert base.verdict is Verdict.CORRECT, base.reason
    assert judge.workdir is not None  # it was the one taken
    assert "preloaded" not in (session_dir / "prestart_baseline" / "reference.log").read_text()
    after = warm(honest("same_ops"), gelu_problem)
    assert after.verdict is Verdict.CORRECT, after.reason


def test_preload_imports_the_compiler_stack_without_touching_the_gpu(tmp_path):
    """What the reference's harness does on ``preload`` for a GPU device: imports only; no
    CUDA context (a timing may still run on the device then)."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from kernelpro.evaluate.harness import preload\n"
            "preload({'role': 'candidate', 'device': 'cuda'})\n"
            "assert 'torch._dynamo' not in sys.modules\n"
            "preload({'role': 'reference', 'device': 'cpu'})\n"
            "assert 'torch._dynamo' not in sys.modules\n"
            "preload({'role': 'reference', 'device': 'cuda'})\n"
            "assert 'torch._dynamo' in sys.modules and 'torch._inductor.compile_fx' in sys.modules\n"
            "assert not torch.cuda.is_initialized()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "preloaded torch.compile's stack in" in res.stderr
