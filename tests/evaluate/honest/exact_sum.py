"""Honest: the row sums accumulated in float64 and rounded once (closer to the exact sum
than the sequential fp32 reference)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.double().sum(dim=1).float()
