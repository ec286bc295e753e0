"""A reference that writes its result into its input and returns it: x = 3 x - 1, in place."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mul_(3.0).sub_(1.0)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
