"""Problem: softmax over the rows of an 8192 x 8192 fp32 tensor (256 MiB read, 256 MiB
written: memory-bound, with one exponential per element)."""

import torch
import torch.nn as nn

ROWS = 8192
COLS = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return [torch.randn(ROWS, COLS, device=device)]


def get_init_inputs():
    return []
