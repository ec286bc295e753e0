"""Bias, GELU and scaling whose reference runs out of memory on every call from its 20th on
(what a multi-GB reference meets when the evaluation's copies take the device's room while
it is timed): not the problem's fault, and the verdict says so."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls >= 20:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB (a test's)")
        return torch.nn.functional.gelu(x + self.bias) * self.scale


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return [32]
