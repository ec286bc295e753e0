"""Indexes out of range on the GPU: a device-side assert (sticky)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()

    def forward(self, x):
        idx = torch.full((4,), 1 << 30, dtype=torch.long, device=x.device)
        return x.flatten()[idx].sum() + x
