"""The same code as noise_in_forward.py's reference."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x + 0.05 * torch.randn_like(x)
