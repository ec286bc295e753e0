"""Boundary benchmark, small problem: bias, GELU and scale of a 1024 x 1024 fp32 activation
(4 MiB in, 4 MiB out)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x + self.bias) * self.scale


def get_inputs():
    return [torch.rand(1024, 1024)]


def get_init_inputs():
    return [1024]
