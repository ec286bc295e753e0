"""Problem: y = 1.5 * x + 0.25 on a 1 GiB fp32 tensor (memory-bound elementwise)."""

import torch
import torch.nn as nn

N_ELEMENTS = 1 << 28  # 1 GiB of fp32: far above the 50 MB L2, so every call streams DRAM


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 1.5 + 0.25


def get_inputs():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return [torch.randn(N_ELEMENTS, device=device)]


def get_init_inputs():
    return []
