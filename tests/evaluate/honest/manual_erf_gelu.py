"""Honest: GELU written out with erf, scale folded in (rounding differs from the reference)."""
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        y = x + self.bias
        return y * (0.5 * self.scale) * (1.0 + torch.erf(y * (1.0 / math.sqrt(2.0))))
