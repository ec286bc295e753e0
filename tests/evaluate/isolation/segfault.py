"""Dies from SIGSEGV in forward (copies to and from unmapped low addresses)."""
import ctypes

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()

    def forward(self, x):
        ctypes.memmove(8, 16, 8)
        return x
