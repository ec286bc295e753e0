"""Honest candidate of the degenerate problem tiny_output.py."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 1e-6
