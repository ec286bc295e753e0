"""Honest candidate of count_then_tensor.py: the number, then the tensor."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.shape[0], 0.5 * x * (1.0 + torch.erf(x * 0.7071067811865476))
