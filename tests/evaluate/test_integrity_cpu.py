"""Every integrity check that can run on a CPU, each against a candidate written to cheat it,
and the honest candidates of the shipped example that must pass the same checks."""

from __future__ import annotations

import pytest

from evaluate_paths import REPO, cheater, honest, problem, small_copy
from kernelpro.records import Verdict

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

INTEGRITY = Verdict.INTEGRITY


@pytest.mark.parametrize("name, verdict, reason", [
    ("modifies_inputs", INTEGRITY, "modified its inputs"),
    ("aliases_input", INTEGRITY, "shares memory with an input"),
    # the candidate's inputs live at one address, refilled for every call: caught at trial 1
    ("caches_by_address", Verdict.INCORRECT, "trial 1"),
    ("caches_by_count", INTEGRITY, "timed call"),
    ("tensor_subclass", INTEGRITY, "plain torch.Tensor"),
    ("lazy_object", INTEGRITY, "plain torch.Tensor"),
    ("inspects_frames", INTEGRITY, "stack frames"),
    ("thread_work", INTEGRITY, "threads"),
    ("executor_work", INTEGRITY, "threads"),
    ("forges_result_pipe", INTEGRITY, "broke the evaluation protocol"),
    ("wrong_dtype", Verdict.INCORRECT, "dtype"),
    ("relu_shortcut", Verdict.INCORRECT, "N(0,1) trial"),
    # the comparison runs in the judge: patching the candidate's own copy of it changes nothing
    ("patches_comparison", Verdict.INCORRECT, "trial 0"),
    ("lingering_process", INTEGRITY, "left processes running"),
    # its first thread gone, the helper reads as a zombie while its other thread runs
    ("zombie_leader", INTEGRITY, "left processes running"),
])
def test_cheater_is_caught(run_eval, gelu_problem, name, verdict, reason):
    result = run_eval(cheater(name), gelu_problem)
    assert result.verdict is verdict, (result.verdict, result.reason)
    assert reason in result.reason


@pytest.mark.parametrize("name", ["rebinds_timer_method", "patches_perf_counter"])
def test_rewritten_timer_is_caught_by_the_judge_s_clock(run_eval, gelu_problem_large, name):
    # the candidate's process reports 20x / 1000x shorter calls than they took; the judge's
    # wall clock around each call, less the protocol's overhead measured on the reference, cannot
    # contain them
    # timeout_s: the whole evaluation's budget, which a loaded 2-core machine can use up
    # before the verdict (seen once at the fast configuration's 60 s)
    result = run_eval(cheater(name), gelu_problem_large, rep_ms=100, min_reps=40, max_reps=60, timeout_s=240)
    assert result.verdict is INTEGRITY, (result.verdict, result.reason)
    assert "judge's clock" in result.reason and "again on" in result.reason
    # the verdict keeps the numbers it rests on: both confirming looks
    notes = result.measurements["evaluator"]
    assert notes["envelope_confirm_z"] >= 3.4 and notes["envelope_reconfirm_z"] >= 3.4, notes


@pytest.mark.parametrize("name", ["slows_reference", "slows_problem_model", "alters_reference"])
def test_reaching_for_the_reference_changes_nothing(run_eval, gelu_problem_large, name):
    # patching F.gelu, the problem module's Model.forward, or the reference model (found through
    # the garbage collector) happens in the candidate's own process: the reference runs elsewhere
    # enough calls that a loaded machine's stalls do not decide the medians (5 calls each gave
    # 2.6x for the same work once, with four test runs sharing two cores)
    result = run_eval(cheater(name), gelu_problem_large, rep_ms=100, min_reps=20, max_reps=40, timeout_s=240)
    assert result.verdict is Verdict.CORRECT, result.reason
    # the same work as the reference: no real speedup. Each cheat adds a 20 ms sleep to every
    # reference call, 10x or more on this 2-ms problem, so it shows in the fastest calls too,
    # which a loaded machine's stalls do not reach (the CI's 2 cores once doubled the
    # reference's median, 1.8 -> 3.7 ms, with its fastest call still 1.8 ms: 2.17x by medians)
    fastest = result.baseline.min_ms / result.timing.min_ms
    assert fastest < 2.0, (fastest, result.timing, result.baseline)
    assert result.speedup < 5.0, (result.speedup, result.timing, result.baseline)


