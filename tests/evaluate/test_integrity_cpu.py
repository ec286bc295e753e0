"""Every integrity check that can run on a CPU, each against a candidate written to cheat it,
and the honest candidates of the shipped example that must pass the same checks."""

from __future__ import annotations

import pytest

from conftest import cheater, honest, problem
from kernelpro.records import Verdict

INTEGRITY = Verdict.INTEGRITY


@pytest.mark.parametrize("name, verdict, reason", [
    ("modifies_inputs", INTEGRITY, "modified its inputs"),
    ("aliases_input", INTEGRITY, "shares memory with an input"),
    ("caches_by_address", INTEGRITY, "timed call"),
    ("caches_by_count", INTEGRITY, "timed call"),
    ("tensor_subclass", INTEGRITY, "plain torch.Tensor"),
    ("lazy_object", INTEGRITY, "plain torch.Tensor"),
    ("patches_perf_counter", INTEGRITY, "time.perf_counter"),
    ("patches_evaluator_globals", INTEGRITY, "kernelpro.evaluate.timing._perf_counter"),
    ("slows_reference", INTEGRITY, "torch.nn.functional.gelu"),
    ("inspects_frames", INTEGRITY, "stack frames"),
    ("thread_work", INTEGRITY, "threads"),
    ("executor_work", INTEGRITY, "threads"),
    ("forges_result_pipe", INTEGRITY, "not signed"),
    ("alters_reference", INTEGRITY, "reference model no longer produces its own outputs"),
    ("wrong_dtype", Verdict.INCORRECT, "dtype"),
    ("relu_shortcut", Verdict.INCORRECT, "N(0,1) trial"),
])
def test_cheater_is_caught(run_eval, gelu_problem, name, verdict, reason):
    result = run_eval(cheater(name), gelu_problem)
    assert result.verdict is verdict, (result.verdict, result.reason)
    assert reason in result.reason


def test_forged_result_file_is_ignored(run_eval, gelu_problem):
    # the candidate writes result.json claiming 1000x and exits: the file is never read
    result = run_eval(cheater("forges_result_file"), gelu_problem)
    assert result.verdict is Verdict.EXITED
    assert result.timing is None


def test_content_memoization_never_hits(run_eval, gelu_problem, session_dir):
    # every timed call sees values no call saw before, so a memo keyed by content never hits
    result = run_eval(cheater("memoizes_content"), gelu_problem)
    assert result.verdict is Verdict.CORRECT, result.reason
    assert not list(session_dir.glob("eval*_memoizes_content/memo_hits.txt"))


def test_stale_memory_is_never_correct(run_eval, gelu_problem):
    result = run_eval(cheater("stale_memory"), gelu_problem)
    assert result.verdict is not Verdict.CORRECT


def test_constant_output_on_degenerate_problem(run_eval):
    result = run_eval(cheater("constant_zeros"), problem("tiny_output"))
    assert result.verdict is INTEGRITY and "constant" in result.reason
    assert any(f.startswith("degenerate_reference") for f in result.flags)


def test_degenerate_problem_is_flagged_for_honest_candidate(run_eval):
    result = run_eval(honest("tiny_output"), problem("tiny_output"))
    assert result.verdict is Verdict.CORRECT
    assert any("all-zeros output passes" in f for f in result.flags)


@pytest.mark.parametrize("name", ["same_ops", "manual_erf_gelu", "reused_output_buffer"])
def test_honest_candidates_pass(run_eval, gelu_problem, name):
    result = run_eval(honest(name), gelu_problem)
    assert result.verdict is Verdict.CORRECT, result.reason
    assert result.correctness.trials == 3  # 2 trials + the N(0, 1) trial
    assert result.timing.n > 0 and result.baseline.n > 0
    notes = result.measurements["evaluator"]
    assert notes["rechecked_calls"] >= 1
    # where the worker's time went: every stage it passed through, none longer than the job
    stages = {k[len("stage_"):-2]: v for k, v in notes.items() if k.startswith("stage_")}
    assert {"reference", "poison", "guards", "compile", "build", "correctness", "timing", "verify"} <= set(stages), \
        stages
    assert all(v >= 0 for v in stages.values()) and sum(stages.values()) <= result.wall_s + 1e-6
    assert stages["timing"] > 0
    # (no "suspicious" check: on this CPU build F.gelu costs ~20 ms for 512 values, so an erf
    # formulation is honestly hundreds of times faster)
    assert not any(f.startswith(("degenerate", "physically")) for f in result.flags)


