"""Honest candidate of shift_in_place_only.py."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x += 0.5
