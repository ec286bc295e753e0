"""A reference whose own fp32 error exceeds the float32 tolerance: row sums accumulated one
column at a time (a sequential fp32 sum of 4096 values of size ~1000 with cancellation):
it is up to ~0.5 off the exact sums, more than the tolerance of the outputs near zero."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        acc = x[:, 0]
        for i in range(1, x.shape[1]):
            acc = acc + x[:, i]
        return acc


def get_inputs():
    return [torch.randn(2048, 4096) * 1000.0]


def get_init_inputs():
    return []
