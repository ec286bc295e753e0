"""The answer contract: code block extraction, ModelNew, signature and language checks."""

from __future__ import annotations

import pytest
from llm_helpers import CUDA_KERNEL

from kernelpro.generate.llm.contract import ContractError, code_blocks, description, parse_answer

TRITON = """import torch
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass

class ModelNew(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
    def forward(self, x):
        return x
"""


def test_the_last_python_block_with_model_new_is_the_candidate(problem):
    text = (
        "Change: vectorized loads\n\nFirst the kernel alone:\n```cuda\n__global__ void k() {}\n```\n"
        "A draft:\n```python\nclass ModelNew: pass\n```\nThe final file:\n```python\n" + CUDA_KERNEL + "```\n"
        "And a usage example:\n```python\nm = ModelNew(2.0)\n```\n"
    )
    assert [tag for tag, _ in code_blocks(text)] == ["cuda", "python", "python", "python"]
    answer = parse_answer(text, problem, "cuda")
    assert answer.source == CUDA_KERNEL  # the usage example mentions ModelNew but is not a file
    assert answer.description == "vectorized loads"


def test_untagged_block_and_prose_description(problem):
    answer = parse_answer("**Fuse relu and scale** in one pass.\n```\n" + CUDA_KERNEL + "```", problem, "cuda")
    assert answer.source == CUDA_KERNEL
    assert answer.description == "Fuse relu and scale** in one pass."
    assert description("## Change: **use float4**\n```python\nx\n```") == "use float4"
    assert len(description("Change: " + "x" * 500)) == 200


@pytest.mark.parametrize("text, error", [
    ("no code at all", "no ```python code block"),
    ("```python\nclass ModelNew:\n    pass\n", "not closed"),
    ("```cuda\n__global__ void k() {}\n```", "no ```python code block"),
    ("```python\nimport torch\n```", "does not define class ModelNew"),
    ("```python\nclass ModelNew(:\n```", "syntax error at line 1"),
    ("```python\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n        return x\n```",
     "ModelNew.forward(x, y) does not match Model.forward(x)"),
    ("```python\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        pass\n```",
     "ModelNew.__init__() does not match Model.__init__(scale)"),
])
def test_contract_errors(problem, text, error):
    with pytest.raises(ContractError, match=error.replace("(", r"\(").replace(")", r"\)")) as exc:
        parse_answer(text, problem, None)
    assert "\n" not in str(exc.value)


def test_language_is_enforced_when_asked(problem):
    plain = CUDA_KERNEL.split("class ModelNew")[1]
    plain_src = "import torch\nclass ModelNew" + plain.replace("ext.run(x.contiguous(), self.scale)", "x")
    with pytest.raises(ContractError, match="no cuda kernel"):
        parse_answer(f"```python\n{plain_src}```", problem, "cuda")
    assert parse_answer(f"```python\n{plain_src}```", problem, None).source == plain_src
    assert parse_answer(f"```python\n{TRITON}```", problem, "triton").source == TRITON
    with pytest.raises(ContractError, match="no triton kernel"):
        parse_answer(f"```python\n{CUDA_KERNEL}```", problem, "triton")
