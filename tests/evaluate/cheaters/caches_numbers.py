"""Cheat on value_numbers.py: computes the tensor every call but the Python numbers only on
the first calls (the correctness trials), then returns the last numbers it computed."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.kept = None

    def forward(self, x):
        self.calls += 1
        if self.calls > 4 and self.kept is not None:
            return (x.abs(), *self.kept)
        n = int((x > 0).sum().item())
        self.kept = (n, n * 2 > x.numel(), float((x * x).sum().item()))
        return (x.abs(), *self.kept)
