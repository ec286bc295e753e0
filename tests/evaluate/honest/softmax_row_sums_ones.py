"""Honest candidate of softmax_row_sums.py: the algebra done ahead, a softmax's rows sum to one."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()

    def forward(self, x):
        return torch.ones(x.shape[0], dtype=x.dtype, device=x.device)
