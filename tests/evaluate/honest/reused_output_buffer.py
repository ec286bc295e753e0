"""Honest: writes every call into the same preallocated output buffer (a common
optimisation that must not be mistaken for caching)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.out = None

    def forward(self, x):
        if self.out is None or self.out.shape != x.shape or self.out.device != x.device:
            self.out = torch.empty_like(x)
        torch.add(x, self.bias, out=self.out)
        self.out.copy_(torch.nn.functional.gelu(self.out) * self.scale)
        return self.out
