"""Wrong: returns float64 (more precise, but not the reference's dtype)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        return (torch.nn.functional.gelu(x + self.bias) * self.scale).double()
