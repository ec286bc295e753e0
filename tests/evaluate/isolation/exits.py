"""Leaves with os._exit(3) in forward."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()

    def forward(self, x):
        os._exit(3)
