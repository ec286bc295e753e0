"""A linear layer followed by dropout (p = 0.25): dropout acts in training mode only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        return self.drop(self.linear(x))


def get_inputs():
    return [torch.rand(8, 32)]


def get_init_inputs():
    return [32]
