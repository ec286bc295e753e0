"""Wrong only outside [0, 1): drops a ReLU-like clamp that is the identity on uniform [0, 1)
inputs; the N(0, 1) trial catches it. (Problem: gelu of x + bias; this returns a linear
approximation valid for small positive inputs only.)"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        y = x + self.bias
        return torch.where(y > -0.5, torch.nn.functional.gelu(y), torch.zeros_like(y)) * self.scale
