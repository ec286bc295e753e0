"""Problem: sum over the last dimension of a 16384 x 16384 fp32 matrix (1 GiB, memory-bound)."""

import torch
import torch.nn as nn

ROWS = 16384
COLS = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1)


def get_inputs():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return [torch.randn(ROWS, COLS, device=device)]


def get_init_inputs():
    return []
