"""A matrix product with bias, then GELU: calls of milliseconds on a CPU, most of it the
product; neither linear nor homogeneous in its input."""

import torch
import torch.nn as nn

ROWS = 256
IN = 512
OUT = 512


class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.nn.functional.gelu(self.lin(x))


def get_inputs():
    return [torch.rand(ROWS, IN)]


def get_init_inputs():
    return [IN, OUT]