def test_problem_tolerances(run_eval):
    # exp in float16 is ~1e-3 off: passes the problem's declared 1e-2, would fail the default 1e-4
    result = run_eval(honest("half_exp"), problem("loose_tolerance"))
    assert result.verdict is Verdict.CORRECT, result.reason
    assert any(f.startswith("problem_tolerances") for f in result.flags)


def test_suspicious_speedup_is_reverified_and_flagged(run_eval, gelu_problem):
    result = run_eval(honest("same_ops"), gelu_problem, max_speedup=0.01, reverify_trials=3)
    assert result.verdict is Verdict.CORRECT
    assert any(f.startswith("suspicious_speedup") and "re-verified with 3" in f for f in result.flags)


def test_policy_no_torch_compute(run_eval, gelu_problem):
    result = run_eval(cheater("torch_ops_only"), gelu_problem, call_policy="no_torch_compute")
    assert result.verdict is Verdict.POLICY
    assert "gelu" in result.reason


def test_policy_own_kernel_on_cpu_rejects_torch_ops(run_eval, gelu_problem):
    result = run_eval(cheater("torch_ops_only"), gelu_problem, call_policy="own_kernel")
    assert result.verdict is Verdict.POLICY
    assert any(f.startswith("own_kernel_unverified_on_cpu") for f in result.flags)


def test_exact_candidate_fails_the_inaccurate_reference_without_the_fp64_second_opinion(run_eval):
    """The premise: the sequential fp32 reference is farther from the exact sums than the
    tolerance, so a candidate closer to them fails the plain check."""
    result = run_eval(honest("exact_sum"), problem("sequential_sum"), fp64_second_opinion=False)
    assert result.verdict is Verdict.INCORRECT and "outside atol" in result.reason, result.reason


@pytest.mark.parametrize("copies", [{}, {"recheck_copies": "sampled"}])
def test_exact_candidate_passes_against_the_fp64_reference(run_eval, copies):
    # sampled: the timed calls' re-checks too are judged by the float64 reference at the
    # sampled positions
    result = run_eval(honest("exact_sum"), problem("sequential_sum"), **copies)
    assert result.verdict is Verdict.CORRECT, result.reason
    (flag,) = [f for f in result.flags if f.startswith("fp64_second_opinion:")]
    assert "passed against the reference in float64" in flag


def test_less_accurate_candidate_still_fails_against_the_fp64_reference(run_eval):
    result = run_eval(cheater("half_precision_sum"), problem("sequential_sum"))
    assert result.verdict is Verdict.INCORRECT, result.reason
    assert "against fp64" in result.reason and "farther from the fp64 reference" in result.reason


@pytest.mark.parametrize("name", ["caches_by_address", "caches_by_count"])
def test_sampled_rechecks_catch_cached_outputs(run_eval, gelu_problem, name):
    # the re-checked calls' outputs kept as 4 positions each (of 512): a cached output is
    # wrong at every position, so any sample shows it
    result = run_eval(cheater(name), gelu_problem, recheck_copies="sampled", recheck_sample_elements=4)
    assert result.verdict is INTEGRITY, (result.verdict, result.reason)
    assert "timed call" in result.reason


def test_sampled_rechecks_pass_an_honest_candidate(run_eval, gelu_problem):
    result = run_eval(honest("same_ops"), gelu_problem, recheck_copies="sampled", recheck_sample_elements=4)
    assert result.verdict is Verdict.CORRECT, result.reason
    notes = result.measurements["evaluator"]
    assert notes["recheck_sampled_elements"] == 4 and notes["rechecked_calls"] >= 1
    assert notes["recheck_copies_on_device"] == 0
