"""Honest candidate of value_numbers.py: the same numbers, computed the same way."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = int((x > 0).sum().item())
        return torch.abs(x), n, n * 2 > x.numel(), float((x * x).sum().item())
