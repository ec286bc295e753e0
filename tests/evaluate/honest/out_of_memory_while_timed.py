"""Honest: the reference's operations, but one call well into the timed calls runs out of
memory (what a multi-GB model meets when the judge's copies take the device's room between
its calls): the judge makes room and makes that call again."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 12:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB (a test's)")
        return torch.nn.functional.gelu(x + self.bias) * self.scale
