import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)

    def forward(self, x):
        return torch.tanh(x * self.scale)


def get_inputs():
    return [torch.rand(32, 64)]


def get_init_inputs():
    return [64]
