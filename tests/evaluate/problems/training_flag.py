"""A forward that reads ``self.training`` itself, with no dropout or batch-norm module: a
scale of 2 in training mode, 3 in eval mode."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * (2.0 if self.training else 3.0)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
