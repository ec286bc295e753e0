"""Shared pieces of the LLM generator tests: a small problem, a CUDA candidate written
for the tests, and helpers to build requests and read recorded prompts."""

from __future__ import annotations

from kernelpro.api import GenerationRequest, ParentInfo

PROBLEM_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x) * scale"""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return [2.0]
'''

CUDA_KERNEL = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void scaled_relu(const float* x, float* y, float s, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f) * s;
}
torch::Tensor run(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    scaled_relu<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    return y;
}
"""
ext = load_inline(name="scaled_relu", cpp_sources="torch::Tensor run(torch::Tensor x, double s);",
                  cuda_sources=cuda_src, functions=["run"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return ext.run(x.contiguous(), self.scale)
'''


def answer(source: str = CUDA_KERNEL, change: str = "one thread per element, fused relu and scale") -> str:
    """A reply that follows the answer contract."""
    return f"Change: {change}\n\n```python\n{source}```\n"


def request_for(problem, parent: ParentInfo | None = None, **fields) -> GenerationRequest:
    return GenerationRequest(problem=problem, n=fields.pop("n", 1), device=fields.pop("device", "cuda"),
                             parent=parent, **fields)


def user_text(body: dict) -> str:
    """All text a request sends in user turns (text blocks and tool results)."""
    parts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content:
            if block["type"] == "text":
                parts.append(block["text"])
            elif block["type"] == "tool_result":
                c = block["content"]
                parts.append(c if isinstance(c, str) else " ".join(x.get("text", "") for x in c))
    return "\n".join(parts)
