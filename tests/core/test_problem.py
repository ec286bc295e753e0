"""Static checks of problem and candidate files."""

from __future__ import annotations

import pytest

from kernelpro.problem import ProblemError, check_candidate, detect_language, load_problem, parse_problem

from helpers import DATA


def test_load_problem_reads_signatures():
    p = load_problem(DATA / "tiny_problem.py")
    assert p.name == "tiny_problem"
    assert p.init_args == ("cols",) and p.forward_args == ("x",)


@pytest.mark.parametrize("source,message", [
    ("x = 1\n", "missing class Model, get_inputs(), get_init_inputs()"),
    ("class Model: pass\ndef get_inputs(): pass\n", "missing get_init_inputs()"),
    ("def (:\n", "syntax error at line 1"),
])
def test_bad_problems(source, message):
    with pytest.raises(ProblemError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_problem(source, "p")


def test_candidate_signature_must_match():
    p = load_problem(DATA / "tiny_problem.py")
    check_candidate((DATA / "good.py").read_text(), p)
    with pytest.raises(ProblemError, match="ModelNew.forward"):
        check_candidate("class ModelNew:\n    def __init__(self, cols): pass\n"
                        "    def forward(self, x, y): pass\n", p)
    with pytest.raises(ProblemError, match="no class ModelNew"):
        check_candidate("class Other: pass\n", p)


def test_detect_language():
    assert detect_language("import torch\n") == "pytorch"
    assert detect_language("from torch.utils.cpp_extension import load_inline\n") == "cuda"
    assert detect_language("import triton\n@triton.jit\ndef k(): pass\n") == "triton"
    assert detect_language('#include <cute/tensor.hpp>\n') == "cute"
