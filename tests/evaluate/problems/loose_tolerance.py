"""A problem that declares its own tolerance: float32 outputs compared with atol=rtol=1e-2."""

import torch
import torch.nn as nn

KERNELPRO_TOLERANCES = {"float32": (1e-2, 1e-2)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.exp(x)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
