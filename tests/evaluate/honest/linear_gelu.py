"""Honest candidate of linear_gelu.py: the same operations."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.nn.functional.gelu(self.lin(x))
