"""Honest candidate of scale_in_place.py that leaves its input alone and returns a new tensor."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 3.0 - 1.0
