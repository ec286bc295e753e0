"""Baselines as users run them: the timed calls and the candidate run under PyTorch's default
flags, the reference's outputs (what correctness is judged against) in strict fp32, and a
candidate may be as far from the exact values as the reference under the default flags is."""

from __future__ import annotations

import json

import pytest
import torch

from kernelpro.bench import _strict, problem_row
from kernelpro.evaluate import compare, guard
from kernelpro.records import Verdict

from evaluate_paths import honest, problem


def test_startup_flags_are_pytorch_s_defaults_and_come_back():
    # cuDNN may use TF32 by default; cuBLAS may not (PyTorch's documented defaults)
    assert guard.STARTUP_FLAGS["cudnn.allow_tf32"] is True
    assert guard.STARTUP_FLAGS["float32_matmul_precision"] == "highest"
    try:
        guard.set_reference_precision()
        assert torch.backends.cudnn.allow_tf32 is False
        guard.set_default_precision()
        assert torch.backends.cudnn.allow_tf32 is True
    finally:
        guard.restore_backend_flags(dict(guard.STARTUP_FLAGS))


def test_strict_and_default_differ_only_on_a_gpu():
    assert guard.strict_differs(cuda=False) is False
    assert guard.strict_differs(cuda=True) is True  # cuDNN's TF32 is on by default


def test_the_candidate_starts_from_the_defaults_and_the_reference_s_outputs_are_strict(run_eval, tmp_path):
    """ModelNew = Model on a problem whose output is 1 higher under the default flags: the
    candidate runs under the defaults, the reference's outputs were computed in strict fp32,
    so the same code is wrong by exactly 1."""
    prob = problem("reads_tf32_flag")
    same = tmp_path / "same_as_the_reference.py"
    same.write_text(prob.read_text().replace("class Model(", "class ModelNew("))
    res = run_eval(same, prob)
    assert res.verdict == Verdict.INCORRECT, res.reason
    assert res.correctness is not None and res.correctness.max_abs_err == pytest.approx(1.0), res.correctness


def test_a_candidate_that_turns_tf32_off_is_correct_and_flagged(run_eval):
    res = run_eval(honest("strict_flags_by_hand"), problem("reads_tf32_flag"))
    assert res.verdict == Verdict.CORRECT, res.reason
    assert any(f.startswith("backend_flags_changed") and "cudnn.allow_tf32" in f for f in res.flags), res.flags


def test_the_second_opinion_allows_the_default_flag_reference_s_error():
    exact = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    strict = exact.float()  # strict fp32: exact here
    as_run = torch.tensor([1.0, 2.0015, 3.0, 4.0])  # TF32-like: 1.5e-3 off at one element
    tol = {"float32": (1e-4, 1e-4)}
    like = torch.tensor([1.0, 2.0, 3.0025, 4.0])  # a candidate as imprecise as that, elsewhere
    assert not compare.compare(like, strict, tol).ok
    assert not compare.compare_to_exact(like, strict, exact, tol, factor=2.0).ok
    assert compare.compare_to_exact(like, strict, exact, tol, factor=2.0, others=[as_run]).ok
    worse = torch.tensor([1.0, 2.0, 3.01, 4.0])  # 1e-2 > 1e-4 + 2 x 1.5e-3
    res = compare.compare_to_exact(worse, strict, exact, tol, factor=2.0, others=[as_run])
    assert not res.ok and "farther from the fp64 reference" in res.message


def test_bench_rows_carry_the_strict_column(tmp_path):
    from kernelpro.bench import SuiteProblem

    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"evaluated": 1, "best_id": None}))
    (run / "baseline.json").write_text(json.dumps({
        "baseline": {"median_ms": 1.0}, "baseline_compiled": {"median_ms": 0.8},
        "baseline_strict": {"median_ms": 2.5}, "baseline_compiled_strict": {"median_ms": 2.0}}))
    row = problem_row(SuiteProblem(level=1, problem_id=1, name="p", source=""), run)
    assert row["eager_strict_ms"] == 2.5 and row["compiled_strict_ms"] == 2.0
    # the headline: the default-flag times (no candidate: the kept reference vs torch.compile)
    assert row["best_ms"] == 1.0 and row["compiled_ms"] == 0.8
    assert "2.5" in _strict(row) and "2" in _strict(row)
    assert _strict({"eager_strict_ms": None, "compiled_strict_ms": None}) == "not timed"


@pytest.mark.gpu
def test_the_baseline_job_times_both_columns_on_a_gpu(tmp_path, fast_config):
    from kernelpro.evaluate.runner import evaluate

    import attrs

    from kernelpro.api import BUILTIN_GPU_SPECS

    cfg = attrs.evolve(fast_config, time_compiled_reference=True)
    res = evaluate(problem("reads_tf32_flag"), None, device="cuda", config=cfg, workdir=tmp_path, seed=0,
                   ceilings=BUILTIN_GPU_SPECS[0])
    assert res.baseline is not None and res.baseline_strict is not None
    assert res.baseline_compiled is not None and res.baseline_compiled_strict is not None
    # the minimum-traffic bound against the ceilings handed in (a datasheet spec here)
    notes = res.measurements["evaluator"]
    assert notes["min_traffic_bound_ms"] > 0 and notes["min_traffic_bound_calibrated"] == 0.0


@pytest.mark.gpu
def test_the_optional_autotune_baseline_is_timed_with_its_compile_seconds(tmp_path, fast_config):
    from kernelpro.evaluate.runner import evaluate

    import attrs

    cfg = attrs.evolve(fast_config, time_compiled_reference=True, compiled_autotune_mode="max-autotune-no-cudagraphs")
    res = evaluate(problem("reads_tf32_flag"), None, device="cuda", config=cfg, workdir=tmp_path, seed=0)
    assert res.baseline_compiled_autotune is not None, res.flags
    assert res.measurements["evaluator"]["compile_autotune_s"] > 0
