"""Bias, GELU and scaling of an activation: three elementwise passes in eager PyTorch
that a fused kernel does in one. A KernelPro example problem (KernelBench format).

8192 x 8192 (256 MiB in, 256 MiB out): on the H200 the eager reference at this size took
0.4490 and 0.4498 ms in two evaluations (docs/validation/evaluator_boundary.md), while at
4096 x 4096 (0.09-0.12 ms) every candidate of the demo was flagged noisy, CV 0.29-0.45
(docs/validation/first_hour.md): long enough calls for the timings the demo shows."""

import torch
import torch.nn as nn

ROWS = 8192
COLS = 8192


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.bias
        y = torch.nn.functional.gelu(y)
        return y * self.scale


def get_inputs():
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return [COLS]
