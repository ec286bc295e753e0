"""A reference whose whole result is a write into its input: x += 0.5, returning nothing."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x.add_(0.5)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
