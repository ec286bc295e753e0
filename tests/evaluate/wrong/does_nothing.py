"""Wrong for shift_in_place_only.py: returns None and writes nothing."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return None