def test_a_thread_left_working_is_seen_from_outside(run_eval, gelu_problem_large):
    # the candidate disables the harness's own thread check; the judge still sees its process
    # using CPU between calls, through /proc
    result = run_eval(cheater("lingering_thread"), gelu_problem_large)
    assert result.verdict is INTEGRITY, (result.verdict, result.reason)
    assert "kept working between calls" in result.reason
    assert "again on calls alternating" in result.reason  # the second look saw it too
    assert "its busiest threads then: python " in result.reason  # its thread (Python's carry the interpreter's name)
    # and over a pause with no call: its thread works on its own
    assert "with no call for 1.0 s it used" in result.reason
    # each call leaves a thread with 0.3 s of work, so the pause sees at most about 30 % of a core;
    # the CI's loaded 2 cores gave the thread 18 % once (the 20 % this asserted then failed it):
    # what matters is that the thread worked with no call, not how much CPU it was given
    assert result.measurements["evaluator"]["candidate_quiet_cpu_share"] > 0.03


def test_work_between_calls_that_stops_when_watched_is_charged(run_eval, gelu_problem_large):
    # the first look sees CPU between calls, the second (calls alternating with the reference's)
    # does not: the machine's noise or a candidate that stopped in time; either way its timed
    # calls carry the CPU it used between them. Load-sensitive: on a machine with 7 runnable
    # processes per 2 cores its thread got too little CPU to be seen (before this session's
    # changes too); on a quiet one it was charged 209-216 ms, stopped during the reference's
    # calls or not (evaluator_boundary.md)
    result = run_eval(cheater("lingering_then_idle"), gelu_problem_large, rep_ms=1000, min_reps=20, max_reps=20)
    notes = result.measurements["evaluator"]
    assert result.verdict is Verdict.CORRECT, result.reason
    assert any(f.startswith("idle_cpu_charged") for f in result.flags), result.flags
    assert result.timing.method.endswith("+idle_cpu_charge")
    assert notes["idle_cpu_charged_ms"] > 0.5  # a 20 ms thread after most calls of the first look
    assert result.timing.min_ms >= notes["idle_cpu_charged_ms"]


@pytest.mark.parametrize("guard", ["auto", "detect"])
def test_files_outside_the_candidate_s_directory(run_eval, session_dir, guard):
    from kernelpro.evaluate.sandbox import landlock_abi

    where = session_dir / f"files_{guard}"
    where.mkdir()
    prob = small_copy(REPO / "examples" / "fused_bias_gelu.py", where / "problem.py", {"ROWS": 16, "COLS": 32})
    (where / "victim.txt").write_text("keep me\n")
    result = run_eval(cheater("writes_files"), prob, write_guard=guard)
    if guard == "auto" and landlock_abi() > 0:
        # prevented: the writes failed inside the candidate's process
        assert result.verdict is Verdict.CORRECT, result.reason
        assert (where / "victim.txt").read_text() == "keep me\n"
        assert not (where / "planted.txt").exists()
        assert result.measurements["evaluator"]["sandbox_landlock"] == 1.0
    else:
        # detected: the candidate is rejected
        assert result.verdict is INTEGRITY, result.reason
        assert "changed files outside its directory" in result.reason and "victim.txt (deleted)" in result.reason


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


