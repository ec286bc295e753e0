"""Honest candidate of linear_sign.py, more exact than the reference: the product in float64,
then the sign. Where the float32 reference's value is within rounding of zero the two may
decide otherwise."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return (x.double() @ self.lin.weight.double().t() + self.lin.bias.double()) > 0
