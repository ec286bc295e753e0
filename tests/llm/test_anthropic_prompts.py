"""Prompt templates: every template renders from prompt_variables, and StrictUndefined
turns a missing variable into an error instead of an empty string."""

from __future__ import annotations

import jinja2
import pytest
from llm_helpers import CUDA_KERNEL, request_for

from kernelpro.api import ParentInfo
from kernelpro.generate.llm.prompts import TEMPLATES_DIR, environment, prompt_mode, prompt_variables, render
from kernelpro.gpus import SPECS
from kernelpro.records import EvalResult, Verdict

TEMPLATES = ("system.j2", "problem.j2", "first.j2", "refine.j2", "repair.j2", "contract_repair.j2")


def variables(problem, parent=None, gpu=None, **kw):
    return prompt_variables(request_for(problem, parent, gpu=gpu), language=kw.pop("language", "cuda"),
                            language_required=True, contract_error="the answer has no ```python code block", **kw)


def failed_parent():
    return ParentInfo(id="c0002", source=CUDA_KERNEL, result=EvalResult(verdict=Verdict.RUNTIME_ERROR,
                      reason="RuntimeError: CUDA error: an illegal memory access was encountered"), analysis=None)


def test_templates_exist_and_use_one_strict_environment():
    for name in TEMPLATES:
        assert (TEMPLATES_DIR / name).exists()
    env = environment()
    assert env.undefined is jinja2.StrictUndefined
    assert env.trim_blocks and env.lstrip_blocks and env.keep_trailing_newline


def test_missing_variable_fails(problem):
    v = variables(problem)
    del v["memory"]
    with pytest.raises(jinja2.UndefinedError, match="memory"):
        render("first.j2", v)
    v = variables(problem)
    del v["gpu"]
    with pytest.raises(jinja2.UndefinedError, match="gpu"):
        render("system.j2", v)


@pytest.mark.parametrize("gpu", [None, SPECS[0]])
@pytest.mark.parametrize("language", ["cuda", "triton", "cute"])
def test_every_template_renders(problem, gpu, language):
    for parent, task in ((None, "first.j2"), (failed_parent(), "repair.j2")):
        v = variables(problem, parent, gpu, language=language)
        for name in ("system.j2", "problem.j2", task, "contract_repair.j2"):
            text = render(name, v)
            assert text.strip() and "None" not in text, (name, text)


def test_system_prompt_states_target_format_and_integrity_rules(problem):
    text = render("system.j2", variables(problem, gpu=SPECS[0], language="triton"))
    assert "H100 SXM (sm_90), 132 SMs" in text and "DRAM bandwidth: 3350 GB/s" in text
    assert "@triton.jit" in text
    assert "class ModelNew(nn.Module)" in text and "`Change:" in text
    for rule in ("never cache outputs", "Inputs change between calls", "Do not modify the inputs in place",
                 "no side streams", "no tensor subclasses", "Compute the real result"):
        assert rule in text
    assert "# Tools" not in text  # no tools offered


def test_modes(problem):
    assert prompt_mode(None) == "first"
    assert prompt_mode(failed_parent()) == "repair"
    assert prompt_mode(ParentInfo(id="c1", source="", result=None, analysis=None)) == "refine"
    v = variables(problem, failed_parent())
    text = render("repair.j2", v)
    assert "Verdict: runtime_error" in text and "illegal memory access" in text


def test_contract_repair_quotes_the_error(problem):
    text = render("contract_repair.j2", variables(problem))
    assert text.startswith("Your answer could not be used: the answer has no ```python code block.")
    assert "with the computation in cuda kernels" in text


def test_long_compile_logs_are_cut(problem):
    from kernelpro.records import CompileResult

    parent = ParentInfo(id="c9", source="x", analysis=None, result=EvalResult(
        verdict=Verdict.COMPILE_ERROR, compile=CompileResult(ok=False, log="error: x\n" * 5000)))
    log = variables(problem, parent)["evaluation"]["compile_log"]
    assert len(log) < 6100 and log.endswith("more characters cut]")


# --- what an expert needs, and nothing of the evaluator's internals -------------------------


def _baseline():
    from kernelpro.records import TimingStats

    t = TimingStats(median_ms=0.4062, iqr_ms=0.01, mean_ms=0.41, min_ms=0.4, max_ms=0.42, cv=0.01, n=50,
                    method="cuda_event+l2_flush")
    return EvalResult(verdict=Verdict.CORRECT, timing=t, baseline=t, device="cuda",
                      measurements={"evaluator": {"flops": 3.4e7, "bytes_min": 1.34e8, "lower_bound_ms": 0.028,
                                                  "reference_call_s": 0.5, "sandbox_landlock": 1.0}})


def test_first_prompt_carries_inputs_tolerances_reference_time_and_bound(problem):
    request = request_for(problem, gpu=SPECS[0], baseline=_baseline(), tolerances={"float32": (1e-4, 1e-4)},
                          inputs=("x: float32 [4096, 4096] contiguous",))
    v = prompt_variables(request, language="cuda", language_required=True)
    text = render("problem.j2", v) + render("first.j2", v)
    assert "x: float32 [4096, 4096] contiguous" in text
    assert "float32: atol 0.0001, rtol 0.0001" in text
    assert "The reference takes 0.4062 ms per call" in text
    assert "Lower bound on this GPU: 0.028 ms (3.4e+07 FLOP, at least 1.34e+08 bytes moved)" in text
    system = render("system.j2", v)
    assert "Toolchain: torch " in system
    assert "# The shape of an answer" in system and "load_inline(" in system and "class ModelNew" in system


def test_evaluator_internals_are_not_sent_as_measurements(problem):
    parent = ParentInfo(id="c0001", source=CUDA_KERNEL, analysis=None, result=EvalResult(
        verdict=Verdict.CORRECT, device="cuda",
        measurements={"evaluator": {"reference_call_s": 0.51, "sandbox_landlock": 1.0},
                      "energy": {"joules_per_call": 0.25}}))
    text = render("refine.j2", prompt_variables(request_for(problem, parent), language="cuda",
                                                language_required=True))
    assert "energy: joules_per_call = 0.25" in text
    assert "reference_call_s" not in text and "sandbox_landlock" not in text


def test_a_cpu_run_does_not_demand_cuda(problem):
    v = prompt_variables(request_for(problem, device="cpu"), language="cuda", language_required=True)
    system = render("system.j2", v)
    assert "Device: CPU" in system
    assert "Write CUDA C++ kernels" not in system and "# Kernel language" not in system
    assert not v["language_required"]
    assert "in cuda kernels" not in render("contract_repair.j2", {**v, "contract_error": "x"})
