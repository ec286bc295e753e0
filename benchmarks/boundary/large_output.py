"""Boundary benchmark, large problem: three scaled copies of a 2 GiB fp32 input stacked into
one 6 GiB output (16384 x 32768 in, 49152 x 32768 out): what moving and comparing gigabytes
of outputs costs the evaluator."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x * 2.0, torch.tanh(x)], dim=0)


def get_inputs():
    return [torch.rand(16384, 32768)]


def get_init_inputs():
    return []
