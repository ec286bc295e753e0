"""Asks for 64 GiB of host memory in forward."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()

    def forward(self, x):
        big = torch.empty(16 << 30, dtype=torch.float32)
        big.fill_(1.0)
        return x
