"""Honest candidate of scale_in_place.py, in place as the reference."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.addcmul(torch.full_like(x, -1.0), x, torch.full_like(x, 3.0), out=x)
