"""Cheat: computes the right answer, then overwrites its input (e.g. to use it as scratch)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        out = torch.nn.functional.gelu(x + self.bias) * self.scale
        x.zero_()
        return out
