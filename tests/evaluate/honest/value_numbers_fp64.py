"""Honest candidate of value_numbers.py: the same four results, the sum of squares taken in
float64 and rounded to float32 at the end (a unit in the last place from the reference's)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        n = int((x > 0).sum().item())
        return x.abs(), n, n * 2 > x.numel(), float((x.double() * x.double()).sum().float().item())
