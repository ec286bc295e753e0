"""Cheat: returns a tensor subclass (which could override comparisons or defer work)."""
import torch
import torch.nn as nn


class Sneaky(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        out = torch.nn.functional.gelu(x + self.bias) * self.scale
        return out.as_subclass(Sneaky)
