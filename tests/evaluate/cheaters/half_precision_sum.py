"""Cheats: sums fp16-rounded inputs, far less accurate than the fp32 reference: must fail
even against the float64 reference."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.half().float().sum(dim=1)
