"""What the reference does besides returning tensors, and what a candidate may do in turn:
random numbers in its forward, writes into its inputs, a Python number among its outputs,
training-mode modules (docs/evaluation.md, "Correctness")."""

from __future__ import annotations

import pytest

from evaluate_paths import honest, problem, wrong
from kernelpro.records import Verdict

pytestmark = pytest.mark.slow  # evaluations on a 2-core CPU (tests/README.md)


def test_a_reference_that_draws_random_numbers_is_the_problem_s_error(run_eval):
    # the float64 second opinion draws other numbers: before this check anything passed it
    result = run_eval(honest("noise_in_forward"), problem("noise_in_forward"))
    assert result.verdict is Verdict.PROBLEM_ERROR, (result.verdict, result.reason)
    assert "not deterministic" in result.reason


@pytest.mark.parametrize("candidate", ["scale_in_place", "scale_in_place_pure"])
def test_a_reference_that_writes_its_input_lets_the_candidate_do_so_or_not(run_eval, candidate):
    # the same in-place code was an integrity violation (output sharing memory with an input)
    result = run_eval(honest(candidate), problem("scale_in_place"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    assert any(f.startswith("reference_writes_inputs") for f in result.flags), result.flags


@pytest.mark.parametrize("candidate, prob", [
    # the right result, the input overwritten with what neither the reference nor a pure version leaves
    ("scale_in_place_scribbles", "scale_in_place"),
    # None without the write, for a reference whose result is its input's new values: this
    # passed before (the output, None, was all that was compared)
    ("does_nothing", "shift_in_place_only"),
])
def test_inputs_left_otherwise_than_the_reference_leaves_them_are_wrong(run_eval, candidate, prob):
    result = run_eval(wrong(candidate), problem(prob))
    assert result.verdict is Verdict.INCORRECT, (result.verdict, result.reason)
    assert "inputs after the call differ" in result.reason


def test_a_reference_whose_result_is_its_input_s_new_values(run_eval):
    result = run_eval(honest("shift_in_place_only"), problem("shift_in_place_only"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)


def test_a_model_with_training_mode_modules_is_judged_in_eval_mode_and_says_so(run_eval):
    result = run_eval(honest("linear_dropout"), problem("linear_dropout"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    assert any(f.startswith("eval_mode:") and "Dropout" in f for f in result.flags), result.flags
    # a forward that reads self.training itself, with no such module
    result = run_eval(honest("training_flag"), problem("training_flag"))
    assert result.verdict is Verdict.CORRECT, (result.verdict, result.reason)
    assert any(f.startswith("eval_mode:") and "reads self.training" in f for f in result.flags), result.flags
    # a model that computes the same in both modes carries no such flag
    result = run_eval(honest("scale_in_place_pure"), problem("scale_in_place"))
    assert not any(f.startswith("eval_mode") for f in result.flags), result.flags
