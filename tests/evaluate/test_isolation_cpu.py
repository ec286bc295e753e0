"""Isolation: every way a candidate can end gets its own verdict, and nothing is left behind."""

from __future__ import annotations

import time

import pytest

from evaluate_paths import honest, isolation, problem, small_copy
from kernelpro.records import Verdict

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)


@pytest.mark.parametrize("name, verdict, reason", [
    ("segfault", Verdict.CRASH, "SIGSEGV"),
    ("abort", Verdict.CRASH, "SIGABRT"),
    ("exits", Verdict.EXITED, "status 3"),
    ("raises", Verdict.RUNTIME_ERROR, "ValueError: shapes do not line up"),
])
def test_verdicts(run_eval, gelu_problem, name, verdict, reason):
    result = run_eval(isolation(name), gelu_problem)
    assert result.verdict is verdict, (result.verdict, result.reason)
    assert reason in result.reason


def test_host_oom_under_memory_limit(run_eval, gelu_problem):
    result = run_eval(isolation("host_oom"), gelu_problem, memory_limit_mb=6000)
    assert result.verdict is Verdict.OOM, (result.verdict, result.reason)


def test_out_of_memory_is_tried_once_more_after_the_judge_makes_room(run_eval, gelu_problem):
    # a first call out of memory is retried once with the judge's optional copies shed; a
    # model that runs out every time keeps the verdict (test_host_oom_under_memory_limit)
    result = run_eval(honest("out_of_memory_once"), gelu_problem)
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    notes = result.measurements["evaluator"]
    assert notes["trial_retried_after_oom"] == 0.0, notes
    assert "copies_shed_bytes" in notes, notes


def test_a_timed_call_out_of_memory_is_made_again_after_the_judge_makes_room(run_eval, gelu_problem, session_dir):
    # one call among the timed ones (the 12th) out of memory: once, the judge sheds its copies
    # and makes that call again; the failed call is no sample
    cand = small_copy(honest("out_of_memory_once"), session_dir / "out_of_memory_while_timed.py", {"OOM_AT_CALL": 12})
    result = run_eval(cand, gelu_problem)
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    notes = result.measurements["evaluator"]
    assert "timed_call_retried_after_oom" in notes and "trial_retried_after_oom" not in notes, notes
    assert "copies_shed_bytes" in notes, notes


def test_a_reference_out_of_memory_while_timed_is_the_evaluation_s_not_the_problem_s(run_eval):
    # tried again once after the judge's copies are shed; out of memory again, the verdict is
    # oom with what the judge held, not a problem error (its baseline job ran)
    result = run_eval(honest("same_ops"), problem("reference_out_of_memory_while_timed"))
    assert result.verdict is Verdict.OOM, (result.verdict, result.reason)
    assert result.reason.startswith("the reference ran out of memory in the evaluation (timed call after the "
                                    "judge's copies were shed"), result.reason
    assert "timed_call_retried_after_oom" in result.measurements["evaluator"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


def test_hang_is_a_timeout_and_leaves_no_process(run_eval, gelu_problem, session_dir):
    # the candidate starts two sleeping processes at import, then hangs in forward
    t0 = time.monotonic()
    # 25 s: on a loaded 2-core machine starting the three processes alone took over 10 s
    result = run_eval(isolation("orphans"), gelu_problem, timeout_s=25)
    assert result.verdict is Verdict.TIMEOUT and "stage: correctness" in result.reason, result.reason
    assert time.monotonic() - t0 < 60
    pidfiles = sorted(session_dir.glob("eval*_orphans/sandbox/pids.txt"))
    assert pidfiles, "the candidate did not record its children"
    child, daemon = (int(x) for x in pidfiles[-1].read_text().split())
    assert daemon > 0
    time.sleep(0.5)
    assert not _alive(child), "a child in the candidate's process group survived"
    assert not _alive(daemon), "a setsid() daemon survived"