def test_a_number_before_a_tensor_in_the_output(run_eval):
    # each tensor output has its buffer in the judge; a number before it takes none
    result = run_eval(honest("count_then_tensor"), problem("count_then_tensor"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)


def test_numbers_computed_from_the_values_are_checked_when_re_checked(run_eval):
    # the timed calls' inputs are scaled: their numbers differ from the correctness trials'
    # (an honest candidate was called a cheater for it); they are compared on the re-checks
    result = run_eval(honest("value_numbers"), problem("value_numbers"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    result = run_eval(cheater("caches_numbers"), problem("value_numbers"))
    assert result.verdict is INTEGRITY, (result.verdict, result.reason)
    assert "re-check" in result.reason or "returned a wrong output" in result.reason, result.reason


def test_an_exact_candidate_of_a_boolean_or_numeric_output_is_correct(run_eval):
    # the red-team pass of session 17: a float64 product before a sign was an integrity
    # violation for one of 2 million booleans decided otherwise than the fp32 reference; a
    # sum of squares in float64 rounded to float32 at the end was incorrect by one ulp
    result = run_eval(honest("sign_fp64"), problem("linear_sign"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    result = run_eval(honest("value_numbers_fp64"), problem("value_numbers"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    # fewer bits decide many more positions otherwise: not correct
    result = run_eval(cheater("sign_of_half"), problem("linear_sign"))
    assert result.verdict in (Verdict.INCORRECT, INTEGRITY), (result.verdict, result.reason)


def test_a_constant_output_is_right_where_the_function_is_constant(run_eval):
    # the reference in float64 is the same on every trial: the fp32 reference varies by
    # rounding alone, and the exact constant is the answer, not a cheat (a constant where
    # the float64 reference varies is still one: problems/tiny_output.py, above)
    result = run_eval(honest("softmax_row_sums_ones"), problem("softmax_row_sums"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    assert any(f.startswith("constant_function") for f in result.flags), result.flags


def test_outputs_kept_and_corrected_along_the_timed_scale_are_caught_on_fresh_sets(run_eval):
    # the re-checks all pass (each timed call's values are a seen set times a factor it reads
    # back); calls on sets drawn after timing, from seeds it cannot know, show its real speed
    result = run_eval(cheater("scale_taylor_cache"), problem("linear_gelu"))
    assert result.verdict is INTEGRITY, (result.verdict, result.reason)
    assert "fast only on values it has seen" in result.reason


def test_honest_candidate_is_as_fast_on_fresh_sets(run_eval):
    result = run_eval(honest("linear_gelu"), problem("linear_gelu"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    notes = result.measurements["evaluator"]
    assert notes["fresh_input_factor"] > 0  # the look ran
    assert not any(f.startswith("fresh_inputs_charged") for f in result.flags), result.flags


# reference outputs the judge does not keep (here: none fits a share of 1e-12) are computed
# again at correctness; the verdicts stay what they are when all are kept
@pytest.mark.parametrize("candidate,prob,verdict,words", [
    (honest("same_ops"), None, Verdict.CORRECT, ""),
    (cheater("relu_shortcut"), None, Verdict.INCORRECT, "N(0,1) trial"),
    (cheater("constant_zeros"), problem("tiny_output"), INTEGRITY, "constant"),
    (cheater("stale_memory"), None, None, ""),
])
def test_outputs_not_kept_are_computed_again(run_eval, gelu_problem, candidate, prob, verdict, words):
    result = run_eval(candidate, prob or gelu_problem, device_copy_share=1e-12)
    if verdict is None:
        assert result.verdict is not Verdict.CORRECT, result.reason
    else:
        assert result.verdict is verdict and words in result.reason, (result.verdict, result.reason)
    notes = result.measurements["evaluator"] if result.measurements else {}
    if verdict is Verdict.CORRECT:
        assert notes["reference_outputs_kept"] == 0 and notes["reference_outputs_recomputed"] == 3, notes
        assert notes["ref_recompute_s"] > 0
    if prob is not None:
        assert any(f.startswith("degenerate_reference") for f in result.flags)


def test_outputs_kept_by_default(run_eval, gelu_problem):
    notes = run_eval(honest("same_ops"), gelu_problem).measurements["evaluator"]
    assert notes["reference_outputs_kept"] == 3 and "reference_outputs_recomputed" not in notes, notes


@pytest.mark.parametrize("name", ["same_ops", "manual_erf_gelu", "reused_output_buffer"])
def test_honest_candidates_pass(run_eval, gelu_problem, name):
    result = run_eval(honest(name), gelu_problem)
    assert result.verdict is Verdict.CORRECT, result.reason
    assert result.correctness.trials == 3  # 2 trials + the N(0, 1) trial
    assert result.timing.n > 0 and result.baseline.n > 0
    notes = result.measurements["evaluator"]
    assert notes["rechecked_calls"] >= 1
    # where the evaluation's time went: every stage it passed through, none longer than the job
    stages = {k[len("stage_"):-2]: v for k, v in notes.items() if k.startswith("stage_")}
    assert {"reference", "reference_outputs", "compile", "build", "correctness", "timing", "verify"} <= set(stages), \
        stages
    assert all(v >= 0 for v in stages.values()) and sum(stages.values()) <= result.wall_s + 1e-6
    assert stages["timing"] > 0
    # the reference-outputs stage split into its parts, which together fit inside it
    parts = {k: v for k, v in notes.items() if k.startswith("ref_outputs_")}
    assert {f"ref_outputs_{p}_s" for p in ("draw", "lend", "fill", "call", "export", "read_back", "keep", "watch")} \
        == set(parts), parts
    assert all(v >= 0 for v in parts.values()) and parts["ref_outputs_call_s"] > 0
    assert sum(parts.values()) <= stages["reference_outputs"] + 1e-6
    # and the timing stage's: every part, the round trips the largest, together inside it
    timed = {k: v for k, v in notes.items() if k.startswith("timing_") and k.endswith("_s")}
    assert {f"timing_{p}_s" for p in ("prepare", "pause", "call", "after", "between", "setup", "summaries")} \
        == set(timed), timed
    assert all(v >= -1e-6 for v in timed.values()) and timed["timing_call_s"] > 0
    assert sum(timed.values()) <= stages["timing"] + 1e-6
    assert notes["timing_timed_calls"] == result.timing.n + result.baseline.n
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
    # the new-input-set look takes the errors the trials' float64 opinion admitted for what
    # they are, without running the reference in float64 on every set
    notes = result.measurements["evaluator"]
    assert notes["fresh_input_admitted_checks"] >= 1
    assert notes["fresh_input_admitted_checks"] + notes["fresh_input_fp64_checks"] == notes["fresh_input_sets"]


def test_less_accurate_candidate_still_fails_against_the_fp64_reference(run_eval):
    result = run_eval(cheater("half_precision_sum"), problem("sequential_sum"))
    assert result.verdict is Verdict.INCORRECT, result.reason
    assert "against fp64" in result.reason and "farther from the fp64 reference" in result.reason


@pytest.mark.parametrize("name", ["caches_by_count"])
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


def test_an_expanded_output_pays_for_the_elements_it_stands_for(run_eval):
    """Returned as a stride-0 expand, a wide output of equal values was 2-3x faster than the
    reference that writes every element: the writing happened in the export copy, untimed
    (measured on the CPU: 2.6-2.9x before, 1.06-1.27x after)."""
    result = run_eval(cheater("expanded_output"), problem("row_sums_repeated"), rep_ms=40, min_reps=10)
    assert result.verdict is Verdict.CORRECT, result.reason
    # by the fastest calls, which a loaded machine's stalls do not reach (they doubled a
    # reference's median on the CI's 2 cores once); the untimed copy sped up every call
    fastest = result.baseline.min_ms / result.timing.min_ms
    assert fastest < 1.8, (fastest, result.speedup, result.timing, result.baseline)


def test_renicing_the_reference_is_denied_or_caught(run_eval, gelu_problem):
    """Confined, the candidate can no longer write another process's /proc entries (its
    autogroup's nice value among them); unconfined (write_guard detect), the judge's check of
    the reference's scheduling catches the change."""
    confined = run_eval(cheater("renices_reference"), gelu_problem)
    if confined.measurements and confined.measurements["evaluator"].get("sandbox_landlock") == 1.0:
        assert confined.verdict is Verdict.CORRECT, (confined.verdict, confined.reason)
    detected = run_eval(cheater("renices_reference"), gelu_problem, write_guard="detect")
    assert detected.verdict is INTEGRITY and "rescheduled" in detected.reason, (detected.verdict, detected.reason)
