"""Bias, GELU and scaling of an activation: three elementwise passes in eager PyTorch
that a fused kernel does in one. A KernelPro example problem (KernelBench format)."""

import torch
import torch.nn as nn

ROWS = 4096
COLS = 4096


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
