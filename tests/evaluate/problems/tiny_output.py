"""A degenerate problem: outputs of order 1e-6, far below the float32 atol of 1e-4, so an
all-zeros output passes. The evaluator must flag it."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 1e-6


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
