"""Each way a candidate can end gets its own verdict, and none ends the caller."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from kernelpro.config import EvaluatorConfig
from kernelpro.evaluate.runner import evaluate
from kernelpro.records import Verdict

from helpers import DATA

FAST = EvaluatorConfig(trials=2, warmup_ms=2, rep_ms=10, min_reps=3, rounds=1, timeout_s=60)


def _eval(tmp_path: Path, name: str, config: EvaluatorConfig = FAST):
    return evaluate(DATA / "tiny_problem.py", DATA / name, device="cpu", config=config,
                    workdir=tmp_path / name)


@pytest.mark.parametrize("name,verdict,reason", [
    ("good.py", Verdict.CORRECT, ""),
    ("wrong.py", Verdict.INCORRECT, "outside atol"),
    ("raises.py", Verdict.RUNTIME_ERROR, "deliberate failure in forward"),
    ("segfault.py", Verdict.CRASH, "SIGSEGV"),
    ("aborts.py", Verdict.CRASH, "SIGABRT"),
    ("exits.py", Verdict.EXITED, "without a result"),
    ("no_modelnew.py", Verdict.INVALID, "no ModelNew"),
])
@pytest.mark.slow
def test_verdicts(tmp_path, name, verdict, reason):
    res = _eval(tmp_path, name)
    assert res.verdict is verdict, (res.reason, res.flags)
    assert reason in res.reason


@pytest.mark.slow
def test_hang_times_out(tmp_path):
    # 25 s: under load, starting the processes alone took over 8 s ("stage: start")
    res = _eval(tmp_path, "hangs.py", attrs.evolve(FAST, timeout_s=25))
    assert res.verdict is Verdict.TIMEOUT
    assert "stage: correctness" in res.reason, res.reason


@pytest.mark.slow
def test_compile_error_is_trimmed(tmp_path):
    res = _eval(tmp_path, "bad_cpp.py", attrs.evolve(FAST, timeout_s=240))
    assert res.verdict is Verdict.COMPILE_ERROR, res.reason
    assert res.compile is not None and not res.compile.ok
    assert "error" in res.compile.log.lower()
    assert len(res.compile.log.splitlines()) <= 40


def test_correct_result_carries_timing_and_correctness(tmp_path):
    res = _eval(tmp_path, "good.py")
    assert res.correct, (res.verdict, res.reason, res.flags)
    assert res.correctness.trials == 3  # 2 trials + the N(0,1) trial
    assert res.timing.n >= 3 and res.baseline.n >= 3
    assert res.timing.method == "perf_counter"
    assert res.speedup == pytest.approx(res.baseline.median_ms / res.timing.median_ms)


@pytest.mark.slow
def test_torch_compile_candidate_is_honest(tmp_path):
    """The built-in generator's output passes every integrity check (torch.compile patches
    nn.Module methods on first use; that must not look like tampering)."""
    from kernelpro.generate.torch_compile import TorchCompileSettings, render

    cand = tmp_path / "tc.py"
    cand.write_text(render((DATA / "tiny_problem.py").read_text(), {"mode": None, "options": {}},
                           TorchCompileSettings()))
    res = evaluate(DATA / "tiny_problem.py", cand, device="cpu", config=attrs.evolve(FAST, timeout_s=240),
                   workdir=tmp_path / "w")
    assert res.verdict is Verdict.CORRECT, res.reason


@pytest.mark.slow
def test_a_candidate_that_sleeps_is_stopped_at_the_call_limit_not_the_whole_timeout(tmp_path):
    """A first call may compile for minutes (first_call_timeout_s), but one that sits idle is
    stopped once it has done nothing for the call limit (50 x the reference's call, at least
    call_timeout_floor_s): seconds, not the 600 s of the whole evaluation's backstop."""
    import time

    cfg = attrs.evolve(FAST, timeout_s=600, first_call_timeout_s=300, call_timeout_floor_s=5)
    t0 = time.monotonic()
    res = _eval(tmp_path, "hangs.py", cfg)
    assert res.verdict is Verdict.TIMEOUT, res.reason
    assert "no work done, for 5 s" in res.reason and "stage: correctness" in res.reason, res.reason
    assert time.monotonic() - t0 < 60
